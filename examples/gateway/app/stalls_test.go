package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// An address stays stalled while its health check times out, is refused
// or answers NOT_SERVING (a node cut off from Redis), leaves the set once
// it answers SERVING, and is forgotten after stallForget without one.
func TestStalledAddressLeavesOnceItServes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type outcome struct{ err error }
		var answer atomic.Value // the outcome of the next check
		answer.Store(outcome{status.Error(codes.DeadlineExceeded, "frozen")})
		var checks atomic.Int32
		s := newStalls(func(_ context.Context, addr string) error {
			if addr == "10.0.0.9:13001" {
				return status.Error(codes.Unavailable, "connection refused") // gone for good
			}
			checks.Add(1)
			return answer.Load().(outcome).err
		}, quiet())
		defer s.close()

		s.mark("10.0.0.1:13001")
		s.mark("10.0.0.9:13001")
		time.Sleep(2 * time.Second)
		assert.True(t, s.stalled("10.0.0.1:13001"), "stalled address left the set while its checks timed out")
		assert.False(t, s.stalled("10.0.0.2:13001"), "an address never marked is stalled")
		answer.Store(outcome{errors.New("health NOT_SERVING")})
		time.Sleep(time.Second)
		assert.True(t, s.stalled("10.0.0.1:13001"), "stalled address left the set while answering NOT_SERVING")
		assert.GreaterOrEqual(t, checks.Load(), int32(20), "health checks in 3s at one per %s", stallRecheck)

		answer.Store(outcome{nil})
		time.Sleep(stallRecheck)
		synctest.Wait()
		assert.False(t, s.stalled("10.0.0.1:13001"), "still stalled after its health check answered SERVING")
		assert.True(t, s.stalled("10.0.0.9:13001"), "a refusing address forgotten before stallForget")
		time.Sleep(stallForget)
		synctest.Wait()
		assert.False(t, s.any(), "a refusing address still stalled after stallForget")
	})
}

// fakeSubConn stands for a ready SubConn; the picker only hands it back.
type fakeSubConn struct {
	balancer.SubConn
	addr string
}

// threeNodePicker is a picker over three ready nodes, and the stalls it
// avoids, whose health checks never answer.
func threeNodePicker(t *testing.T) ([]string, *hrwPicker, *stalls) {
	addrs := []string{"10.0.0.1:13001", "10.0.0.2:13001", "10.0.0.3:13001"}
	p := &hrwPicker{addrs: addrs}
	for _, a := range addrs {
		p.scs = append(p.scs, fakeSubConn{addr: a})
	}
	s := newStalls(func(context.Context, string) error { return status.Error(codes.DeadlineExceeded, "frozen") }, quiet())
	t.Cleanup(s.close)
	return addrs, p, s
}

// A command goes to the room's preferred node unless that node is stalled,
// then to its next node among the others; with every node stalled the
// preferred one is picked anyway (the attempt budget bounds the wait).
func TestPickerRoutesAroundStalledNodes(t *testing.T) {
	addrs, p, s := threeNodePicker(t)
	pick := func(room string) string {
		t.Helper()
		res, err := p.Pick(balancer.PickInfo{Ctx: withRoute(context.Background(), room, s)})
		require.NoError(t, err)
		return res.SubConn.(fakeSubConn).addr
	}

	room := "room-1"
	first := addrs[preferred(room, addrs)]
	assert.Equal(t, first, pick(room))
	s.mark(first)
	rest := []string{}
	for _, a := range addrs {
		if a != first {
			rest = append(rest, a)
		}
	}
	second := rest[preferred(room, rest)]
	assert.Equal(t, second, pick(room), "preferred node %s stalled", first)
	for range 10 {
		res, err := p.Pick(balancer.PickInfo{Ctx: withRoute(context.Background(), "", s)})
		require.NoError(t, err)
		assert.NotEqual(t, first, res.SubConn.(fakeSubConn).addr, "a read went to the stalled node")
	}
	for _, a := range addrs {
		s.mark(a)
	}
	assert.Equal(t, first, pick(room), "every node stalled")
}

// A watch resumed after its backend ended it leaves that backend while
// another is ready (it said its reads of the room fail, or it drains), and
// goes back to it when it is the only one; a stalled node is avoided
// first.
func TestPickerLeavesAWatchsLastBackend(t *testing.T) {
	addrs, p, s := threeNodePicker(t)
	pick := func(p *hrwPicker, leave string) string {
		t.Helper()
		var pk pick
		res, err := p.Pick(balancer.PickInfo{Ctx: withWatchPick(context.Background(), s, leave, &pk)})
		require.NoError(t, err)
		got, _ := pk.get()
		require.Equal(t, res.SubConn.(fakeSubConn).addr, got, "the pick recorded")
		return got
	}
	for range 10 {
		assert.NotEqual(t, addrs[0], pick(p, addrs[0]), "a watch that ended on %s went back to it", addrs[0])
	}
	s.mark(addrs[1])
	for range 10 {
		assert.Equal(t, addrs[2], pick(p, addrs[0]), "the one neither stalled nor left")
	}
	alone := &hrwPicker{addrs: addrs[:1], scs: p.scs[:1]}
	assert.Equal(t, addrs[0], pick(alone, addrs[0]), "the only ready backend")
}

// roomPreferring returns a room whose rendezvous-hash node among addrs is
// addrs[i].
func roomPreferring(t *testing.T, i int, addrs ...string) string {
	t.Helper()
	for r := range 1000 {
		if room := fmt.Sprintf("room-%d", r); preferred(room, addrs) == i {
			return room
		}
	}
	t.Fatalf("no room prefers %s", addrs[i])
	return ""
}

