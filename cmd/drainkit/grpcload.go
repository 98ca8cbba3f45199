package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/health" // registers client-side health checking for round_robin
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/internal/harness"
)

// Failure causes of a gRPC call, by its status code.
const (
	causeUnavailable = "unavailable"
	causeDeadline    = "deadline_exceeded"
)

// grpcCauses are the causes of a failed call, in the order the verdict
// lists them; failed_by_grpc_code has every code.
var grpcCauses = []string{causeUnavailable, causeDeadline, causeOther}

// grpcPool is how many client connections the load spreads its calls
// over: many clients, as a Service has, each with its own connection.
const grpcPool = 8

// grpcCaller makes the -call with the -request bytes, round robin over
// its connections.
type grpcCaller struct {
	conns   []*grpc.ClientConn
	method  string
	request []byte
	retried *atomic.Int64 // grpc-go's transparent retries on these connections
}

// retries is how many calls grpc-go retried on its own.
func (c grpcCaller) retries() int { return int(c.retried.Load()) }

func (c grpcCaller) call(ctx context.Context, i int, o *outcome) {
	var reply []byte
	err := c.conns[i%len(c.conns)].Invoke(ctx, c.method, &c.request, &reply, grpc.ForceCodec(rawCodec{}))
	if err == nil {
		return
	}
	st := status.Convert(err)
	o.code, o.err = st.Code().String(), err.Error()
	switch st.Code() {
	case codes.Unavailable:
		o.cause = causeUnavailable
	case codes.DeadlineExceeded:
		o.cause = causeDeadline
	default:
		o.cause = causeOther
	}
}

// close closes the caller's connections. The roundrobin frontend's, which
// it lends, it closes again itself: a second Close only returns an error.
func (c grpcCaller) close() {
	for _, cc := range c.conns {
		cc.Close()
	}
}

// rawCodec sends -request's bytes as they are and keeps the reply's: the
// drill knows no message types. Its name is proto's, so the server
// decodes the bytes as the method's request message.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// dialOptions are every drill connection's: plain text and no configured
// retry. grpc-go still retries, transparently, a call the server never
// processed (it never left the client, or came past a GOAWAY's last
// stream): WithDisableRetry cannot turn that off, so retries counts it.
func dialOptions(retries *atomic.Int64, more ...grpc.DialOption) []grpc.DialOption {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry()}
	if retries != nil {
		opts = append(opts, grpc.WithStatsHandler(retryCounter{retries}))
	}
	return append(opts, more...)
}

// retryCounter counts the attempts grpc-go makes as transparent retries.
type retryCounter struct{ n *atomic.Int64 }

func (c retryCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (c retryCounter) HandleRPC(_ context.Context, s stats.RPCStats) {
	if b, ok := s.(*stats.Begin); ok && b.IsTransparentRetryAttempt {
		c.n.Add(1)
	}
}
func (c retryCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (c retryCounter) HandleConn(context.Context, stats.ConnStats)                       {}

// kubeGRPC is a Service's ClusterIP as gRPC clients meet it: each client
// connection is placed on an endpoint when it is dialled and stays there
// (pick_first, one address); after a GOAWAY or a broken connection it is
// dialled again, placed anew.
func (f *kube) grpcCaller(cfg *drillConfig) (caller, error) {
	c := grpcCaller{method: cfg.Call, request: cfg.Request, retried: new(atomic.Int64)}
	for range grpcPool {
		cc, err := grpc.NewClient("passthrough:///kube", dialOptions(c.retried, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return f.endpoints.DialContext(ctx, "tcp", "")
		}))...)
		if err != nil {
			c.close()
			return nil, err
		}
		c.conns = append(c.conns, cc)
	}
	return c, nil
}

// roundRobin is grpc-go's client-side round_robin with health checking,
// over the instances' addresses as a headless Service's DNS gives them:
// an instance's address is added once it is ready and removed -lag after
// its SIGTERM. Health checking takes an instance out as soon as it
// answers NOT_SERVING, whatever the addresses say.
type roundRobin struct {
	addrs   []string // by instance
	lag     time.Duration
	start   time.Duration // -start: how long admit waits for a pick
	r       *manual.Resolver
	conn    *grpc.ClientConn
	retried atomic.Int64 // grpc-go's transparent retries

	mu     sync.Mutex
	in     []string
	timers []*time.Timer
}

