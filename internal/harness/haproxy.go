package harness

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// ProbeInterval is how often a balancer (HAProxy's inter, or the
// in-process one) probes each server's readiness path.
const ProbeInterval = 200 * time.Millisecond

// ProbeFall is how many probes in a row must fail (a non-2xx answer, a
// refused connection, or no answer within the balancer's 1 s check
// timeout) before the balancer takes a server out: Kubernetes'
// failureThreshold 2 with timeoutSeconds 1. With one, a fault's end (every
// server answering its held requests at once) on an overloaded machine
// made every server miss one check, and HAProxy answered 503: the machine
// measured, not the product. Two still take a draining server out within
// 2 × ProbeInterval of its flip.
const ProbeFall = 2

// Server is one backend of a balancer.
type Server struct {
	// Name is the balancer's name for it, as HAProxy's log and stats
	// carry it.
	Name string
	// Addr is where requests go (host:port).
	Addr string
	// CheckAddr is where the readiness path is probed; empty means Addr.
	CheckAddr string
}

func (s Server) checkAddr() string {
	if s.CheckAddr == "" {
		return s.Addr
	}
	return s.CheckAddr
}

// Defaults for [HAProxyConfig].
const (
	DefaultBackend   = "servers"
	DefaultCheckPath = "/healthz/ready"
	DefaultBalance   = "roundrobin"
	DefaultNoServer  = "no server available"
)

// HAProxyConfig describes HAProxy in front of a fixed list of servers.
type HAProxyConfig struct {
	// Front is the address HAProxy listens on. Required.
	Front string
	// Servers are the backends; a server with nothing listening is simply
	// down. Required.
	Servers []Server
	// Backend names the backend in stats and logs; empty means
	// [DefaultBackend].
	Backend string
	// CheckPath is the path every server is probed on with GET, any 2xx
	// being ready; empty means [DefaultCheckPath].
	CheckPath string
	// Balance is the balance algorithm, e.g. "roundrobin" (the default,
	// [DefaultBalance]) or "leastconn".
	Balance string
	// NoServer is the error HAProxy's own 503 carries (no server up, or
	// the connection failed on every try), as {"error":…} with
	// Retry-After; empty means [DefaultNoServer].
	NoServer string
	// FrontendRules are lines added to the frontend section before its
	// default_backend, e.g. log rules.
	FrontendRules []string
	// Dir holds the configuration and the stats socket, and is HAProxy's
	// TMPDIR. Required.
	Dir string
}

// haproxyConfig is HAProxy as a production ingress would be, with
// test-speed timers: a probe of the readiness path every ProbeInterval,
// ProbeFall failures in a row mark a server down, one success up.
//
// HAProxy retries only a connection that failed before the request was
// sent (conn-failure), up to 3 times, on another server (redispatch), as
// a production balancer would. It never retries a server's 5xx: that
// answer goes to the client, which does not retry and counts a failure,
// so a failure the service did not avoid shows in the client's numbers
// instead of being hidden by the balancer. Not empty-response either: a
// server that read the request and closed without an answer may have
// processed it; the client gets HAProxy's 502. HAProxy's own 503 comes
// before any server processed the request, so it carries Retry-After
// (http-error). Requests are logged only when they did not end normally
// (dontlog-normal), unless FrontendRules say otherwise.
var haproxyConfig = template.Must(template.New("haproxy").Parse(`global
    stats socket {{.Socket}} mode 600 level admin
    maxconn 6000
    log stdout format raw local0 info

defaults
    mode http
    log global
    option httplog
    option dontlog-normal
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    timeout check 1s
    maxconn 6000
    retries 3
    option redispatch 1
    retry-on conn-failure
    option http-buffer-request
    http-error status 503 content-type application/json string "{{.NoServer}}" hdr Retry-After 1

frontend front
    bind {{.Front}}
{{- range .FrontendRules}}
    {{.}}
{{- end}}
    default_backend {{.Backend}}

backend {{.Backend}}
    balance {{.Balance}}
    option httpchk GET {{.CheckPath}}
    http-check expect rstatus ^2
    default-server inter {{.Inter}} fall {{.Fall}} rise 1
{{- range .Servers}}
    server {{.Name}} {{.Addr}} check{{.CheckPort}}
{{- end}}
`))

// HAProxy is a running HAProxy (see [StartHAProxy]).
type HAProxy struct {
	proc    *Proc
	cfg     HAProxyConfig
	socket  string
	servers []string // names, by index
}

// HAProxyPath finds HAProxy on PATH or in /usr/sbin (where Debian puts
// it).
func HAProxyPath() (string, error) {
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p, nil
	}
	return exec.LookPath("/usr/sbin/haproxy")
}

