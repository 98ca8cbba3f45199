package fxgrpc_test

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/drain/grpcdrain"
	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/fxmodule/fxgrpc"
	"github.com/drainkit/drainkit/fxmodule/fxmoduletest"
	"github.com/drainkit/drainkit/internal/testlog"
	"github.com/drainkit/drainkit/lifecycle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// blocker is a one-method gRPC service whose call waits for release.
type blocker struct {
	entered chan struct{}
	release chan struct{}
}

const blockMethod = "/test.Blocker/Block"

func (b *blocker) register(s *grpc.Server) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Blocker",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Block", Handler: func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
			req := new(emptypb.Empty)
			if err := dec(req); err != nil {
				return nil, err
			}
			h := func(context.Context, any) (any, error) {
				close(b.entered)
				<-b.release
				return &emptypb.Empty{}, nil
			}
			if in == nil {
				return h(ctx, req)
			}
			return in(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: blockMethod}, h)
		}}},
	}, b)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// fxgrpc.Server wires a whole drained gRPC server: health SERVING once
// ready and NOT_SERVING at the flip, an RPC in flight at the signal is
// answered, and the drain ends the server.
func TestServerServesAndDrains(t *testing.T) {
	addr := freeAddr(t)
	b := &blocker{entered: make(chan struct{}), release: make(chan struct{})}
	cfg := lifecycle.Config{Service: "svc", NodeID: "n1", DrainTimeout: 10 * time.Second, DrainDelay: 200 * time.Millisecond}
	logs := &testlog.Buffer{}
	app := fxmoduletest.Start(t,
		fxmodule.Module, fx.Supply(cfg, slog.New(slog.NewJSONHandler(logs, nil))), fx.StopTimeout(5*time.Second),
		fxgrpc.Server("grpc", addr, b.register),
	)
	// The start-up names what a prober asks for.
	assert.Contains(t, logs.String(), `"msg":"listening","service":"svc","server":"grpc","addr":"`+addr+`","health_service":"svc"`)

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	ctx := context.Background()
	watchCtx, stopWatch := context.WithTimeout(ctx, 10*time.Second)
	watch, err := health.Watch(watchCtx, &healthpb.HealthCheckRequest{Service: "svc"})
	require.NoError(t, err)
	for { // the health loop follows readiness: SERVING once ready
		r, err := watch.Recv()
		require.NoError(t, err)
		if r.Status == healthpb.HealthCheckResponse_SERVING {
			break
		}
	}
	stopWatch()

	// The Check runs inside a listener of the flip: fxgrpc's, registered
	// first, has latched NOT_SERVING, and the propagation delay, after
	// which stop_intake refuses new RPCs, starts only once this one returns.
	// Checking after the flip instead would have to land within the delay.
	type checked struct {
		r   *healthpb.HealthCheckResponse
		err error
	}
	atFlip := make(chan checked, 1)
	app.Manager().OnTransition(func(tr lifecycle.Transition) {
		if tr.To == lifecycle.Draining {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second) // a failure, not a hung flip
			defer cancel()
			r, err := health.Check(cctx, &healthpb.HealthCheckRequest{Service: "svc"})
			atFlip <- checked{r, err}
		}
	})
	answered := make(chan error, 1)
	go func() { answered <- conn.Invoke(ctx, blockMethod, &emptypb.Empty{}, &emptypb.Empty{}) }()
	<-b.entered
	app.Signal()
	c := <-atFlip
	require.NoError(t, c.err, "health Check at the flip")
	assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, c.r.Status, "NOT_SERVING from the flip")
	close(b.release)
	require.NoError(t, <-answered, "the RPC in flight at the signal is answered")

	rep := app.Wait()
	assert.Equal(t, lifecycle.ExitClean, rep.ExitCode)
	for _, h := range []string{"grpc.stop_intake", "grpc.health_watch", "grpc.wait_in_flight", "grpc.graceful_stop", "grpc.streams.close", "grpc.serve"} {
		got, ok := rep.Hook(h)
		assert.True(t, ok, h)
		assert.Equal(t, drain.OK, got.Outcome, h)
	}
	_, err = net.Dial("tcp", addr)
	assert.Error(t, err, "the drain closed the listener")
}

