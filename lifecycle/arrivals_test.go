package lifecycle_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/drain/grpcdrain"
	"github.com/drainkit/drainkit/lifecycle"
)

// server is a real listener behind the Manager's Tracker, HTTP or gRPC,
// that keeps its listener open after intake closes (refusals are counted
// only by a server that still accepts), with a client that sends one
// request and reports whether it was served.
type server struct {
	send  func(t *testing.T) (served bool)
	close func(ctx context.Context) error
}

func httpServer(t *testing.T, tr *drain.Tracker) server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: tr.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))}
	go func() { _ = srv.Serve(ln) }()
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	return server{
		send: func(t *testing.T) bool {
			resp, err := client.Get("http://" + ln.Addr().String() + "/")
			require.NoError(t, err)
			resp.Body.Close()
			require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, resp.StatusCode)
			return resp.StatusCode == http.StatusOK
		},
		close: srv.Shutdown,
	}
}

// echo is grpc-go's own test service, answering UnaryCall.
type echo struct {
	testgrpc.UnimplementedTestServiceServer
}

func (echo) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{}, nil
}

func grpcServer(t *testing.T, tr *drain.Tracker) server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(grpcdrain.ServerOptions(tr)...)
	testgrpc.RegisterTestServiceServer(srv, echo{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return server{
		send: func(t *testing.T) bool {
			_, err := testgrpc.NewTestServiceClient(conn).UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
			if err != nil {
				require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
			}
			return err == nil
		},
		close: func(context.Context) error { srv.Stop(); return nil },
	}
}

// The report counts what reached the servers after the flip, and what
// came after intake closed and was refused; that, and only that, makes
// its line a WARN that says to raise DRAIN_DELAY. The figures are what
// the test sent, over real listeners, for HTTP and for gRPC.
func TestTheReportCountsWhatArrivedAfterTheFlip(t *testing.T) {
	tests := []struct {
		name       string
		transport  func(*testing.T, *drain.Tracker) server
		duringFlip int // sent at the flip, served within the delay
		late       int // sent after intake closed, refused
	}{
		{"http: the delay covers every arrival", httpServer, 3, 0},
		{"http: arrivals after intake", httpServer, 2, 4},
		{"grpc: the delay covers every arrival", grpcServer, 3, 0},
		{"grpc: arrivals after intake", grpcServer, 2, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			h := newHarness(t, lifecycle.Config{Service: "svc", NodeID: "n1", DrainTimeout: 30 * time.Second,
				DrainDelay: 50 * time.Millisecond, Registerer: reg})
			srv := tt.transport(t, h.Tracker())
			running := make(chan struct{})
			var flippedAt, duringSentAt time.Time
			h.OnTransition(func(tr lifecycle.Transition) {
				switch tr.To {
				case lifecycle.Running:
					close(running)
				case lifecycle.Draining: // listeners run at the flip, before the delay
					flippedAt = tr.At // the moment the report measures from
					for range tt.duringFlip {
						assert.True(t, srv.send(t), "served during the delay")
					}
					duringSentAt = time.Now()
				}
			})
			var lateSentAt time.Time
			require.NoError(t, h.AddHook(
				drain.Hook{Name: "intake", Phase: drain.StopIntake, Run: func(context.Context) error {
					h.Tracker().CloseIntake()
					return nil
				}},
				drain.Hook{Name: "late arrivals", Phase: drain.WaitInFlight, Run: func(context.Context) error {
					for range tt.late {
						assert.False(t, srv.send(t), "refused after intake")
					}
					lateSentAt = time.Now()
					return nil
				}},
				drain.Hook{Name: "close", Phase: drain.Close, Run: srv.close},
			))
			reports := h.run()
			<-running
			for range 2 {
				require.True(t, srv.send(t), "served before the flip")
			}
			h.sig <- syscall.SIGTERM
			r := <-reports

			assert.Equal(t, lifecycle.ExitClean, r.ExitCode)
			assert.Equal(t, uint64(tt.duringFlip+tt.late), r.ArrivedAfterFlip, "arrivals after the flip")
			assert.Equal(t, uint64(tt.late), r.RefusedAfterIntake, "refused after intake")
			assert.LessOrEqual(t, r.LastArrivalAfterFlip, r.Duration) // to the millisecond: 0 if every arrival came within one
			if tt.late > 0 {
				assert.LessOrEqual(t, r.LastArrivalAfterFlip, lateSentAt.Sub(flippedAt), "the last arrival, from the flip")
				assert.GreaterOrEqual(t, r.LastArrivalAfterFlip, 50*time.Millisecond-time.Millisecond, "the late ones came after the delay")
			} else {
				assert.LessOrEqual(t, r.LastArrivalAfterFlip, duringSentAt.Sub(flippedAt), "every arrival came at the flip, before the delay began")
			}
			assert.Equal(t, float64(tt.late), metric(t, reg, "service_drain_refused_after_intake_total").GetCounter().GetValue())
			hist := metric(t, reg, "service_drain_last_arrival_after_flip_ms").GetHistogram()
			assert.Equal(t, uint64(1), hist.GetSampleCount())
			assert.InDelta(t, float64(r.LastArrivalAfterFlip.Microseconds())/1000, hist.GetSampleSum(), 0.001)

			line := reportLine(t, h.logs.String())
			arrivals := line["report"].(map[string]any)["arrivals"].(map[string]any)
			assert.Equal(t, float64(tt.duringFlip+tt.late), arrivals["after_flip"])
			assert.Equal(t, float64(tt.late), arrivals["refused_after_intake"])
			assert.InDelta(t, float64(r.LastArrivalAfterFlip.Microseconds())/1000, arrivals["last_after_flip_ms"], 0.001)
			if tt.late == 0 {
				assert.Equal(t, "INFO", line["level"])
				assert.NotContains(t, line, "advice")
				return
			}
			assert.Equal(t, "WARN", line["level"])
			advice, _ := line["advice"].(string)
			assert.True(t, strings.HasPrefix(advice, "DRAIN_DELAY 50ms was shorter than this rollout's propagation: 4 requests were refused after intake, the last arrived "), advice)
			assert.True(t, strings.HasSuffix(advice, " after the flip; raise DRAIN_DELAY or use DRAIN_QUIET_WINDOW"), advice)
		})
	}
}

