package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Rules the manifests must keep. The margin is what the process may take
// after its drain deadline (fx's OnStop hooks get the examples'
// fx.StopTimeout, 5 s, even after a late drain) plus a second to exit;
// below it the kubelet's SIGKILL can land on a process that is still
// closing its clients.
const (
	minGraceMargin = 5*time.Second + time.Second
	livePath       = "/healthz/live"
	readyPath      = "/healthz/ready"
)

// Kubernetes defaults for fields a manifest leaves out.
const (
	defaultGrace            = 30
	defaultPeriodSeconds    = 10
	defaultFailureThreshold = 3
	defaultTimeoutSeconds   = 1
)

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
	GRPC *struct {
		Port    int     `yaml:"port"`
		Service *string `yaml:"service"`
	} `yaml:"grpc"`
	TCPSocket *struct {
		Port any `yaml:"port"`
	} `yaml:"tcpSocket"`
	Exec *struct {
		Command []string `yaml:"command"`
	} `yaml:"exec"`
	PeriodSeconds    int `yaml:"periodSeconds"`
	FailureThreshold int `yaml:"failureThreshold"`
	TimeoutSeconds   int `yaml:"timeoutSeconds"`
}

func (p *probe) period() int   { return orDefault(p.PeriodSeconds, defaultPeriodSeconds) }
func (p *probe) failures() int { return orDefault(p.FailureThreshold, defaultFailureThreshold) }
func (p *probe) timeoutS() int { return orDefault(p.TimeoutSeconds, defaultTimeoutSeconds) }

// orDefault is v, or d when v is unset (zero).
func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }

type container struct {
	Name  string `yaml:"name"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Lifecycle      *struct {
		PreStop any `yaml:"preStop"`
	} `yaml:"lifecycle"`
}

func (c *container) env(name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// port resolves a probe or targetPort value (a number or a port name).
func (c *container) port(v any) (int, bool) {
	for _, p := range c.Ports {
		if n, ok := v.(int); ok && n == p.ContainerPort {
			return n, true
		}
		if s, ok := v.(string); ok && s == p.Name {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

type deployment struct {
	Name     string
	Labels   map[string]string
	Grace    *int
	MinReady int // minReadySeconds
	Children []container
}

type service struct {
	Name     string
	Headless bool
	Selector map[string]string
	Ports    []struct {
		Port       int `yaml:"port"`
		TargetPort any `yaml:"targetPort"`
	}
}

type kube struct {
	deployments []deployment
	services    []service
}

// parseKube reads multi-document YAML into the few fields the rules need.
func parseKube(r io.Reader) (*kube, error) {
	k := &kube{}
	dec := yaml.NewDecoder(r)
	for {
		var doc struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
			Spec yaml.Node `yaml:"spec"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return k, nil
		}
		if err != nil {
			return nil, err
		}
		switch doc.Kind {
		case "Deployment":
			var spec struct {
				MinReady int `yaml:"minReadySeconds"`
				Template struct {
					Metadata struct {
						Labels map[string]string `yaml:"labels"`
					} `yaml:"metadata"`
					Spec struct {
						Grace      *int        `yaml:"terminationGracePeriodSeconds"`
						Containers []container `yaml:"containers"`
					} `yaml:"spec"`
				} `yaml:"template"`
			}
			if err := doc.Spec.Decode(&spec); err != nil {
				return nil, fmt.Errorf("deployment %s: %w", doc.Metadata.Name, err)
			}
			t := spec.Template
			k.deployments = append(k.deployments, deployment{doc.Metadata.Name, t.Metadata.Labels, t.Spec.Grace, spec.MinReady, t.Spec.Containers})
		case "Service":
			s := service{Name: doc.Metadata.Name}
			var spec struct {
				ClusterIP string            `yaml:"clusterIP"`
				Selector  map[string]string `yaml:"selector"`
				Ports     yaml.Node         `yaml:"ports"`
			}
			if err := doc.Spec.Decode(&spec); err != nil {
				return nil, fmt.Errorf("service %s: %w", doc.Metadata.Name, err)
			}
			if err := spec.Ports.Decode(&s.Ports); err != nil {
				return nil, fmt.Errorf("service %s: %w", doc.Metadata.Name, err)
			}
			s.Headless, s.Selector = spec.ClusterIP == "None", spec.Selector
			k.services = append(k.services, s)
		}
	}
}