// A client that connected and sent nothing (a stalled client, a TCP check
// that holds its socket) holds grpc-go's GracefulStop until its handshake
// times out: the server's ConnectionTimeout, 120 s by grpc-go's default,
// which made every drain with one such connection end at its deadline,
// exit 3. fxgrpc.Server gives handshakes 5 s, within this drain's 10 s.
func TestServerDrainsCleanWithAConnectionInItsHandshake(t *testing.T) {
	addr := freeAddr(t)
	cfg := lifecycle.Config{Service: "svc", NodeID: "n1", DrainTimeout: 10 * time.Second, DrainDelay: 200 * time.Millisecond}
	app := fxmoduletest.Start(t,
		fxmodule.Module, fx.Supply(cfg, slog.New(slog.DiscardHandler)), fx.StopTimeout(5*time.Second),
		fxgrpc.Server("grpc", addr, (&blocker{}).register),
	)
	raw, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer raw.Close()
	require.NoError(t, raw.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = raw.Read(make([]byte, 1)) // the server's SETTINGS: its handshake now waits for a preface that never comes
	require.NoError(t, err)

	app.Signal()
	rep := app.Wait()
	assert.Equal(t, lifecycle.ExitClean, rep.ExitCode)
	got, _ := rep.Hook("grpc.graceful_stop")
	assert.Equal(t, drain.OK, got.Outcome, "graceful_stop: %s", got.Error)
}

const followMethod = "/test.Feed/Follow"

// registerFeed registers a server-streaming method that sends one message
// and then waits for its context, as a subscription does.
func registerFeed(s *grpc.Server) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Feed",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "Follow", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			if err := ss.SendMsg(&emptypb.Empty{}); err != nil {
				return err
			}
			<-ss.Context().Done()
			return ss.Context().Err()
		}}},
	}, nil)
}

// Server streams open at the signal are closed paced, each told to
// reconnect elsewhere, and the drain ends clean before its deadline.
func TestServerClosesStreamsPaced(t *testing.T) {
	const n = 5
	addr := freeAddr(t)
	cfg := lifecycle.Config{Service: "svc", NodeID: "n1", DrainTimeout: 3 * time.Second, DrainDelay: 100 * time.Millisecond}
	app := fxmoduletest.Start(t,
		fxmodule.Module, fx.Supply(cfg, slog.New(slog.DiscardHandler)), fx.StopTimeout(5*time.Second),
		fxgrpc.Server("grpc", addr, registerFeed),
	)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ended := make(chan error, n)
	for range n {
		cs, err := conn.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true}, followMethod)
		require.NoError(t, err)
		require.NoError(t, cs.SendMsg(&emptypb.Empty{}))
		require.NoError(t, cs.CloseSend())
		require.NoError(t, cs.RecvMsg(&emptypb.Empty{}), "first message: the stream is registered")
		go func() { ended <- cs.RecvMsg(&emptypb.Empty{}) }()
	}

	app.Signal()
	rep := app.Wait()
	assert.Equal(t, lifecycle.ExitClean, rep.ExitCode, "report: %v", rep.Err())
	got, ok := rep.Hook("grpc.streams.close")
	require.True(t, ok)
	require.NotNil(t, got.Streams)
	assert.Equal(t, n, got.Streams.Told)
	assert.Equal(t, n, got.Streams.Paced+got.Streams.Hard)
	for range n {
		err := <-ended
		assert.True(t, grpcdrain.IsRefused(err), "stream ended with %v; want UNAVAILABLE with RetryInfo", err)
	}
}

