package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/drainkit/drainkit/internal/harness"
)

// Defaults for [Config], short so a scenario takes seconds: the load
// balancer probes every 200 ms, so a drain delay of a second covers its
// reaction several times over.
const (
	DefaultRooms        = 3
	DefaultGateways     = 2
	DefaultLeaseTTL     = 2 * time.Second
	DefaultDrainDelay   = time.Second
	DefaultDrainTimeout = 10 * time.Second
	// DefaultRequestTimeout is the gateways' REQUEST_TIMEOUT: longer than
	// the longest fault a scenario makes (Redis stopped while a
	// room-service drains, up to its DRAIN_TIMEOUT plus its fx.StopTimeout),
	// so every fault is waited out.
	DefaultRequestTimeout = 15 * time.Second
)

// Config describes a cluster.
type Config struct {
	// Bin are the programs to run (see [Build]).
	Bin Binaries
	// RedisURL is the Redis every room-service uses
	// (redis://[user:password@]host:port[?addr=host:port…]). Required.
	RedisURL string
	// RedisVar is the variable RedisURL is given in: "REDIS_URL" (the
	// default), "REDIS_SENTINEL_URL" or "REDIS_CLUSTER_URL".
	RedisVar string
	// Rooms and Gateways are how many instances run at once; zero means
	// [DefaultRooms], [DefaultGateways].
	Rooms, Gateways int
	// LeaseTTL, DrainDelay and DrainTimeout are passed to every process
	// (room-service gets LEASE_TTL); zero means the Default… constants.
	// A gateway's DRAIN_TIMEOUT is DrainTimeout plus RequestTimeout, so
	// that its drain can wait for a request that is waiting out a fault.
	LeaseTTL, DrainDelay, DrainTimeout time.Duration
	// RequestTimeout is every gateway's REQUEST_TIMEOUT; zero means
	// [DefaultRequestTimeout].
	RequestTimeout time.Duration
	// RoomEnv is added to every room-service's environment.
	RoomEnv []string
	// GatewayEnv, when set, returns what is added to the environment of
	// the gateway named name ("gateway-1", "gateway-2", … in start order).
	GatewayEnv func(name string) []string
	// Balance is HAProxy's balance algorithm for the gateways:
	// "roundrobin" (the default) or "leastconn", which suits long-lived
	// connections (event subscribers). The in-process balancer ignores it.
	Balance string
	// Balancer picks the load balancer in front of the gateways:
	// "haproxy" (the default; an error when it is not installed),
	// "inprocess", or "auto" (HAProxy when installed).
	Balancer string
	// Dir holds the balancer's configuration and socket, and is every
	// process's TMPDIR: nothing the cluster writes lives outside it, so
	// removing it (a test's t.TempDir) removes everything. Required.
	Dir string
}

