package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/drain/grpcdrain"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// startAPI returns the API over started backends at addrs.
func startAPI(t *testing.T, addrs ...string) *api {
	t.Helper()
	b := newBackends(Config{Backends: addrs}, quiet())
	require.NoError(t, b.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, b.Close(context.Background())) })
	a, err := newAPI(b, nil, Config{RequestTimeout: 10 * time.Second}, quiet(), nil)
	require.NoError(t, err)
	return a
}

// do serves one request and decodes the JSON answer.
func do(t *testing.T, h http.Handler, method, path, body string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	var got map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got), "body %q", rec.Body.String())
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	return rec, got
}

func applyAnswer(s roompb.ApplyResponse_Status, seq int64) func(context.Context, *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
	return func(context.Context, *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		return &roompb.ApplyResponse{Status: s, Seq: seq}, nil
	}
}

func TestBadRequestsAreNotForwarded(t *testing.T) {
	rooms := &testRooms{apply: applyAnswer(roompb.ApplyResponse_APPLIED, 1)}
	h := startAPI(t, startBackend(t, rooms).addr).routes()
	tests := []struct {
		name, method, path, body string
		wantCode                 int
		wantErr                  string
	}{
		{"room id with a dot", "POST", "/api/v1/rooms/a.b/commands", `{"command_id":"c1","op":"join"}`, 400, "room id"},
		{"room id with braces", "POST", "/api/v1/rooms/%7Bx%7D/commands", `{"command_id":"c1","op":"join"}`, 400, "room id"},
		{"room id too long", "POST", "/api/v1/rooms/" + strings.Repeat("r", 65) + "/commands", `{"command_id":"c1","op":"join"}`, 400, "room id"},
		{"malformed JSON", "POST", "/api/v1/rooms/r1/commands", `{"command_id":`, 400, "malformed JSON"},
		{"not an object", "POST", "/api/v1/rooms/r1/commands", `["c1"]`, 400, "malformed JSON"},
		{"empty body", "POST", "/api/v1/rooms/r1/commands", ``, 400, "malformed JSON"},
		{"data after the object", "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"} {}`, 400, "after the object"},
		{"missing command_id", "POST", "/api/v1/rooms/r1/commands", `{"op":"join"}`, 400, "command_id is required"},
		{"null body", "POST", "/api/v1/rooms/r1/commands", `null`, 400, "command_id is required"},
		{"unknown field", "POST", "/api/v1/rooms/r1/commands", `{"commandId":"c1"}`, 400, "unknown field"},
		{"command_id with a space", "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c 1"}`, 400, "command_id"},
		{"command_id not a string", "POST", "/api/v1/rooms/r1/commands", `{"command_id":7}`, 400, "malformed JSON"},
		{"op not in the set", "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"x"}`, 400, `op "x": want one of hello, join`},
		{"body too large", "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"` + strings.Repeat("o", maxBodyLen) + `"}`, 413, "body exceeds"},
		{"get with a bad room id", "GET", "/api/v1/rooms/a%20b", ``, 400, "room id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, got := do(t, h, tt.method, tt.path, tt.body)
			assert.Equal(t, tt.wantCode, rec.Code, "got %d; want %d (body %s)", rec.Code, tt.wantCode, rec.Body)
			assert.Contains(t, got["error"], tt.wantErr)
		})
	}
	assert.Zero(t, rooms.calls(), "got %d backend calls; want none", rooms.calls())
}

func TestForwarding(t *testing.T) {
	tests := []struct {
		name     string
		apply    func(context.Context, *roompb.ApplyRequest) (*roompb.ApplyResponse, error)
		wantCode int
		want     map[string]any
		wantErr  string
		calls    int64
	}{
		{name: "applied", apply: applyAnswer(roompb.ApplyResponse_APPLIED, 7), wantCode: 200,
			want: map[string]any{"status": "applied", "seq": 7.0}, calls: 1},
		{name: "invalid argument", apply: fails(codes.InvalidArgument), wantCode: 400, wantErr: "InvalidArgument", calls: 1},
		{name: "internal", apply: fails(codes.Internal), wantCode: 502, wantErr: "Internal", calls: 1},
		{name: "unspecified status", apply: applyAnswer(roompb.ApplyResponse_STATUS_UNSPECIFIED, 0), wantCode: 502,
			wantErr: "STATUS_UNSPECIFIED", calls: 1},
		{name: "redirect to a malformed address", apply: redirectTo("n2", "nowhere"), wantCode: 502,
			wantErr: `address "nowhere"`, calls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rooms := &testRooms{apply: tt.apply}
			h := startAPI(t, startBackend(t, rooms).addr).routes()
			rec, got := do(t, h, "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
			assert.Equal(t, tt.wantCode, rec.Code, "got %d; want %d (body %s)", rec.Code, tt.wantCode, rec.Body)
			if tt.want != nil {
				assert.Equal(t, tt.want, got)
			} else {
				assert.Contains(t, got["error"], tt.wantErr)
			}
			assert.Equal(t, tt.calls, rooms.applies.Load(), "backend calls")
		})
	}
}