// drainkitContainers are the containers run by drainkit (they set DRAIN_TIMEOUT).
func (k *kube) drainkitContainers() (out []struct {
	d *deployment
	c *container
}) {
	for i := range k.deployments {
		d := &k.deployments[i]
		for j := range d.Children {
			if _, ok := d.Children[j].env("DRAIN_TIMEOUT"); ok {
				out = append(out, struct {
					d *deployment
					c *container
				}{d, &d.Children[j]})
			}
		}
	}
	return out
}

// check returns every rule the manifests break.
func (k *kube) check() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	dks := k.drainkitContainers()
	if len(dks) == 0 {
		bad("no container sets DRAIN_TIMEOUT: nothing checked")
	}
	for _, dc := range dks {
		d, c := dc.d, dc.c
		where := d.Name + "/" + c.Name
		timeout, delay, ready, err := durations(c)
		if err != nil {
			bad("%s: %v", where, err)
			continue
		}
		grace := defaultGrace
		if d.Grace != nil {
			grace = *d.Grace
		}
		if seconds(grace) < timeout+minGraceMargin {
			bad("%s: terminationGracePeriodSeconds %d does not cover DRAIN_TIMEOUT %s with %s margin: the kubelet's SIGKILL would cut the drain",
				where, grace, timeout, minGraceMargin)
		}
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			bad("%s: has a preStop hook: drainkit flips readiness and delays itself on SIGTERM; a preStop sleep only eats the grace period", where)
		}
		errs = append(errs, checkReadiness(where, c, delay, ready)...)
		errs = append(errs, checkRequestTimeout(where, c, timeout, delay)...)
		errs = append(errs, checkLiveness(where, c)...)
		errs = append(errs, checkAddrPorts(where, c)...)
		errs = append(errs, checkRedis(where, c)...)
	}
	errs = append(errs, k.checkServices()...)
	errs = append(errs, k.checkBackends()...)
	return errs
}

// checkRequestTimeout: a gateway (it sets ROOM_GRPC_ADDRS) refuses to
// start unless its REQUEST_TIMEOUT is shorter than DRAIN_TIMEOUT minus
// DRAIN_DELAY, so that the drain can wait for a request that is waiting
// out a fault; set it explicitly, above room-service's LEASE_TTL, so a
// request outlives a crashed owner's lease.
func checkRequestTimeout(where string, c *container, timeout, delay time.Duration) []error {
	if _, gateway := c.env("ROOM_GRPC_ADDRS"); !gateway {
		return nil
	}
	v, ok := c.env("REQUEST_TIMEOUT")
	if !ok {
		return []error{fmt.Errorf("%s: REQUEST_TIMEOUT is not set: the arithmetic needs it explicit", where)}
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return []error{fmt.Errorf("%s: REQUEST_TIMEOUT=%q: %v", where, v, err)}
	case d >= timeout-delay:
		return []error{fmt.Errorf("%s: REQUEST_TIMEOUT %s is not shorter than DRAIN_TIMEOUT %s minus DRAIN_DELAY %s: the gateway refuses to start", where, d, timeout, delay)}
	case d <= roomLeaseTTL:
		return []error{fmt.Errorf("%s: REQUEST_TIMEOUT %s is not above room-service's LEASE_TTL %s: a request would give up before a crashed owner's rooms are taken over", where, d, roomLeaseTTL)}
	}
	return nil
}

// roomLeaseTTL is room-service's default LEASE_TTL, which the manifests keep.
const roomLeaseTTL = time.Second

func durations(c *container) (timeout, delay, ready time.Duration, err error) {
	get := func(name string) time.Duration {
		v, ok := c.env(name)
		if !ok {
			err = errors.Join(err, fmt.Errorf("%s is not set: the arithmetic needs it explicit", name))
			return 0
		}
		d, perr := time.ParseDuration(v)
		if perr != nil {
			err = errors.Join(err, fmt.Errorf("%s=%q: %v", name, v, perr))
		}
		return d
	}
	timeout, delay, ready = get("DRAIN_TIMEOUT"), get("DRAIN_DELAY"), get("HEALTH_READY_TIMEOUT")
	if err == nil && delay >= timeout {
		err = fmt.Errorf("DRAIN_DELAY %s is not shorter than DRAIN_TIMEOUT %s", delay, timeout)
	}
	return timeout, delay, ready, err
}