// startStallAPI is startAPI with a short attempt budget.
func startStallAPI(t *testing.T, addrs ...string) *api {
	t.Helper()
	cfg := Config{Backends: addrs, RequestTimeout: 5 * time.Second, AttemptTimeout: 300 * time.Millisecond}
	b := newBackends(cfg, quiet())
	require.NoError(t, b.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, b.Close(context.Background())) })
	a, err := newAPI(b, nil, cfg, quiet(), nil)
	require.NoError(t, err)
	return a
}

// A frozen node (its port accepts, nothing answers, its health watch
// pushes nothing) holds a command for one attempt, not for the request's
// deadline: the next attempt goes to the room's next node.
// The backends are named by host name, as ROOM_GRPC_ADDRS may name them,
// while the peer of a call is an IP: the stall must be recorded under the
// name the pickers know.
func TestFrozenNodesCommandGoesToTheNextNode(t *testing.T) {
	a := startBackend(t, &testRooms{apply: applyAnswer(roompb.ApplyResponse_APPLIED, 1)})
	b := startBackend(t, &testRooms{apply: applyAnswer(roompb.ApplyResponse_APPLIED, 2)})
	a.addr, b.addr = byName(t, a.addr), byName(t, b.addr)
	api := startStallAPI(t, a.addr, b.addr)
	room := roomPreferring(t, 0, a.addr, b.addr)
	// Until both backends are ready in the balancer, every room goes to
	// the one that is: warm up (bounded) until the room reaches a.
	ready := time.Now().Add(10 * time.Second)
	for i := 0; a.received.Load() == 0; i++ {
		require.True(t, time.Now().Before(ready), "the room's preferred node not ready in the balancer after %d commands", i)
		_, err := api.forwardApply(context.Background(), &roompb.ApplyRequest{RoomId: room, CommandId: fmt.Sprintf("w%d", i), Op: "join"})
		require.NoError(t, err)
	}

	defer a.freeze()()
	rec, got := do(t, api.routes(), "POST", "/api/v1/rooms/"+room+"/commands", `{"command_id":"c2","op":"join"}`)
	require.Equal(t, http.StatusOK, rec.Code, "got %d %v; want 200 from the next node", rec.Code, got)
	assert.Equal(t, 2.0, got["seq"], "applied by %v; want the next node", got)
	assert.True(t, api.b.stalls.stalled(a.addr), "frozen node not marked stalled")
	assert.Equal(t, int64(2), a.received.Load(), "commands that reached the frozen node (the warm-up and one attempt)")
}

// byName is addr (127.0.0.1:port) with the host named "localhost".
func byName(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	return net.JoinHostPort("localhost", port)
}

// A REDIRECT to an owner that stopped answering is not followed once the
// owner is known stalled: the attempt is a refusal, and the room is taken
// by the next node once the owner's lease is free (here: two attempts
// after the owner was seen stalled).
func TestNoRedirectIsFollowedToAStalledOwner(t *testing.T) {
	owner := startBackend(t, &testRooms{apply: applyAnswer(roompb.ApplyResponse_APPLIED, 1)})
	var (
		api      *api
		afterRed atomic.Int32 // REDIRECTs answered once the owner was stalled
	)
	next := startBackend(t, &testRooms{apply: func(context.Context, *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		if api.b.stalls.stalled(owner.addr) && afterRed.Add(1) > 2 {
			return &roompb.ApplyResponse{Status: roompb.ApplyResponse_APPLIED, Seq: 2}, nil
		}
		return &roompb.ApplyResponse{Status: roompb.ApplyResponse_REDIRECT, OwnerNode: "owner", OwnerAddr: owner.addr}, nil
	}})
	api = startStallAPI(t, next.addr) // the owner left the balanced set (it is not ready)
	defer owner.freeze()()
	rec, got := do(t, api.routes(), "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
	require.Equal(t, http.StatusOK, rec.Code, "got %d %v; want 200 from the next node", rec.Code, got)
	assert.Equal(t, 2.0, got["seq"])
	assert.Equal(t, int32(3), afterRed.Load(), "attempts at the next node once the owner was stalled")
	assert.Equal(t, int64(1), owner.received.Load(), "redirected attempts that reached the stalled owner (two REDIRECTs refused)")
}

// A REDIRECT to an owner the gateway has no connection to yet, whose port
// accepts while its process answers nothing (no HTTP/2 handshake), marks
// it stalled within one attempt too, though no call reached it.
func TestRedirectToASilentPortMarksItStalled(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { silent.Close() })
	var api *api
	next := startBackend(t, &testRooms{apply: func(context.Context, *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		if api.b.stalls.stalled(silent.Addr().String()) {
			return &roompb.ApplyResponse{Status: roompb.ApplyResponse_APPLIED, Seq: 2}, nil
		}
		return &roompb.ApplyResponse{Status: roompb.ApplyResponse_REDIRECT, OwnerNode: "owner", OwnerAddr: silent.Addr().String()}, nil
	}})
	api = startStallAPI(t, next.addr)
	rec, got := do(t, api.routes(), "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
	require.Equal(t, http.StatusOK, rec.Code, "got %d %v; want 200 from the next node", rec.Code, got)
	assert.True(t, api.b.stalls.stalled(silent.Addr().String()), "silent port not marked stalled")
	assert.Equal(t, int64(2), next.rooms.applies.Load(), "attempts at the next node: one redirected to the silent port, one applied")
}