// StartHAProxy writes cfg's configuration into cfg.Dir, starts HAProxy
// from path (see [HAProxyPath]) and waits until its stats socket answers,
// which HAProxy opens after binding every listener. Servers start as
// HAProxy starts them, up until their first failed checks: wait with
// [HAProxy.WaitServer] for the state a test needs.
func StartHAProxy(ctx context.Context, path string, cfg HAProxyConfig) (*HAProxy, error) {
	if cfg.Front == "" || cfg.Dir == "" || len(cfg.Servers) == 0 {
		return nil, errors.New("harness: HAProxyConfig.Front, Servers and Dir are required")
	}
	cfg.Backend = or(cfg.Backend, DefaultBackend)
	cfg.CheckPath = or(cfg.CheckPath, DefaultCheckPath)
	cfg.Balance = or(cfg.Balance, DefaultBalance)
	cfg.NoServer = or(cfg.NoServer, DefaultNoServer)
	h := &HAProxy{cfg: cfg, socket: filepath.Join(cfg.Dir, "haproxy.sock")}
	type server struct{ Name, Addr, CheckPort string }
	var servers []server
	for _, s := range cfg.Servers {
		h.servers = append(h.servers, s.Name)
		sv := server{Name: s.Name, Addr: s.Addr}
		if s.checkAddr() != s.Addr {
			_, port, err := net.SplitHostPort(s.checkAddr())
			if err != nil {
				return nil, fmt.Errorf("harness: server %s: check address %q: %w", s.Name, s.CheckAddr, err)
			}
			sv.CheckPort = " port " + port
		}
		servers = append(servers, sv)
	}
	noServer, err := jsonErrorBody(cfg.NoServer)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(cfg.Dir, "haproxy.cfg")
	f, err := os.Create(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	err = haproxyConfig.Execute(f, struct {
		HAProxyConfig
		Socket, Inter, NoServer string
		Fall                    int
		Servers                 []server
	}{cfg, h.socket, fmt.Sprintf("%dms", ProbeInterval.Milliseconds()), noServer, ProbeFall, servers})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("harness: write %s: %w", cfgPath, err)
	}
	if h.proc, err = StartProc("haproxy", path, []string{"TMPDIR=" + cfg.Dir}, "-db", "-f", cfgPath); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		if _, err := h.Stat(ctx); err == nil {
			return h, nil
		}
		select {
		case <-h.proc.Done():
			return nil, fmt.Errorf("harness: haproxy exited; output:\n%s", h.proc.Output())
		case <-ctx.Done():
			h.Close()
			return nil, fmt.Errorf("harness: haproxy stats socket: %w; output:\n%s", ctx.Err(), h.proc.Output())
		case <-time.After(20 * time.Millisecond): // polling an external process
		}
	}
}

// jsonErrorBody is {"error":msg} escaped for an HAProxy quoted string.
func jsonErrorBody(msg string) (string, error) {
	if strings.ContainsAny(msg, "\"\\\n") {
		return "", fmt.Errorf("harness: HAProxyConfig.NoServer %q: no quotes, backslashes or newlines", msg)
	}
	return `{\"error\":\"` + msg + `\"}`, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Name is "haproxy".
func (h *HAProxy) Name() string { return "haproxy" }

// Addr is the address HAProxy listens on.
func (h *HAProxy) Addr() string { return h.cfg.Front }

// Close kills HAProxy and waits for it.
func (h *HAProxy) Close() { h.proc.Kill() }

// Output is HAProxy's log: one line per request that did not end normally.
func (h *HAProxy) Output() string { return h.proc.Output() }

// Stat runs "show stat" on the stats socket and returns its rows, each a
// map from column name (pxname, svname, status, …) to value.
func (h *HAProxy) Stat(ctx context.Context) ([]map[string]string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", h.socket)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := io.WriteString(conn, "show stat\n"); err != nil {
		return nil, err
	}
	r := csv.NewReader(bufio.NewReader(conn))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, errors.New("harness: haproxy: empty show stat")
	}
	head := recs[0]
	head[0] = strings.TrimPrefix(head[0], "# ")
	var rows []map[string]string
	for _, rec := range recs[1:] {
		row := map[string]string{}
		for i, v := range rec {
			if i < len(head) {
				row[head[i]] = v
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// ServerStat is the stats row of server i, or of the whole backend when
// i < 0.
func (h *HAProxy) ServerStat(ctx context.Context, i int) (map[string]string, error) {
	name := "BACKEND"
	if i >= 0 {
		name = h.servers[i]
	}
	rows, err := h.Stat(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if r["pxname"] == h.cfg.Backend && r["svname"] == name {
			return r, nil
		}
	}
	return nil, fmt.Errorf("harness: haproxy: no server %s in show stat", name)
}

// WaitServer waits until HAProxy's checks hold server i up (or down).
func (h *HAProxy) WaitServer(ctx context.Context, i int, up bool) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	want := "DOWN"
	if up {
		want = "UP"
	}
	var last string
	for {
		r, err := h.ServerStat(ctx, i)
		if err == nil {
			last = r["status"]
			if strings.HasPrefix(last, want) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("harness: haproxy server %s is %q; want %s: %w", h.servers[i], last, want, ctx.Err())
		case <-time.After(50 * time.Millisecond): // polling an external process
		}
	}
}

// Retries is how many requests HAProxy retried on another server after
// their connection failed (the backend's wretr plus wredis).
func (h *HAProxy) Retries() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := h.ServerStat(ctx, -1)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(r["wretr"])
	m, _ := strconv.Atoi(r["wredis"])
	return n + m
}