func (c *Config) defaults() {
	if c.Rooms == 0 {
		c.Rooms = DefaultRooms
	}
	if c.Gateways == 0 {
		c.Gateways = DefaultGateways
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.DrainDelay == 0 {
		c.DrainDelay = DefaultDrainDelay
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Balancer == "" {
		c.Balancer = "haproxy"
	}
	if c.RedisVar == "" {
		c.RedisVar = "REDIS_URL"
	}
}

// Node is one room-service or gateway process in a slot.
type Node struct {
	*harness.Proc
	// Kind is "room-service" or "gateway".
	Kind string
	// Slot is the index of the address the node listens on.
	Slot int
	// Addr is the gRPC address (room-service) or the HTTP address (gateway).
	Addr string
	// Admin serves /healthz/* (the room-service's ADMIN_ADDR; Addr for a gateway).
	Admin string
}

// Drained is what became of one instance a rolling update replaced.
type Drained struct {
	Name string
	// Slot is the slot the instance listened on; the balancer names a
	// gateway's slot [GatewaySlot](Slot).
	Slot     int
	ExitCode int
	// DrainTime is [harness.Proc.DrainTime]: to the drain report, by the
	// process's clock.
	DrainTime time.Duration
	// Signalled is when the harness sent the SIGTERM.
	Signalled time.Time
	// Exited is when the harness saw the process exit: late by the
	// harness's own latency, never early (see [harness.Proc.Exited]).
	Exited time.Time
}

// GatewaySlot is the balancer's name for gateway slot i, as its log
// ([Cluster.StreamEnds]) carries it.
func GatewaySlot(i int) string { return fmt.Sprintf("gw%d", i) }

// Cluster runs room-service and gateway instances on fixed slots behind a
// load balancer.
//
// Slots: every instance listens on one of a fixed list of addresses, one
// more than the instances that run at once. The gateways get every
// room-service slot in ROOM_GRPC_ADDRS, and the balancer every gateway
// slot, so neither is ever reconfigured: a rolling update starts the new
// instance on the free slot, waits until it is ready, SIGTERMs the old one
// and waits for it to exit, whose slot becomes the free one. A slot with
// nothing listening is skipped by grpc-go's health-checked round_robin
// (connection refused) and by the balancer's health checks, as a
// Kubernetes Endpoints list would skip a pod that is not ready.
type Cluster struct {
	cfg      Config
	roomSlot []string // gRPC addresses
	gwSlot   []string // HTTP addresses
	lb       balancer
	start    time.Time
	ports    harness.Ports

	mu    sync.Mutex
	rooms []*Node // by slot, nil when free
	gws   []*Node
	all   []*Node // every node ever started, in order
	seq   map[string]int
	stops map[string][]Window // by node name: when Pause stopped it
	// gwRetries are the retries of the gateways stopped so far.
	gwRetries GatewayRetries
}

// Start starts cfg.Rooms room-services, then cfg.Gateways gateways, then
// the balancer, and waits until the balancer has every gateway up. On
// error, whatever started is stopped.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	cfg.defaults()
	if cfg.RedisURL == "" || cfg.Dir == "" {
		return nil, errors.New("e2e: Config.RedisURL and Config.Dir are required")
	}
	redisURL, err := url.Parse(cfg.RedisURL)
	if err != nil || redisURL.Host == "" {
		// Not the value itself: it may hold a password.
		return nil, errors.New("e2e: Config.RedisURL is not a redis://host:port URL")
	}
	c := &Cluster{cfg: cfg, start: time.Now(), seq: map[string]int{}}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.roomSlot, err = c.ports.Pick(cfg.Rooms+1, redisURL.Host); err != nil {
		return nil, err
	}
	if c.gwSlot, err = c.ports.Pick(cfg.Gateways + 1); err != nil {
		return nil, err
	}
	front, err := c.ports.Pick(1)
	if err != nil {
		return nil, err
	}
	c.rooms = make([]*Node, len(c.roomSlot))
	c.gws = make([]*Node, len(c.gwSlot))
	for i := range cfg.Rooms {
		if _, err := c.StartRoom(ctx, i); err != nil {
			return nil, err
		}
	}
	for i := range cfg.Gateways {
		if _, err := c.startGateway(ctx, i); err != nil {
			return nil, err
		}
	}
	if c.lb, err = startBalancer(ctx, cfg, front[0], c.gwSlot); err != nil {
		return nil, err
	}
	// HAProxy holds a server up until its first failed check: wait until
	// the free slots are down too, so no request of the load goes there.
	for i := range c.gwSlot {
		if err := c.lb.WaitServer(ctx, i, i < cfg.Gateways); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// URL is the balancer's base URL, e.g. http://127.0.0.1:43210.
func (c *Cluster) URL() string { return "http://" + c.lb.Addr() }

// Began is when the cluster started: the zero of the timeline.
func (c *Cluster) Began() time.Time { return c.start }

// BalancerName says which balancer runs: "haproxy" or "inprocess".
func (c *Cluster) BalancerName() string { return c.lb.Name() }

// BalancerRetries is how many requests the balancer itself retried on
// another gateway (connection refused, or 503 from a gateway that
// processed nothing).
func (c *Cluster) BalancerRetries() int { return c.lb.Retries() }

// BalancerLog is the balancer's log (HAProxy logs every request that did
// not end normally).
func (c *Cluster) BalancerLog() string { return c.lb.Output() }

// Rooms returns the running room-service nodes, by slot.
func (c *Cluster) Rooms() []*Node { return c.live(c.rooms) }

// Gateways returns the running gateway nodes, by slot.
func (c *Cluster) Gateways() []*Node { return c.live(c.gws) }

// All returns every node ever started, running or not.
func (c *Cluster) All() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.all)
}

func (c *Cluster) live(slots []*Node) []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, n := range slots {
		if n != nil {
			out = append(out, n)
		}
	}
	return out
}

func (c *Cluster) name(kind string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq[kind]++
	return fmt.Sprintf("%s-%d", kind, c.seq[kind])
}

func ms(d time.Duration) string { return d.String() }

func (c *Cluster) commonEnv(name string) []string {
	return []string{
		// A race-built binary sleeps a second at exit by default, for
		// other goroutines to report races: not the service's drain time.
		"GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"),
		"NODE_ID=" + name,
		"TMPDIR=" + c.cfg.Dir,
		"DRAIN_DELAY=" + ms(c.cfg.DrainDelay),
		"DRAIN_TIMEOUT=" + ms(c.cfg.DrainTimeout),
	}
}

// StartRoom starts a room-service on a free slot (slot < 0: any) and waits
// until it is ready.
func (c *Cluster) StartRoom(ctx context.Context, slot int) (*Node, error) {
	return c.StartRoomEnv(ctx, slot)
}

// StartRoomEnv is StartRoom with extra environment for this instance.
func (c *Cluster) StartRoomEnv(ctx context.Context, slot int, env ...string) (*Node, error) {
	if slot < 0 {
		slot = c.freeSlot(c.rooms)
	}
	admin, err := c.ports.Pick(1)
	if err != nil {
		return nil, err
	}
	name := c.name("room")
	n := &Node{Kind: "room-service", Slot: slot, Addr: c.roomSlot[slot], Admin: admin[0]}
	env = append(append(c.commonEnv(name),
		c.cfg.RedisVar+"="+c.cfg.RedisURL, "GRPC_ADDR="+n.Addr, "ADVERTISE_ADDR="+n.Addr, "ADMIN_ADDR="+n.Admin,
		"LEASE_TTL="+ms(c.cfg.LeaseTTL)), append(c.cfg.RoomEnv, env...)...)
	if n.Proc, err = harness.StartProc(name, c.cfg.Bin.RoomService, env); err != nil {
		return nil, err
	}
	c.add(&c.rooms, n)
	if err := waitReady(ctx, n); err != nil {
		return nil, err
	}
	return n, nil
}

