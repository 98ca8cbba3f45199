package e2e

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// balancer is the load balancer in front of the gateway slots.
type balancer interface {
	name() string
	addr() string
	// waitServer waits until the balancer's health checks hold slot up
	// (or down).
	waitServer(ctx context.Context, slot int, up bool) error
	retries() int
	// output is the balancer's log: with HAProxy, one line per request
	// that did not end normally.
	output() string
	close()
}

func startBalancer(ctx context.Context, cfg Config, front string, slots []string) (balancer, error) {
	path, err := haproxyPath()
	switch {
	case cfg.Balancer == "inprocess" || (cfg.Balancer == "auto" && err != nil):
		return startInProcess(slots)
	case cfg.Balancer != "haproxy" && cfg.Balancer != "auto":
		return nil, fmt.Errorf("e2e: Config.Balancer %q: want haproxy, inprocess or auto", cfg.Balancer)
	case err != nil:
		return nil, fmt.Errorf("e2e: haproxy not found (scripts/test installs it): %w", err)
	}
	return startHAProxy(ctx, path, cfg.Dir, front, slots, cfg.Balance)
}

// ProbeInterval is how often the balancer (HAProxy's inter, or the
// in-process one) probes each gateway's /healthz/ready.
const ProbeInterval = 200 * time.Millisecond

// ProbeFall is how many probes in a row must fail (a 503, a refused
// connection, or no answer within the balancer's 1 s check timeout) before
// the balancer takes a gateway out: the deploy manifests' readiness
// failureThreshold (2, with timeoutSeconds 1). With one, a single probe
// answered late took a gateway out: when a fault ends, both gateways
// answer their held requests at the same moment, and on a machine whose
// run queue is many times its two cores, each missed one 1 s check
// timeout at once (HAProxy: "Layer7 timeout, check duration: 1001ms" with
// 169 sessions active) and HAProxy answered 503 "no gateway available".
// A balancer stricter than any production configuration measures the
// machine, not the product. Two failures still take a draining gateway out
// within 2 × ProbeInterval of its flip, well inside DRAIN_DELAY.
const ProbeFall = 2

// haproxyConfig is HAProxy in front of the gateways as a production
// ingress would be, with test-speed timers: a probe of /healthz/ready
// every ProbeInterval, ProbeFall failures in a row mark a gateway down,
// one success up.
//
// HAProxy retries only a connection that failed before the request was
// sent (conn-failure), up to 3 times, on another gateway (redispatch), as
// a production balancer would. It never retries a gateway's 503: that
// answer goes to the client, which does not retry and counts a failure, so
// a failure the system did not wait out shows in the client's numbers
// instead of being hidden by the balancer. Not empty-response either: a
// gateway that read the request and closed without an answer may have
// processed it; the client gets HAProxy's 502 and counts the command as
// having no definite answer. HAProxy's own 503 (no gateway
// up, or the connection failed on every try) comes before any gateway
// processed the request, so it carries Retry-After too (http-error).
var haproxyConfig = template.Must(template.New("haproxy").Funcs(template.FuncMap{"slot": GatewaySlot}).Parse(`global
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
    http-error status 503 content-type application/json string "{\"error\":\"no gateway available\"}" hdr Retry-After 1

frontend rooms
    bind {{.Front}}
    # Event streams are logged when they end, ended well or not, so that
    # their ends are timed by the balancer (StreamEnds); other requests
    # only when they failed.
    no option dontlog-normal
    http-request set-var(txn.sse) bool(true) if { path_end /events }
    http-response set-log-level silent if { status 200 } !{ var(txn.sse) -m bool }
    default_backend gateways

backend gateways
    balance {{.Balance}}
    option httpchk GET /healthz/ready
    http-check expect status 200
    default-server inter {{.Inter}} fall {{.Fall}} rise 1
{{- range $i, $s := .Slots}}
    server {{slot $i}} {{$s}} check
{{- end}}
`))

type haproxy struct {
	proc   *Proc
	front  string
	socket string
}

func startHAProxy(ctx context.Context, path, dir, front string, slots []string, balance string) (*haproxy, error) {
	if balance == "" {
		balance = "roundrobin"
	}
	h := &haproxy{front: front, socket: filepath.Join(dir, "haproxy.sock")}
	cfgPath := filepath.Join(dir, "haproxy.cfg")
	f, err := os.Create(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("e2e: %w", err)
	}
	err = haproxyConfig.Execute(f, struct {
		Socket, Front string
		Inter         string
		Fall          int
		Balance       string
		Slots         []string
	}{h.socket, h.front, fmt.Sprintf("%dms", ProbeInterval.Milliseconds()), ProbeFall, balance, slots})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("e2e: write %s: %w", cfgPath, err)
	}
	if h.proc, err = StartProc("haproxy", path, []string{"TMPDIR=" + dir}, "-db", "-f", cfgPath); err != nil {
		return nil, err
	}
	// Ready once the stats socket answers: HAProxy opens it after binding
	// every listener.
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		if _, err := h.stat(ctx); err == nil {
			return h, nil
		}
		select {
		case <-h.proc.Done():
			return nil, fmt.Errorf("e2e: haproxy exited; output:\n%s", h.proc.Output())
		case <-ctx.Done():
			h.close()
			return nil, fmt.Errorf("e2e: haproxy stats socket: %w; output:\n%s", ctx.Err(), h.proc.Output())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (h *haproxy) name() string   { return "haproxy" }
func (h *haproxy) addr() string   { return h.front }
func (h *haproxy) close()         { h.proc.Kill() }
func (h *haproxy) output() string { return h.proc.Output() }

// stat runs "show stat" on the stats socket and returns its rows, each a
// map from column name to value.
func (h *haproxy) stat(ctx context.Context) ([]map[string]string, error) {
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
		return nil, errors.New("e2e: haproxy: empty show stat")
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

func (h *haproxy) waitServer(ctx context.Context, slot int, up bool) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	name, want := GatewaySlot(slot), "DOWN"
	if up {
		want = "UP"
	}
	var last string
	for {
		rows, err := h.stat(ctx)
		for _, r := range rows {
			if r["pxname"] == "gateways" && r["svname"] == name {
				last = r["status"]
			}
		}
		if err == nil && strings.HasPrefix(last, want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("e2e: haproxy server %s is %q; want %s: %w", name, last, want, ctx.Err())
		case <-time.After(50 * time.Millisecond): // polling an external process
		}
	}
}

func (h *haproxy) retries() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, _ := h.stat(ctx)
	for _, r := range rows {
		if r["pxname"] == "gateways" && r["svname"] == "BACKEND" {
			n, _ := strconv.Atoi(r["wretr"])
			m, _ := strconv.Atoi(r["wredis"])
			return n + m
		}
	}
	return 0
}