func fails(c codes.Code) func(context.Context, *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
	return func(context.Context, *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		return nil, status.Error(c, c.String()+" from the backend")
	}
}

func redirectTo(node, addr string) func(context.Context, *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
	return func(context.Context, *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		return &roompb.ApplyResponse{Status: roompb.ApplyResponse_REDIRECT, OwnerNode: node, OwnerAddr: addr}, nil
	}
}

func TestForwardedRequestCarriesTheCommand(t *testing.T) {
	got := make(chan *roompb.ApplyRequest, 1)
	rooms := &testRooms{apply: func(_ context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		got <- req
		return &roompb.ApplyResponse{Status: roompb.ApplyResponse_APPLIED, Seq: 1}, nil
	}}
	h := startAPI(t, startBackend(t, rooms).addr).routes()
	rec, _ := do(t, h, "POST", "/api/v1/rooms/room-1_A/commands", `{"command_id":"cmd-9","op":"hello"}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	req := <-got
	assert.Equal(t, "room-1_A", req.GetRoomId())
	assert.Equal(t, "cmd-9", req.GetCommandId())
	assert.Equal(t, "hello", req.GetOp())
}

func TestRedirectIsFollowedOnce(t *testing.T) {
	owner := startBackend(t, &testRooms{apply: applyAnswer(roompb.ApplyResponse_APPLIED, 11)})
	first := startBackend(t, &testRooms{apply: redirectTo("node-b", owner.addr)})
	h := startAPI(t, first.addr).routes() // the owner is not in the balanced list
	// The second and third requests go to the owner the first one learned.
	for i := range 3 {
		rec, got := do(t, h, "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
		require.Equal(t, 200, rec.Code, rec.Body.String())
		assert.Equal(t, map[string]any{"status": "applied", "seq": 11.0}, got)
		assert.Equal(t, int64(1), first.rooms.applies.Load(), "calls to the first backend")
		assert.Equal(t, int64(i+1), owner.rooms.applies.Load(), "calls to the owner")
	}
	// Another room is not sent to r1's owner.
	rec, _ := do(t, h, "POST", "/api/v1/rooms/r2/commands", `{"command_id":"c2","op":"join"}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Equal(t, int64(2), first.rooms.applies.Load(), "calls to the first backend")
}

// A remembered owner that refuses (it handed the room off, or is
// draining) is forgotten, and the same attempt goes through the balanced
// connection: no backoff, one answer.
func TestRememberedOwnerThatRefusesIsForgotten(t *testing.T) {
	var refuse atomic.Bool
	owner := startBackend(t, &testRooms{apply: func(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		if refuse.Load() {
			return refuses(ctx, req)
		}
		return applyAnswer(roompb.ApplyResponse_APPLIED, 1)(ctx, req)
	}})
	var redirect atomic.Bool
	redirect.Store(true)
	first := startBackend(t, &testRooms{apply: func(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		if redirect.Load() {
			return redirectTo("node-b", owner.addr)(ctx, req)
		}
		return applyAnswer(roompb.ApplyResponse_APPLIED, 2)(ctx, req)
	}})
	h := startAPI(t, first.addr).routes()
	rec, _ := do(t, h, "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())

	refuse.Store(true)
	redirect.Store(false) // the room now lives on the first backend
	rec, got := do(t, h, "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c2","op":"join"}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Equal(t, map[string]any{"status": "applied", "seq": 2.0}, got)
	assert.Equal(t, int64(2), owner.rooms.applies.Load(), "calls to the old owner: one applied, one refused")
	assert.Equal(t, int64(2), first.rooms.applies.Load(), "calls to the first backend: the redirect, then the command")

	rec, _ = do(t, h, "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c3","op":"join"}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Equal(t, int64(2), owner.rooms.applies.Load(), "the old owner is not called again")
	assert.Equal(t, int64(3), first.rooms.applies.Load())
}

func TestSecondRedirectIsFollowed(t *testing.T) {
	third := startBackend(t, &testRooms{apply: applyAnswer(roompb.ApplyResponse_APPLIED, 1)})
	owner := startBackend(t, &testRooms{apply: redirectTo("node-c", third.addr)})
	first := startBackend(t, &testRooms{apply: redirectTo("node-b", owner.addr)})
	h := startAPI(t, first.addr).routes()
	rec, got := do(t, h, "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Equal(t, map[string]any{"status": "applied", "seq": 1.0}, got)
	assert.Equal(t, int64(1), owner.rooms.applies.Load(), "calls to the old owner")
	assert.Equal(t, int64(1), third.rooms.applies.Load(), "calls to the new owner")
}

func refuses(context.Context, *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
	return nil, grpcdrain.Refused("draining: retry elsewhere")
}

// doWithin is do with the client's own deadline in the Request-Timeout
// header.
func doWithin(t *testing.T, h http.Handler, timeout, method, path, body string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set(TimeoutHeader, timeout)
	h.ServeHTTP(rec, req)
	var got map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got), "body %q", rec.Body.String())
	return rec, got
}

// A refusal is waited out, attempt after attempt, until the deadline is
// near; then the client learns that nothing was applied.
func TestRefusalIsWaitedOutUntilTheDeadlineThen503(t *testing.T) {
	rooms := &testRooms{
		apply: refuses,
		get: func(context.Context, *roompb.GetRoomRequest) (*roompb.Room, error) {
			return nil, grpcdrain.Refused("draining")
		},
	}
	h := startAPI(t, startBackend(t, rooms).addr).routes()
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`},
		{"GET", "/api/v1/rooms/r1", ""},
	} {
		before := rooms.calls()
		rec, got := doWithin(t, h, "400ms", r.method, r.path, r.body)
		assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "%s %s: %s", r.method, r.path, rec.Body)
		assert.Equal(t, "1", rec.Header().Get("Retry-After"))
		assert.Contains(t, got["error"], "none applied")
		assert.Greater(t, rooms.calls()-before, int64(2), "%s: got %d calls; want the refusal retried", r.method, rooms.calls()-before)
	}
}

// refusesFirst refuses the first n calls, then applies at seq.
func refusesFirst(n int64, seq int64) func(context.Context, *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
	var calls atomic.Int64
	return func(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		if calls.Add(1) <= n {
			return refuses(ctx, req)
		}
		return applyAnswer(roompb.ApplyResponse_APPLIED, seq)(ctx, req)
	}
}

func TestRefusalIsWaitedOut(t *testing.T) {
	rooms := &testRooms{apply: refusesFirst(5, 8)}
	h := startAPI(t, startBackend(t, rooms).addr).routes()
	rec, got := do(t, h, "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Equal(t, map[string]any{"status": "applied", "seq": 8.0}, got)
	assert.Equal(t, int64(6), rooms.applies.Load(), "five refusals and the call that applied")
}

// An UNAVAILABLE that does not say "nothing processed" reached a server
// that may have applied the command: the gateway resends the same command
// (room-service answers a resend with the first application's seq), and
// only if no resend gets an answer within the deadline does the client
// learn that the outcome is unknown.
func TestUnknownOutcomeIsResent(t *testing.T) {
	var calls atomic.Int64
	rooms := &testRooms{apply: func(_ context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		if calls.Add(1) == 1 {
			return nil, status.Error(codes.Unavailable, "connection reset after the write")
		}
		return &roompb.ApplyResponse{Status: roompb.ApplyResponse_APPLIED, Seq: 4}, nil // the first application's answer
	}}
	h := startAPI(t, startBackend(t, rooms).addr).routes()
	rec, got := do(t, h, "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Equal(t, map[string]any{"status": "applied", "seq": 4.0}, got, "the first application's answer")
	assert.Equal(t, int64(2), rooms.applies.Load(), "the call and one resend")
}

func TestUnknownOutcomeUntilTheDeadlineIs504(t *testing.T) {
	for _, c := range []codes.Code{codes.Unavailable, codes.Unknown, codes.DeadlineExceeded} {
		t.Run(c.String(), func(t *testing.T) {
			rooms := &testRooms{apply: fails(c)}
			h := startAPI(t, startBackend(t, rooms).addr).routes()
			rec, got := doWithin(t, h, "300ms", "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
			assert.Equal(t, http.StatusGatewayTimeout, rec.Code, rec.Body.String())
			assert.Empty(t, rec.Header().Get("Retry-After"), "no invitation to retry elsewhere")
			assert.Contains(t, got["error"], "may have been applied")
			assert.Greater(t, rooms.applies.Load(), int64(1), "resent")
		})
	}
}

// A refusal after an unknown outcome does not make the outcome known: the
// first attempt may still have been applied.
func TestRefusalAfterUnknownOutcomeIs504(t *testing.T) {
	var calls atomic.Int64
	rooms := &testRooms{apply: func(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		if calls.Add(1) == 1 {
			return nil, status.Error(codes.Unknown, "outcome unknown")
		}
		return refuses(ctx, req)
	}}
	h := startAPI(t, startBackend(t, rooms).addr).routes()
	rec, _ := doWithin(t, h, "300ms", "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
	assert.Equal(t, http.StatusGatewayTimeout, rec.Code, rec.Body.String())
}

// Nor does a failure the gateway does not wait out (INTERNAL, or a
// version skew's INVALID_ARGUMENT): it says nothing of the attempt that
// may have been applied, so the client hears "outcome unknown", not 502
// or 400, and resends with the same command_id.
func TestFinalFailureAfterUnknownOutcomeIs504(t *testing.T) {
	for _, c := range []codes.Code{codes.Internal, codes.InvalidArgument} {
		t.Run(c.String(), func(t *testing.T) {
			var calls atomic.Int64
			rooms := &testRooms{apply: func(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
				if calls.Add(1) == 1 {
					return nil, status.Error(codes.Unknown, "outcome unknown")
				}
				return fails(c)(ctx, req)
			}}
			h := startAPI(t, startBackend(t, rooms).addr).routes()
			rec, got := do(t, h, "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
			assert.Equal(t, http.StatusGatewayTimeout, rec.Code, rec.Body.String())
			assert.Contains(t, got["error"], "may have been applied")
			assert.Contains(t, got["error"], "("+c.String()+": ")
			assert.Equal(t, int64(2), rooms.applies.Load(), "no resend after a final failure")
		})
	}
}

// A read applies nothing: its final failure after an attempt of unknown
// outcome is answered as that failure (502, logged), not 504.
func TestReadsFinalFailureAfterUnknownOutcomeIsItsOwn(t *testing.T) {
	var calls atomic.Int64
	rooms := &testRooms{get: func(ctx context.Context, req *roompb.GetRoomRequest) (*roompb.Room, error) {
		if calls.Add(1) == 1 {
			return nil, status.Error(codes.DeadlineExceeded, "server deadline")
		}
		return nil, status.Error(codes.Internal, "room r1: corrupt snapshot")
	}}
	b := newBackends(Config{Backends: []string{startBackend(t, rooms).addr}}, quiet())
	require.NoError(t, b.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, b.Close(context.Background())) })
	var logs bytes.Buffer
	a, err := newAPI(b, nil, Config{RequestTimeout: 10 * time.Second}, slog.New(slog.NewTextHandler(&logs, nil)), nil)
	require.NoError(t, err)
	rec, _ := do(t, a.routes(), "GET", "/api/v1/rooms/r1", "")
	assert.Equal(t, http.StatusBadGateway, rec.Code, rec.Body.String())
	assert.Contains(t, logs.String(), "room backend failed")
	assert.Contains(t, logs.String(), "corrupt snapshot")
}

// A read that found no answer until its deadline is 504 like a command,
// but it applies nothing, so its answer does not say that an attempt may
// have been applied.
func TestReadUntilTheDeadlineIs504WithoutApplying(t *testing.T) {
	rooms := &testRooms{get: func(context.Context, *roompb.GetRoomRequest) (*roompb.Room, error) {
		return nil, status.Error(codes.DeadlineExceeded, "server deadline")
	}}
	h := startAPI(t, startBackend(t, rooms).addr).routes()
	rec, got := doWithin(t, h, "300ms", "GET", "/api/v1/rooms/r1", "")
	assert.Equal(t, http.StatusGatewayTimeout, rec.Code, rec.Body.String())
	assert.NotContains(t, got["error"], "applied", "a read applies nothing")
	assert.NotContains(t, got["error"], "outcome unknown", "a read has no outcome to be unknown")
	assert.True(t, strings.HasPrefix(got["error"].(string), "no answer in time: gave up after"), "got %q", got["error"])
}

func TestRequestTimeoutHeader(t *testing.T) {
	rooms := &testRooms{apply: applyAnswer(roompb.ApplyResponse_APPLIED, 1)}
	h := startAPI(t, startBackend(t, rooms).addr).routes()
	for _, v := range []string{"abc", "0s", "-1s", "5"} {
		rec, got := doWithin(t, h, v, "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
		assert.Equal(t, 400, rec.Code, "%s: %s", v, rec.Body)
		assert.Contains(t, got["error"], TimeoutHeader+` "`+v+`"`)
	}
	assert.Zero(t, rooms.calls(), "got %d backend calls; want none", rooms.calls())
	rec, _ := doWithin(t, h, "2s", "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
	assert.Equal(t, 200, rec.Code, rec.Body.String())
}

func TestRequestBudget(t *testing.T) {
	tests := []struct {
		give string
		want time.Duration
	}{{"", 10 * time.Second}, {"2s", 2 * time.Second}, {"750ms", 750 * time.Millisecond}, {"1m", 10 * time.Second}}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set(TimeoutHeader, tt.give)
		got, err := requestBudget(r, 10*time.Second)
		require.NoError(t, err)
		assert.Equal(t, tt.want, got, "got %s; want %s for %q", got, tt.want, tt.give)
	}
}

// TestDrainingBackendsRoomsGoToTheNext: commands for a room go to its
// preferred backend; when that backend drains (refuses, and turns
// NOT_SERVING), its rooms' commands go to the next one without failing.
func TestDrainingBackendsRoomsGoToTheNext(t *testing.T) {
	var refusing atomic.Bool
	draining := startBackend(t, &testRooms{apply: func(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		if refusing.Load() {
			return refuses(ctx, req)
		}
		return applyAnswer(roompb.ApplyResponse_APPLIED, 5)(ctx, req)
	}})
	healthy := startBackend(t, &testRooms{apply: applyAnswer(roompb.ApplyResponse_APPLIED, 5)})
	h := startAPI(t, draining.addr, healthy.addr).routes()
	send := func(room string) {
		t.Helper()
		rec, got := do(t, h, "POST", "/api/v1/rooms/"+room+"/commands", `{"command_id":"c1","op":"join"}`)
		require.Equal(t, 200, rec.Code, rec.Body.String())
		assert.Equal(t, "applied", got["status"])
	}
	// Rooms spread over the backends that are ready: send (a bounded
	// number of rounds) until both are ready and have had rooms.
	for i := 0; i < 50 && (draining.rooms.applies.Load() == 0 || healthy.rooms.applies.Load() == 0); i++ {
		for r := range 20 {
			send(fmt.Sprintf("r%d", r))
		}
	}
	require.Positive(t, draining.rooms.applies.Load()*healthy.rooms.applies.Load(), "both backends have rooms")
	refusing.Store(true)
	draining.setServing(false)
	before := healthy.rooms.applies.Load()
	for r := range 20 {
		send(fmt.Sprintf("r%d", r))
	}
	assert.Equal(t, int64(20), healthy.rooms.applies.Load()-before, "every room's command reached the healthy backend")
}

func TestGetRoom(t *testing.T) {
	tests := []struct {
		name string
		room *roompb.Room
		want map[string]any
	}{
		{"with commands", &roompb.Room{RoomId: "r1", Seq: 2, Fence: 9, CommandIds: []string{"a", "b"}, SnapshotSeq: 1},
			map[string]any{"room_id": "r1", "seq": 2.0, "fence": 9.0, "command_ids": []any{"a", "b"}, "snapshot_seq": 1.0}},
		{"empty", &roompb.Room{RoomId: "r1"},
			map[string]any{"room_id": "r1", "seq": 0.0, "fence": 0.0, "command_ids": []any{}, "snapshot_seq": 0.0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rooms := &testRooms{get: func(_ context.Context, req *roompb.GetRoomRequest) (*roompb.Room, error) {
				if req.GetRoomId() != "r1" {
					return nil, status.Errorf(codes.InvalidArgument, "got room %q; want r1", req.GetRoomId())
				}
				return tt.room, nil
			}}
			h := startAPI(t, startBackend(t, rooms).addr).routes()
			rec, got := do(t, h, "GET", "/api/v1/rooms/r1", "")
			require.Equal(t, 200, rec.Code, rec.Body.String())
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestOwnerCacheEvictsIdleConnections(t *testing.T) {
	ownerA := startBackend(t, &testRooms{apply: applyAnswer(roompb.ApplyResponse_APPLIED, 1)})
	ownerB := startBackend(t, &testRooms{apply: applyAnswer(roompb.ApplyResponse_APPLIED, 2)})
	// The first backend redirects to the owner named by the command id.
	owners := map[string]string{"to-a": ownerA.addr, "to-b": ownerB.addr}
	first := startBackend(t, &testRooms{apply: func(_ context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		return &roompb.ApplyResponse{Status: roompb.ApplyResponse_REDIRECT, OwnerAddr: owners[req.GetCommandId()]}, nil
	}})
	a := startAPI(t, first.addr)
	a.b.maxOwners = 1
	h := a.routes()
	for _, tt := range []struct {
		cmd     string
		wantSeq float64
	}{{"to-a", 1}, {"to-b", 2}, {"to-a", 1}} {
		// One room per owner: the gateway sends a room's later commands to
		// the owner its first one was redirected to.
		rec, got := do(t, h, "POST", "/api/v1/rooms/"+tt.cmd+"/commands", `{"command_id":"`+tt.cmd+`","op":"join"}`)
		require.Equal(t, 200, rec.Code, rec.Body.String())
		assert.Equal(t, tt.wantSeq, got["seq"], tt.cmd)
		a.b.mu.Lock()
		n := len(a.b.owners)
		_, cached := a.b.owners[owners[tt.cmd]]
		a.b.mu.Unlock()
		assert.Equal(t, 1, n, "got %d cached owners; want at most 1", n)
		assert.True(t, cached, "the last owner used is the one cached")
	}
}

// TestUnknownOpIsRefusedBeforeForwarding: a command's op is one of a closed
// set; anything else is a 400 naming the field and the value, and
// room-service never hears of it.
func TestUnknownOpIsRefusedBeforeForwarding(t *testing.T) {
	rooms := &testRooms{apply: applyAnswer(roompb.ApplyResponse_APPLIED, 1)}
	h := startAPI(t, startBackend(t, rooms).addr).routes()
	tests := []struct {
		name, body, wantErr string
	}{
		{"missing op", `{"command_id":"c1"}`, `op "": want one of`},
		{"empty op", `{"command_id":"c1","op":""}`, `op "": want one of`},
		{"sql", `{"command_id":"c1","op":"drop table"}`, `op "drop table": want one of`},
		{"case differs", `{"command_id":"c1","op":"JOIN"}`, `op "JOIN": want one of`},
		{"padded", `{"command_id":"c1","op":" join"}`, `op " join": want one of`},
		{"long op is cut short", `{"command_id":"c1","op":"` + strings.Repeat("o", 200) + `"}`, `op "ooo`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, got := do(t, h, "POST", "/api/v1/rooms/r1/commands", tt.body)
			assert.Equal(t, 400, rec.Code, "got %d; want 400 (body %s)", rec.Code, rec.Body)
			assert.Contains(t, got["error"], tt.wantErr)
			assert.Less(t, len(rec.Body.String()), 300, "the error echoes the whole value: %s", rec.Body)
		})
	}
	assert.Zero(t, rooms.calls(), "got %d backend calls; want none", rooms.calls())

	for _, op := range []string{"hello", "join"} { // the set the README, the demo and the e2e load use
		rec, got := do(t, h, "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"`+op+`"}`)
		assert.Equal(t, 200, rec.Code, "op %q: got %d; want 200 (body %s)", op, rec.Code, rec.Body)
		assert.Equal(t, "applied", got["status"], "op %q", op)
	}
}
