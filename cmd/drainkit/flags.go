package main

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Defaults of the drill's flags.
const (
	defaultInstances = 3
	defaultReady     = "/healthz/ready"
	defaultStart     = 30 * time.Second
	defaultLB        = "auto"
	defaultCall      = "/grpc.health.v1.Health/Check"
	readyGRPC        = "grpc" // -ready grpc: gRPC health on {port}
	defaultLag       = 2 * time.Second
	defaultRate      = 50
	defaultWarmup    = time.Second
	defaultTail      = 2 * time.Second
	defaultTimeout   = 10 * time.Second
	defaultGrace     = 30 * time.Second // Kubernetes' terminationGracePeriodSeconds
	maxRate          = 5000
	maxRequests      = 1_000_000
)

const drillUsage = `Usage: drainkit drill [flags] -- <command> [args]

Runs a rolling update of <command> on this machine and says whether a
client lost a request. It starts -n instances, each with its own loopback
port passed through the environment, behind a load balancer; sends an
open-loop load of -rate requests a second (never retried); replaces every
instance in turn as a Deployment with maxSurge 1, maxUnavailable 0 does
(start a new one, wait until it is ready, SIGTERM an old one, wait for it to
exit, SIGKILL after -grace); and prints what the clients saw.

Give the service's own binary: "go run" does not pass SIGTERM on to the
program it builds. Build it first (go build -o /tmp/svc ./cmd/svc).

Instances:
  -n N              instances, replaced one at a time (default %d)
  -env KEY=VALUE    environment of every instance, beside the drill's own;
                    repeatable. Placeholders: {port} the instance's own port
                    (required in one -env), {admin} a second port of its
                    own, {name} its name (i1, i2, ...), {index} its number.
                    e.g. -env 'ADDR=127.0.0.1:{port}' -env 'ADMIN_ADDR=127.0.0.1:{admin}'
  -ready URL        readiness: a path on {port}, or a URL template such as
                    http://127.0.0.1:{admin}/healthz/ready; any 2xx is ready;
                    or "grpc": gRPC health SERVING on {port} (default %s,
                    with -grpc grpc)
  -start D          how long an instance may take to become ready (default %s)
  -grace D          how long an old instance may take to exit after SIGTERM
                    before it is SIGKILLed (default %s)

Balancer:
  -lb MODE          haproxy: HAProxy probing the readiness URL every 200ms,
                      2 failures take an instance out, 1 success puts it back;
                      retries a request only when its connection failed, never
                      a 5xx. inprocess: the same rules in the drill.
                    auto: haproxy when installed, else inprocess.
                    kube: as kube-proxy does after a pod's deletion: no
                      checks, no retries; an instance stays in until -lag
                      after its SIGTERM, whatever its readiness says.
                    roundrobin (-grpc only, its default): grpc-go's
                      round_robin with health checking over the instances'
                      addresses, as a headless Service's DNS gives them: an
                      address is removed -lag after its instance's SIGTERM.
                    (default %s)
  -lag D            with -lb kube or roundrobin: how long endpoint removal
                    takes (default %s)

Load:
  -rate R           requests per second, started on schedule whatever became
                    of earlier ones (default %d, at most %d)
  -method M         request method (default GET)
  -path P           request path; repeatable, used round robin (default /)
  -body S           request body
  -header 'K: V'    request header; repeatable
  -timeout D        how long a request may take (default %s)
  -warmup D         load before the update begins (default %s)
  -tail D           load after the update ends (default %s)
  -duration D       load for exactly D instead of until the update ends
                    plus -tail
  -grpc             unary gRPC calls instead of HTTP requests, with no
                    configured retry; grpc-go's transparent retries of calls
                    no server processed cannot be turned off and are counted
                    as client retries; readiness is gRPC health on {port}
                    unless -ready says otherwise
  -call M           with -grpc: the method, /package.Service/Method
                    (default %s)
  -request HEX      with -grpc: its request message, encoded, in hex
                    (default empty: every field at its default)

Output:
  -json             write the verdict as one JSON document instead of the table
  -html FILE        also write the update as a picture to FILE: one page,
                    no network needed (requests per 100ms by outcome, each
                    instance's life, every failure with its cause)

Exit status: 0 when no request failed and every old instance exited 0
before -grace; 1 otherwise; 2 when the drill could not run (bad flags, a
command not found, an instance that exited or never became ready).

Example:
  go build -o /tmp/http-naive ./examples/http-naive
  drainkit drill -lb kube -lag 2s -env 'ADDR=127.0.0.1:{port}' -path /hello -- /tmp/http-naive
`