func checkReadiness(where string, c *container, delay, ready time.Duration) []error {
	p := c.ReadinessProbe
	if p == nil {
		return []error{fmt.Errorf("%s: no readinessProbe", where)}
	}
	var errs []error
	if notice := seconds(p.period() * p.failures()); delay < notice {
		errs = append(errs, fmt.Errorf("%s: DRAIN_DELAY %s is shorter than readiness periodSeconds %d × failureThreshold %d = %s: intake would stop before the kubelet notices",
			where, delay, p.period(), p.failures(), notice))
	}
	if seconds(p.timeoutS()) <= ready {
		errs = append(errs, fmt.Errorf("%s: readiness timeoutSeconds %d does not exceed HEALTH_READY_TIMEOUT %s: a slow evaluation reads as a failed probe",
			where, p.timeoutS(), ready))
	}
	service, _ := c.env("SERVICE_NAME")
	switch {
	case p.HTTPGet != nil:
		if p.HTTPGet.Path != readyPath {
			errs = append(errs, fmt.Errorf("%s: readiness httpGet path %q; want %s", where, p.HTTPGet.Path, readyPath))
		}
		if _, ok := c.port(p.HTTPGet.Port); !ok {
			errs = append(errs, fmt.Errorf("%s: readiness port %v is not a container port", where, p.HTTPGet.Port))
		}
	case p.GRPC != nil:
		if p.GRPC.Service == nil || *p.GRPC.Service != service {
			errs = append(errs, fmt.Errorf("%s: readiness grpc service %v; want SERVICE_NAME %q (\"\" is the whole server)", where, deref(p.GRPC.Service), service))
		}
		if want, ok := listenPort(c, "GRPC_ADDR"); !ok || p.GRPC.Port != want {
			errs = append(errs, fmt.Errorf("%s: readiness grpc port %d is not the GRPC_ADDR port", where, p.GRPC.Port))
		}
	default:
		errs = append(errs, fmt.Errorf("%s: readiness must be httpGet %s or grpc", where, readyPath))
	}
	return errs
}

func deref(s *string) string {
	if s == nil {
		return "<unset>"
	}
	return strconv.Quote(*s)
}

// checkLiveness: liveness is the process's own /healthz/live and nothing
// else. A grpc liveness probe would read grpc.health.v1, which turns
// NOT_SERVING when a dependency fails: every replica restarted at once.
func checkLiveness(where string, c *container) []error {
	p := c.LivenessProbe
	switch {
	case p == nil:
		return []error{fmt.Errorf("%s: no livenessProbe", where)}
	case p.HTTPGet == nil:
		return []error{fmt.Errorf("%s: liveness is not httpGet %s: grpc health and exec probes follow dependencies", where, livePath)}
	case p.HTTPGet.Path != livePath:
		return []error{fmt.Errorf("%s: liveness path %q; want %s (never a dependency)", where, p.HTTPGet.Path, livePath)}
	}
	if _, ok := c.port(p.HTTPGet.Port); !ok {
		return []error{fmt.Errorf("%s: liveness port %v is not a container port", where, p.HTTPGet.Port)}
	}
	return nil
}

var addrPort = regexp.MustCompile(`:(\d+)$`)