func newRoundRobin(cfg *drillConfig, insts []*instance) (*roundRobin, error) {
	f := &roundRobin{lag: cfg.Lag, start: cfg.Start, r: manual.NewBuilderWithScheme("drill")}
	for _, in := range insts {
		f.addrs = append(f.addrs, in.addr)
	}
	f.r.InitialState(resolver.State{})
	conn, err := grpc.NewClient("drill:///instances", dialOptions(&f.retried, grpc.WithResolvers(f.r),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":""}}`))...)
	if err != nil {
		return nil, err
	}
	f.conn = conn
	return f, nil
}

func (f *roundRobin) name() string { return "roundrobin" }
func (f *roundRobin) caller(cfg *drillConfig) (caller, error) {
	return grpcCaller{conns: []*grpc.ClientConn{f.conn}, method: cfg.Call, request: cfg.Request, retried: &f.retried}, nil
}

// readdAfter is how long admit waits for round_robin to use a new address
// before it gives the address to the balancer again.
const readdAfter = 3 * time.Second

// admit adds instance i's address and waits until a call lands on it:
// round_robin picks an address only once its connection is ready and its
// health SERVING, and an old instance must not be stopped before then.
func (f *roundRobin) admit(ctx context.Context, i int) error {
	f.set(f.addrs[i], true)
	ctx, cancel := context.WithTimeout(ctx, f.start)
	defer cancel()
	health := healthpb.NewHealthClient(f.conn)
	tick := time.NewTicker(10 * time.Millisecond) // the next look, as the readiness probes' period
	defer tick.Stop()
	readd := time.Now().Add(readdAfter)
	for {
		var p peer.Peer
		_, err := health.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.WaitForReady(true))
		if err == nil && p.Addr != nil && p.Addr.String() == f.addrs[i] {
			return nil
		}
		if time.Now().After(readd) {
			// grpc-go's health listener for a new address sometimes never
			// reports (the instance's Watch answers SERVING at once): a new
			// SubConn for the address is watched afresh. The drill's client,
			// not the instance, is what this works around.
			f.set(f.addrs[i], false)
			f.set(f.addrs[i], true)
			readd = time.Now().Add(readdAfter)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("round_robin did not pick %s within -start %s: %w", f.addrs[i], f.start, ctx.Err())
		case <-tick.C:
		}
	}
}
func (f *roundRobin) absent(context.Context, int) error { return nil }
func (f *roundRobin) terminating(i int, at time.Time) time.Time {
	leave := at.Add(f.lag)
	f.mu.Lock()
	f.timers = append(f.timers, time.AfterFunc(time.Until(leave), func() { f.set(f.addrs[i], false) }))
	f.mu.Unlock()
	return leave
}
func (f *roundRobin) retries() int { return 0 }
func (f *roundRobin) close() {
	f.mu.Lock()
	for _, t := range f.timers {
		t.Stop()
	}
	f.mu.Unlock()
	f.conn.Close()
}

// set adds or removes addr and tells the client.
func (f *roundRobin) set(addr string, in bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.in = slices.DeleteFunc(f.in, func(a string) bool { return a == addr })
	if in {
		f.in = append(f.in, addr)
	}
	var st resolver.State
	for _, a := range f.in {
		st.Addresses = append(st.Addresses, resolver.Address{Addr: a})
	}
	f.r.UpdateState(st)
}

// waitServing waits until addr's gRPC health service answers SERVING for
// the whole server (service ""), the -ready grpc form.
func waitServing(ctx context.Context, p *harness.Proc, addr string) error {
	conn, err := grpc.NewClient("passthrough:///"+addr, dialOptions(nil)...)
	if err != nil {
		return err
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	return harness.WaitUntil(ctx, p, "gRPC health on "+addr, "answered SERVING", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		switch {
		case err != nil:
			return err
		case resp.GetStatus() != healthpb.HealthCheckResponse_SERVING:
			return fmt.Errorf("%s", resp.GetStatus())
		}
		return nil
	})
}