func (c *Cluster) startGateway(ctx context.Context, slot int) (*Node, error) {
	name := c.name("gateway")
	n := &Node{Kind: "gateway", Slot: slot, Addr: c.gwSlot[slot], Admin: c.gwSlot[slot]}
	env := append(c.commonEnv(name), "HTTP_ADDR="+n.Addr, "ROOM_GRPC_ADDRS="+strings.Join(c.roomSlot, ","),
		"REQUEST_TIMEOUT="+ms(c.cfg.RequestTimeout), "DRAIN_TIMEOUT="+ms(c.cfg.DrainTimeout+c.cfg.RequestTimeout)) // the last DRAIN_TIMEOUT wins
	if c.cfg.GatewayEnv != nil {
		env = append(env, c.cfg.GatewayEnv(name)...)
	}
	var err error
	if n.Proc, err = harness.StartProc(name, c.cfg.Bin.Gateway, env); err != nil {
		return nil, err
	}
	c.add(&c.gws, n)
	if err := waitReady(ctx, n); err != nil {
		return nil, err
	}
	return n, nil
}

func (c *Cluster) add(slots *[]*Node, n *Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	(*slots)[n.Slot] = n
	c.all = append(c.all, n)
}

func (c *Cluster) freeSlot(slots []*Node) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Index(slots, nil)
}

// vacate frees n's slot once n has exited.
func (c *Cluster) vacate(slots []*Node, n *Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if slots[n.Slot] == n {
		slots[n.Slot] = nil
	}
}

// Stop SIGTERMs n, waits for it to exit and frees its slot.
func (c *Cluster) Stop(ctx context.Context, n *Node) (Drained, error) {
	if n.Kind == "gateway" {
		if err := c.noteGatewayRetries(ctx, n); err != nil {
			return Drained{}, err
		}
	}
	if err := n.Signal(syscall.SIGTERM); err != nil {
		return Drained{}, err
	}
	code, err := n.Wait(ctx)
	c.vacate(c.rooms, n)
	c.vacate(c.gws, n)
	exited, _ := n.Exited()
	return Drained{Name: n.Name, Slot: n.Slot, ExitCode: code, DrainTime: n.DrainTime(), Signalled: n.Signalled(), Exited: exited}, err
}

// LastExit is the latest exit among drained: the end of a rolling update.
func LastExit(drained []Drained) time.Time {
	var t time.Time
	for _, d := range drained {
		if d.Exited.After(t) {
			t = d.Exited
		}
	}
	return t
}

// Crash SIGKILLs n (a crash: nothing is flushed or released), waits for it
// and frees its slot. It returns the time taken just before the kill was
// sent: n was alive, renewing its leases, until no earlier than that.
func (c *Cluster) Crash(n *Node) time.Time {
	at := time.Now()
	n.Kill()
	c.vacate(c.rooms, n)
	c.vacate(c.gws, n)
	return at
}

// SetRoomService makes bin the program of every room-service started
// from now on: a rolling update to another build.
func (c *Cluster) SetRoomService(bin string) { c.cfg.Bin.RoomService = bin }

// RollRooms replaces every running room-service in turn: start the new
// instance on the free slot, wait until it is ready, SIGTERM the old one,
// wait for it to exit.
func (c *Cluster) RollRooms(ctx context.Context) ([]Drained, error) {
	var out []Drained
	for _, old := range c.Rooms() {
		if _, err := c.StartRoom(ctx, -1); err != nil {
			return out, err
		}
		d, err := c.Stop(ctx, old)
		out = append(out, d)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// RollGateways replaces every running gateway in turn: start the new one
// on the free slot, wait until the balancer has it up, SIGTERM the old
// one, wait for it to exit.
func (c *Cluster) RollGateways(ctx context.Context) ([]Drained, error) {
	var out []Drained
	for _, old := range c.Gateways() {
		n, err := c.startGateway(ctx, c.freeSlot(c.gws))
		if err != nil {
			return out, err
		}
		if err := c.lb.WaitServer(ctx, n.Slot, true); err != nil {
			return out, err
		}
		d, err := c.Stop(ctx, old)
		out = append(out, d)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// Close kills every process still running and the balancer, waits for
// them, and ends the port reservations. It is safe to call more than once.
func (c *Cluster) Close() {
	for _, n := range c.All() {
		n.Kill()
	}
	if c.lb != nil {
		c.lb.Close()
	}
	c.ports.Close()
}

// waitReady waits until n's /healthz/ready answers 200.
func waitReady(ctx context.Context, n *Node) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return harness.WaitReady(ctx, n.Proc, "http://"+n.Admin+"/healthz/ready")
}