// drillConfig is a drill, from its flags.
type drillConfig struct {
	Instances    int
	Env          []string
	Ready        string // a URL template (http://127.0.0.1:{port}/healthz/ready) or readyGRPC
	Start, Grace time.Duration
	LB           string
	Lag          time.Duration
	Rate         int
	Method       string
	Paths        []string
	Body         string
	Header       http.Header
	Host         string // a Host header given with -header
	Timeout      time.Duration
	Warmup, Tail time.Duration
	Duration     time.Duration // zero: until the update ends plus Tail
	GRPC         bool          // unary gRPC calls instead of HTTP requests
	Call         string        // the gRPC method, /package.Service/Method
	Request      []byte        // its request message, encoded
	JSON         bool
	HTML         string   // a file for the page, or empty
	Command      []string // Command[0] resolved to its path
}

// usesAdmin reports whether the instances need a second port.
func (c *drillConfig) usesAdmin() bool {
	return strings.Contains(c.Ready, "{admin}") || strings.Contains(strings.Join(c.Env, "\n"), "{admin}")
}

// listFlag is a repeatable string flag.
type listFlag []string

// String joins the values with commas.
func (l *listFlag) String() string { return strings.Join(*l, ",") }

// Set adds a value: the flag repeats.
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// errHelp is -h: the usage was printed, nothing is wrong.
var errHelp = errors.New("help requested")