// A mistake in fxgrpc.Server's options or wiring is refused before
// anything starts (exit 78) in one line naming the option and what to
// change: not at start as a failure of the world (exit 5), and not in
// fx's words about a generated hook or a missing type.
func TestServerMistakesAreRefusedNamingTheOption(t *testing.T) {
	cfg := fx.Supply(lifecycle.Config{Service: "svc", NodeID: "n1", DrainTimeout: time.Second})
	register := func(*grpc.Server) {}
	tests := []struct {
		name string
		give []fx.Option
		want string
	}{
		{
			name: "an address without a port",
			give: []fx.Option{fxmodule.Module, cfg, fxgrpc.Server("api", "not-an-addr", register)},
			want: `fxgrpc: Server("api", "not-an-addr", …): address not-an-addr: missing port in address; want host:port`,
		},
		{
			name: "no name",
			give: []fx.Option{fxmodule.Module, cfg, fxgrpc.Server("", "127.0.0.1:0", register)},
			want: `fxmodule: fxgrpc.Server("", "127.0.0.1:0", …): name is empty; want the server's name, such as "api"`,
		},
		{
			name: "a nil register",
			give: []fx.Option{fxmodule.Module, cfg, fxgrpc.Server("api", "127.0.0.1:0", nil)},
			want: `fxgrpc: Server("api", "127.0.0.1:0", register): register is nil; want a func whose first parameter is *grpc.Server`,
		},
		{
			name: "a register without the server",
			give: []fx.Option{fxmodule.Module, cfg, fxgrpc.Server("api", "127.0.0.1:0", func(*slog.Logger) {})},
			want: `register is a func(*slog.Logger); want a func whose first parameter is *grpc.Server`,
		},
		{
			name: "two servers named api",
			give: []fx.Option{fxmodule.Module, cfg, fxgrpc.Server("api", "127.0.0.1:0", register), fxgrpc.Server("api", "127.0.0.1:0", register)},
			want: `two servers named "api" (fxgrpc.Server("api", "127.0.0.1:0", …) and fxgrpc.Server("api", "127.0.0.1:0", …))`,
		},
		{
			name: "two servers named api, with a Registerer in the graph",
			give: []fx.Option{fxmodule.Module, cfg, fx.Provide(func() prometheus.Registerer { return prometheus.NewRegistry() }),
				fxgrpc.Server("api", "127.0.0.1:0", register), fxgrpc.Server("api", "127.0.0.1:0", register)},
			want: `two servers named "api" (fxgrpc.Server("api", "127.0.0.1:0", …) and fxgrpc.Server("api", "127.0.0.1:0", …))`,
		},
		{
			name: "a server named like Admin's",
			give: []fx.Option{fxmodule.Module, cfg, fxmodule.Admin("127.0.0.1:0"), fxgrpc.Server("admin", "127.0.0.1:0", register)},
			want: `two servers named "admin" (fxmodule.Admin("127.0.0.1:0") and fxgrpc.Server("admin", "127.0.0.1:0", …))`,
		},
		{
			name: "fxmodule.Module forgotten",
			give: []fx.Option{cfg, fxgrpc.Server("api", "127.0.0.1:0", register)},
			want: `fxmodule: fxgrpc.Server("api", "127.0.0.1:0", …) needs fxmodule.Module and a lifecycle.Config (fxmodule.FromEnv, or fx.Supply of one): add what is missing to fxmodule.Run's options`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &testlog.Buffer{}
			prev := slog.Default()
			t.Cleanup(func() { slog.SetDefault(prev) })
			slog.SetDefault(slog.New(slog.NewTextHandler(logs, nil)))
			assert.Equal(t, lifecycle.ExitConfig, fxmodule.Run(tt.give...), "exit code")
			var errs []string
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "level=ERROR") {
					errs = append(errs, line)
				}
			}
			require.Len(t, errs, 1, "one error line; got %q", errs)
			assert.Contains(t, errs[0], strings.ReplaceAll(tt.want, `"`, `\"`))
			for _, wrapping := range []string{"could not build arguments", "received non-nil error", "missing type", "stop_intake"} {
				assert.NotContains(t, errs[0], wrapping, "fx's words or a generated hook")
			}
		})
	}
}

// What net.Listen and fx accept, fxgrpc.Server's checks accept too: an
// empty address (any port), a named port, and a register given through
// fx.Annotate, with the server in another position, or in an fx.In.
func TestServerAcceptsWhatListenAndFxAccept(t *testing.T) {
	type in struct {
		fx.In
		Server *grpc.Server
	}
	type primary struct{}
	registers := map[string]any{
		"annotated":           fx.Annotate(func(*grpc.Server, *primary) {}, fx.ParamTags("", `name:"primary"`)),
		"the server second":   func(*slog.Logger, *grpc.Server) {},
		"the server in fx.In": func(in) {},
	}
	for _, addr := range []string{"", "127.0.0.1:0"} {
		for name, register := range registers {
			t.Run(name+" on "+strconv.Quote(addr), func(t *testing.T) {
				app := fx.New(fx.NopLogger, fxmodule.Module,
					fx.Supply(lifecycle.Config{Service: "svc", NodeID: "n1", DrainTimeout: time.Second}, slog.New(slog.DiscardHandler)),
					fx.Supply(fx.Annotate(&primary{}, fx.ResultTags(`name:"primary"`))),
					fxgrpc.Server("api", addr, register))
				require.NoError(t, app.Err())
			})
		}
	}
}