// An adaptive delay that ended too soon names its own settings.
func TestTheAdviceOfAnAdaptiveDelayNamesTheQuietWindow(t *testing.T) {
	h := newHarness(t, lifecycle.Config{DrainTimeout: 30 * time.Second, DrainDelay: time.Second,
		QuietWindow: 20 * time.Millisecond, DelayFloor: 20 * time.Millisecond})
	srv := httpServer(t, h.Tracker())
	running := make(chan struct{})
	h.OnTransition(func(tr lifecycle.Transition) {
		if tr.To == lifecycle.Running {
			close(running)
		}
	})
	require.NoError(t, h.AddHook(
		drain.Hook{Name: "intake", Phase: drain.StopIntake, Run: func(context.Context) error {
			h.Tracker().CloseIntake()
			assert.False(t, srv.send(t), "refused after intake")
			return nil
		}},
		drain.Hook{Name: "close", Phase: drain.Close, Run: srv.close},
	))
	reports := h.run()
	<-running
	h.sig <- syscall.SIGTERM
	r := <-reports
	assert.Equal(t, uint64(1), r.RefusedAfterIntake)
	line := reportLine(t, h.logs.String())
	assert.Equal(t, "WARN", line["level"])
	assert.Contains(t, line["advice"], "the adaptive delay (DRAIN_QUIET_WINDOW 20ms, at most DRAIN_DELAY 1s) ended before this rollout's propagation did: 1 requests were refused after intake")
	assert.Contains(t, line["advice"], "; raise DRAIN_QUIET_WINDOW, or DRAIN_DELAY if the delay ran to it")
}

// reportLine returns the "drain report" line of a JSON log.
func reportLine(t *testing.T, logs string) map[string]any {
	t.Helper()
	for _, l := range strings.Split(logs, "\n") {
		var line map[string]any
		if json.Unmarshal([]byte(l), &line) == nil && line["msg"] == "drain report" {
			return line
		}
	}
	t.Fatalf("no drain report in the log:\n%s", logs)
	return nil
}

// metric returns the metric named name from reg.
func metric(t *testing.T, reg *prometheus.Registry, name string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0]
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}