// parseDrill reads the drill's flags and command from args. Every error
// names the flag and the value it refused.
func parseDrill(args []string, output io.Writer) (*drillConfig, error) {
	c := &drillConfig{Header: http.Header{}}
	fs := flag.NewFlagSet("drill", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned; -h prints drillUsage
	var env, paths, headers listFlag
	fs.IntVar(&c.Instances, "n", defaultInstances, "")
	fs.Var(&env, "env", "")
	fs.StringVar(&c.Ready, "ready", defaultReady, "")
	fs.DurationVar(&c.Start, "start", defaultStart, "")
	fs.DurationVar(&c.Grace, "grace", defaultGrace, "")
	fs.StringVar(&c.LB, "lb", defaultLB, "")
	fs.DurationVar(&c.Lag, "lag", defaultLag, "")
	fs.IntVar(&c.Rate, "rate", defaultRate, "")
	fs.StringVar(&c.Method, "method", http.MethodGet, "")
	fs.Var(&paths, "path", "")
	fs.StringVar(&c.Body, "body", "", "")
	fs.Var(&headers, "header", "")
	fs.DurationVar(&c.Timeout, "timeout", defaultTimeout, "")
	fs.DurationVar(&c.Warmup, "warmup", defaultWarmup, "")
	fs.DurationVar(&c.Tail, "tail", defaultTail, "")
	fs.DurationVar(&c.Duration, "duration", 0, "")
	fs.BoolVar(&c.GRPC, "grpc", false, "")
	fs.StringVar(&c.Call, "call", defaultCall, "")
	request := fs.String("request", "", "")
	fs.BoolVar(&c.JSON, "json", false, "")
	fs.StringVar(&c.HTML, "html", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(output, drillUsage, defaultInstances, defaultReady, defaultStart, defaultGrace,
				defaultLB, defaultLag, defaultRate, maxRate, defaultTimeout, defaultWarmup, defaultTail, defaultCall)
			return nil, errHelp
		}
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c.Env, c.Paths, c.Command = env, paths, fs.Args()
	if len(c.Paths) == 0 {
		c.Paths = []string{"/"}
	}
	for _, check := range []func() error{
		func() error { return c.checkCommand() },
		func() error { return c.checkEnv() },
		func() error { return c.checkGRPC(set, *request) },
		func() error { return c.checkReady() },
		func() error { return c.checkBalancer(set["lag"]) },
		func() error { return c.checkLoad(headers, set["tail"]) },
		func() error { return c.checkHTML(set["html"]) },
	} {
		if err := check(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *drillConfig) checkCommand() error {
	if len(c.Command) == 0 {
		return errors.New("no command: give the service's command line after --, e.g. drainkit drill -env 'ADDR=127.0.0.1:{port}' -- ./my-service")
	}
	if filepath.Base(c.Command[0]) == "go" && len(c.Command) > 1 && c.Command[1] == "run" {
		return errors.New(`command "go run …": go run does not pass SIGTERM on to the program it builds, so the drill would time go's exit, not the service's; build it first (go build -o /tmp/svc ./cmd/svc) and give /tmp/svc`)
	}
	path, err := exec.LookPath(c.Command[0])
	if err != nil {
		return fmt.Errorf("command %q: %w", c.Command[0], err)
	}
	c.Command[0] = path
	if c.Instances < 1 || c.Instances > 100 {
		return fmt.Errorf("-n %d: want 1 to 100 instances", c.Instances)
	}
	return nil
}

// placeholder matches what may be a placeholder in a template.
var placeholder = regexp.MustCompile(`\{[a-z]+\}`)

// checkTemplate refuses a placeholder the drill does not know.
func checkTemplate(flagName, t string) error {
	for _, p := range placeholder.FindAllString(t, -1) {
		switch p {
		case "{port}", "{admin}", "{name}", "{index}":
		default:
			return fmt.Errorf("%s %q: unknown placeholder %s; want {port}, {admin}, {name} or {index}", flagName, t, p)
		}
	}
	return nil
}

func (c *drillConfig) checkEnv() error {
	port := false
	for _, e := range c.Env {
		k, _, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			return fmt.Errorf("-env %q: want KEY=VALUE", e)
		}
		if err := checkTemplate("-env", e); err != nil {
			return err
		}
		port = port || strings.Contains(e, "{port}")
	}
	if !port {
		return errors.New("no -env has {port}: each instance needs a port of its own, and the drill must know it; e.g. -env 'ADDR=127.0.0.1:{port}'")
	}
	return nil
}

// protocol is the load's: "grpc" or "http".
func (c *drillConfig) protocol() string {
	if c.GRPC {
		return "grpc"
	}
	return "http"
}

// methodName matches a gRPC method's full name.
var methodName = regexp.MustCompile(`^/[A-Za-z_][A-Za-z0-9_.]*/[A-Za-z_][A-Za-z0-9_]*$`)

// checkGRPC refuses the flags of one protocol given with the other, a
// malformed -call and -request bytes that are not hex; with -grpc the
// readiness is gRPC health on {port} and the balancer round_robin, unless
// given.
func (c *drillConfig) checkGRPC(set map[string]bool, request string) error {
	if !c.GRPC {
		for _, f := range []string{"call", "request"} {
			if set[f] {
				return fmt.Errorf("-%s is for a gRPC load: add -grpc, or give -method and -path for HTTP", f)
			}
		}
		if c.LB == "roundrobin" {
			return errors.New("-lb roundrobin is grpc-go's balancer: add -grpc, or use -lb haproxy, inprocess or kube for HTTP")
		}
		return nil
	}
	for _, f := range []string{"method", "path", "body", "header"} {
		if set[f] {
			return fmt.Errorf("-%s is for an HTTP load: with -grpc, -call names the method and -request its message", f)
		}
	}
	if !methodName.MatchString(c.Call) {
		return fmt.Errorf("-call %q: want a method's full name, /package.Service/Method, e.g. %s", c.Call, defaultCall)
	}
	b, err := hex.DecodeString(request)
	if err != nil {
		return fmt.Errorf("-request %q: want the request message's bytes in hex (protoc --encode … | xxd -p): %w", request, err)
	}
	c.Request = b
	switch c.LB {
	case "auto":
		c.LB = "roundrobin"
	case "roundrobin", "kube":
	default:
		return fmt.Errorf("-lb %q: a gRPC load goes through -lb roundrobin (grpc-go's client-side balancer) or kube", c.LB)
	}
	if !set["ready"] {
		c.Ready = readyGRPC
	}
	return nil
}

func (c *drillConfig) checkReady() error {
	if c.Ready == readyGRPC {
		if !c.GRPC && c.LB != "kube" { // HAProxy and the in-process balancer check over HTTP
			return fmt.Errorf("-ready grpc: the %s balancer checks readiness over HTTP; give an HTTP -ready, or use -grpc or -lb kube", c.LB)
		}
		return nil
	}
	if strings.HasPrefix(c.Ready, "/") {
		c.Ready = "http://127.0.0.1:{port}" + c.Ready
	}
	if err := checkTemplate("-ready", c.Ready); err != nil {
		return err
	}
	u, err := url.Parse(expand(c.Ready, instanceVars{Port: "1", Admin: "2", Name: "i1", Index: 1}))
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("-ready %q: want a path such as /healthz/ready or a URL such as http://127.0.0.1:{admin}/healthz/ready", c.Ready)
	}
	if ip := net.ParseIP(u.Hostname()); (ip == nil || !ip.IsLoopback()) && u.Hostname() != "localhost" {
		return fmt.Errorf("-ready %q: the drill probes loopback only; want host 127.0.0.1", c.Ready)
	}
	if p := u.Port(); p != "1" && p != "2" {
		return fmt.Errorf("-ready %q: want the port {port} or {admin}", c.Ready)
	}
	if strings.Contains(c.Ready, "{admin}") && !strings.Contains(strings.Join(c.Env, "\n"), "{admin}") {
		return fmt.Errorf("-ready %q probes {admin}, but no -env passes {admin} to the service", c.Ready)
	}
	return nil
}

func (c *drillConfig) checkBalancer(lagSet bool) error {
	switch c.LB {
	case "auto", "haproxy", "inprocess", "kube", "roundrobin":
	default:
		return fmt.Errorf("-lb %q: want auto, haproxy, inprocess, kube or (with -grpc) roundrobin", c.LB)
	}
	lagged := c.LB == "kube" || c.LB == "roundrobin"
	if lagSet && !lagged {
		return fmt.Errorf("-lag %s: only -lb kube and roundrobin have an endpoint lag; the other balancers follow readiness", c.Lag)
	}
	if c.Lag < 0 {
		return fmt.Errorf("-lag %s: must not be negative", c.Lag)
	}
	if !lagged {
		c.Lag = 0
	}
	return nil
}

// checkLoad refuses a load the drill cannot send; tailGiven says -tail was
// given, which -duration would ignore.
func (c *drillConfig) checkLoad(headers []string, tailGiven bool) error {
	switch {
	case c.Rate < 1 || c.Rate > maxRate:
		return fmt.Errorf("-rate %d: want 1 to %d requests a second", c.Rate, maxRate)
	case c.Timeout <= 0:
		return fmt.Errorf("-timeout %s: must be positive", c.Timeout)
	case c.Start <= 0:
		return fmt.Errorf("-start %s: must be positive", c.Start)
	case c.Grace <= 0:
		return fmt.Errorf("-grace %s: must be positive", c.Grace)
	case c.Warmup < 0:
		return fmt.Errorf("-warmup %s: must not be negative", c.Warmup)
	case c.Tail < 0:
		return fmt.Errorf("-tail %s: must not be negative", c.Tail)
	case c.Duration < 0:
		return fmt.Errorf("-duration %s: must not be negative", c.Duration)
	case c.Duration > 0 && tailGiven:
		return fmt.Errorf("-tail %s: with -duration the load runs exactly %s; give one of them", c.Tail, c.Duration)
	case c.Method == "" || strings.ContainsAny(c.Method, " \t\r\n/:"):
		return fmt.Errorf("-method %q: want a method such as GET or POST", c.Method)
	}
	for _, p := range c.Paths {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("-path %q: want a path starting with /; the drill sends to its own balancer", p)
		}
		if _, err := url.ParseRequestURI(p); err != nil {
			return fmt.Errorf("-path %q: %w", p, err)
		}
	}
	for _, h := range headers {
		k, v, ok := strings.Cut(h, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return fmt.Errorf("-header %q: want 'Name: value'", h)
		}
		if strings.EqualFold(k, "Host") {
			c.Host = v
			continue
		}
		c.Header.Add(k, v)
	}
	if n := c.loadBoundSeconds() * float64(c.Rate); n > maxRequests {
		length := "-duration " + c.Duration.String()
		if c.Duration == 0 {
			length = fmt.Sprintf("up to %.0fs (the bound -n, -start, -grace, -lag, -warmup and -tail give the update)", c.loadBoundSeconds())
		}
		return fmt.Errorf("-rate %d for %s is %.0f requests; the drill sends at most %d", c.Rate, length, n, maxRequests)
	}
	return nil
}