// listenPort is the port of the listen address in env var name.
func listenPort(c *container, name string) (int, bool) {
	v, ok := c.env(name)
	if !ok {
		return 0, false
	}
	m := addrPort.FindStringSubmatch(v)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// checkAddrPorts: every listen address is a declared container port.
func checkAddrPorts(where string, c *container) []error {
	var errs []error
	for _, name := range []string{"HTTP_ADDR", "GRPC_ADDR", "ADMIN_ADDR"} {
		v, ok := c.env(name)
		if !ok {
			continue
		}
		m := addrPort.FindStringSubmatch(v)
		if m == nil {
			errs = append(errs, fmt.Errorf("%s: %s=%q has no port", where, name, v))
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if _, ok := c.port(n); !ok {
			errs = append(errs, fmt.Errorf("%s: %s=%q: port %d is not a container port", where, name, v, n))
		}
	}
	return errs
}

// redisURLs are the variables room-service reads Redis's URL from.
var redisURLs = []string{"REDIS_URL", "REDIS_SENTINEL_URL", "REDIS_CLUSTER_URL"}

// checkRedis: a container with leases (LEASE_TTL) names its Redis, through
// a Secret, since the URL carries the password; and none sets REDIS_ADDR,
// which room-service refuses.
func checkRedis(where string, c *container) []error {
	var errs []error
	named := false
	for _, e := range c.Env {
		switch {
		case e.Name == "REDIS_ADDR":
			errs = append(errs, fmt.Errorf("%s: sets REDIS_ADDR, which room-service refuses: set REDIS_URL", where))
		case slices.Contains(redisURLs, e.Name):
			named = true
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				errs = append(errs, fmt.Errorf("%s: %s is not from a Secret (valueFrom.secretKeyRef): a password in a manifest is in every copy of it", where, e.Name))
			}
		}
	}
	if _, leases := c.env("LEASE_TTL"); leases && !named {
		errs = append(errs, fmt.Errorf("%s: takes leases but sets none of %v: it would run on an embedded in-memory Redis", where, redisURLs))
	}
	return errs
}

// checkServices: each Service selects a Deployment and targets its ports.
func (k *kube) checkServices() []error {
	var errs []error
	for _, s := range k.services {
		d := k.selected(s)
		if d == nil {
			errs = append(errs, fmt.Errorf("service %s: selector %v matches no deployment", s.Name, s.Selector))
			continue
		}
		for _, p := range s.Ports {
			target := p.TargetPort
			if target == nil {
				target = p.Port
			}
			found := false
			for i := range d.Children {
				if _, ok := d.Children[i].port(target); ok {
					found = true
				}
			}
			if !found {
				errs = append(errs, fmt.Errorf("service %s: targetPort %v is not a port of deployment %s", s.Name, target, d.Name))
			}
		}
	}
	return errs
}

func (k *kube) selected(s service) *deployment {
	for i := range k.deployments {
		d := &k.deployments[i]
		match := len(s.Selector) > 0
		for key, v := range s.Selector {
			match = match && d.Labels[key] == v
		}
		if match {
			return d
		}
	}
	return nil
}

// checkBackends: ROOM_GRPC_ADDRS names a headless Service (one address per
// ready pod, so grpc-go balances) on a port its pods serve.
func (k *kube) checkBackends() []error {
	var errs []error
	for _, dc := range k.drainkitContainers() {
		v, ok := dc.c.env("ROOM_GRPC_ADDRS")
		if !ok {
			continue
		}
		host, port, found := strings.Cut(strings.TrimPrefix(v, "dns:///"), ":")
		n, _ := strconv.Atoi(port)
		host, _, _ = strings.Cut(host, ".")
		var svc *service
		for i := range k.services {
			if k.services[i].Name == host {
				svc = &k.services[i]
			}
		}
		switch {
		case !found || svc == nil || k.selected(*svc) == nil:
			errs = append(errs, fmt.Errorf("%s: ROOM_GRPC_ADDRS=%q names no Service in the manifests", dc.d.Name, v))
		case !svc.Headless:
			errs = append(errs, fmt.Errorf("%s: ROOM_GRPC_ADDRS=%q: service %s is not headless: one ClusterIP pins every RPC to one pod", dc.d.Name, v, host))
		default:
			d := k.selected(*svc)
			ok := false
			for i := range d.Children {
				if p, set := listenPort(&d.Children[i], "GRPC_ADDR"); set && p == n {
					ok = true
				}
			}
			if !ok {
				errs = append(errs, fmt.Errorf("%s: ROOM_GRPC_ADDRS=%q: port %d is not the GRPC_ADDR port of deployment %s", dc.d.Name, v, n, d.Name))
			}
			if strings.HasPrefix(v, "dns:///") && d.MinReady < grpcDNSMinInterval {
				errs = append(errs, fmt.Errorf("%s: ROOM_GRPC_ADDRS=%q: deployment %s minReadySeconds %d is below %d: grpc-go re-resolves DNS at most every %d s, so a gateway may not know a new pod before the next old one drains",
					dc.d.Name, v, d.Name, d.MinReady, grpcDNSMinInterval, grpcDNSMinInterval))
			}
		}
	}
	return errs
}

// grpcDNSMinInterval is grpc-go's least interval between two DNS
// resolutions of one target, in seconds.
const grpcDNSMinInterval = 30

// readKube reads every manifest under k8s/, applying edit to the text.
func readKube(edit func(name, text string) string) (*kube, error) {
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no manifests in k8s/: %v", err)
	}
	var all bytes.Buffer
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		all.WriteString(edit(filepath.Base(f), string(b)) + "\n---\n")
	}
	return parseKube(&all)
}