// checkHTML refuses an -html file that could not be written: the page
// comes at the end of the drill, too late to find out.
func (c *drillConfig) checkHTML(given bool) error {
	if !given {
		return nil
	}
	if c.HTML == "" {
		return errors.New(`-html "": want a file for the page, e.g. -html /tmp/drill.html`)
	}
	if st, err := os.Stat(c.HTML); err == nil && st.IsDir() {
		return fmt.Errorf("-html %q is a directory; want a file, e.g. -html %s", c.HTML, filepath.Join(c.HTML, "drill.html"))
	}
	dir := filepath.Dir(c.HTML)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("-html %q: directory %s does not exist", c.HTML, dir)
	}
	return nil
}

// loadBound is the longest the load can run: -duration, or the longest an
// update can take plus the warm-up and the tail.
// loadBoundSeconds is loadBound in seconds, summed without overflowing:
// checked before loadBound is used, it refuses what a Duration cannot hold.
func (c *drillConfig) loadBoundSeconds() float64 {
	if c.Duration > 0 {
		return c.Duration.Seconds()
	}
	per := c.Start.Seconds() + c.Grace.Seconds() + c.Lag.Seconds() + 25
	return c.Warmup.Seconds() + float64(c.Instances)*per + c.Tail.Seconds()
}

// loadBound is loadBoundSeconds as a Duration, once checkLoad has refused
// what one cannot hold.
func (c *drillConfig) loadBound() time.Duration {
	if c.Duration > 0 {
		return c.Duration
	}
	return time.Duration(c.loadBoundSeconds() * float64(time.Second))
}

// instanceVars are the values of one instance's placeholders.
type instanceVars struct {
	Port, Admin, Name string
	Index             int
}

// expand fills t's placeholders.
func expand(t string, v instanceVars) string {
	return strings.NewReplacer("{port}", v.Port, "{admin}", v.Admin, "{name}", v.Name, "{index}", strconv.Itoa(v.Index)).Replace(t)
}
