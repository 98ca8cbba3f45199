package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// maxBodyLen bounds a command body. A valid one is two short strings (an
// id of at most 64 characters and an op from roompb.Ops); the slack is for
// whitespace and \u-escapes.
const maxBodyLen = 4 << 10

// idPattern is the syntax of room and command ids, as room-service checks
// them.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// command is the body of POST /api/v1/rooms/{id}/commands.
type command struct {
	CommandID string `json:"command_id"`
	Op        string `json:"op"`
}

// applied answers an applied command, the first time and on every resend
// of its command_id alike.
type applied struct {
	Status string `json:"status"` // "applied"
	Seq    int64  `json:"seq"`
}

// room answers GET /api/v1/rooms/{id}.
type room struct {
	RoomID      string   `json:"room_id"`
	Seq         int64    `json:"seq"`
	Fence       int64    `json:"fence"`
	CommandIDs  []string `json:"command_ids"`
	SnapshotSeq int64    `json:"snapshot_seq"`
}

// api serves the room API over the room backends.
type api struct {
	b       *backends
	timeout time.Duration // REQUEST_TIMEOUT
	pending *pending      // nil: no cap
	calls   *semaphore.Weighted
	owners  roomOwners // rooms whose owner a REDIRECT named
	log     *slog.Logger
	retries *prometheus.CounterVec // gateway_backend_retries_total{after}
}

// maxBackendCalls bounds the backend calls the gateway makes at once. When
// a fault ends (a room-service turns SERVING again, Redis is back), every
// request that waited it out is released in the same instant; without a
// bound, hundreds of calls starting together starve the gateway's own
// accept loop and probes on a small machine, and its readiness times out
// just as it should take the backlog. The bound makes them start in
// waves instead, a few milliseconds apart.
const maxBackendCalls = 64

// newAPI returns the API with its retry counter registered with reg (nil:
// not registered, for tests of the API alone).
func newAPI(b *backends, p *pending, cfg Config, log *slog.Logger, reg prometheus.Registerer) (*api, error) {
	a := &api{b: b, timeout: cfg.RequestTimeout, pending: p, calls: semaphore.NewWeighted(maxBackendCalls), log: log,
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_backend_retries_total",
			Help: "Backend attempts the gateway sent again on a client's behalf, by what the attempt before ended in: refused (nothing applied) or unknown (resent; applied at most once).",
		}, []string{"after"})}
	if reg != nil {
		if err := reg.Register(a.retries); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// retried counts an attempt sent again (see within). An api made without
// newAPI (a test of its request checks) counts nothing.
func (a *api) retried(after string) {
	if a.retries != nil {
		a.retries.WithLabelValues(after).Inc()
	}
}

// slot waits for a backend call slot within ctx. Not getting one means the
// call was never sent: a refusal.
func (a *api) slot(ctx context.Context) (release func(), err error) {
	if err := a.calls.Acquire(ctx, 1); err != nil {
		return nil, status.Errorf(codes.Unavailable, "no backend call slot in time: %v", err)
	}
	return func() { a.calls.Release(1) }, nil
}

// routes returns the API's handler (the drain tracks it, not the probes).
func (a *api) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/rooms/{id}/commands", a.apply)
	mux.HandleFunc("GET /api/v1/rooms/{id}", a.getRoom)
	if a.pending == nil {
		return mux
	}
	return a.pending.middleware(mux)
}

// deadline returns the context within which the gateway waits for r's
// backend calls: the request's budget (see [requestBudget]) less the
// margin its answer needs.
func (a *api) deadline(w http.ResponseWriter, r *http.Request) (context.Context, context.CancelFunc, bool) {
	budget, err := requestBudget(r, a.timeout)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return nil, nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), budget-answerMargin(budget))
	return ctx, cancel, true
}

// roomID returns the request's room id, or answers 400 naming it.
func roomID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !idPattern.MatchString(id) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("room id %s: want 1 to 64 characters of [A-Za-z0-9_-]", quote(id)))
		return "", false
	}
	return id, true
}

func (a *api) apply(w http.ResponseWriter, r *http.Request) {
	id, ok := roomID(w, r)
	if !ok {
		return
	}
	cmd, code, err := decodeCommand(w, r)
	if err != nil {
		writeError(w, code, err.Error())
		return
	}
	ctx, cancel, ok := a.deadline(w, r)
	if !ok {
		return
	}
	defer cancel()
	resp, err := a.forwardApply(ctx, &roompb.ApplyRequest{RoomId: id, CommandId: cmd.CommandID, Op: cmd.Op})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// room-service answers a resend (the gateway's own after an unknown
	// outcome, or the client's) exactly as it answered the first
	// application, at the same Seq: the client cannot tell.
	writeJSON(w, http.StatusOK, applied{Status: "applied", Seq: resp.GetSeq()})
}

func (a *api) getRoom(w http.ResponseWriter, r *http.Request) {
	id, ok := roomID(w, r)
	if !ok {
		return
	}
	ctx, cancel, ok := a.deadline(w, r)
	if !ok {
		return
	}
	defer cancel()
	rm, err := within(ctx, a.retried, "none answered in time", func(ctx context.Context) (*roompb.Room, error) { return a.getOnce(ctx, id) })
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ids := rm.GetCommandIds()
	if ids == nil {
		ids = []string{} // [] rather than null for an empty room
	}
	writeJSON(w, http.StatusOK, room{RoomID: rm.GetRoomId(), Seq: rm.GetSeq(), Fence: rm.GetFence(),
		CommandIDs: ids, SnapshotSeq: rm.GetSnapshotSeq()})
}

// decodeCommand reads and checks the command body. Unknown fields are
// refused: a misspelt "commandId" would otherwise read as a missing id.
func decodeCommand(w http.ResponseWriter, r *http.Request) (command, int, error) {
	var c command
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyLen))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		code, err := unreadable(err, fmt.Sprintf("malformed JSON body: %v", err))
		return c, code, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		code, err := unreadable(err, "malformed JSON body: data after the object")
		return c, code, err
	}
	switch {
	case c.CommandID == "":
		return c, http.StatusBadRequest, errors.New("command_id is required")
	case !idPattern.MatchString(c.CommandID):
		return c, http.StatusBadRequest, fmt.Errorf("command_id %s: want 1 to 64 characters of [A-Za-z0-9_-]", quote(c.CommandID))
	}
	// The same closed set room-service enforces, so a command it would
	// refuse is refused here, without a backend call.
	if err := roompb.CheckOp(c.Op); err != nil {
		return c, http.StatusBadRequest, err
	}
	return c, 0, nil
}

// unreadable is the answer to a body whose reading failed with err: 413
// when it ran past maxBodyLen, in the object or in the white space after
// it alike, and otherwise 400 saying malformed.
func unreadable(err error, malformed string) (int, error) {
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return http.StatusRequestEntityTooLarge, fmt.Errorf("body exceeds %d bytes", mbe.Limit)
	}
	return http.StatusBadRequest, errors.New(malformed)
}

// fail answers a backend failure that was not waited out. UNAVAILABLE is,
// by the time it gets here, the deadline reached with nothing applied (see
// [within]): 503 with Retry-After, as the drain middleware answers, and a
// client may retry anywhere. DEADLINE_EXCEEDED is 504 with no Retry-After:
// for a command, an attempt may have been applied, and the answer says the
// outcome is unknown (the client may retry with the same command_id, which
// gets the first application's answer); a read applies nothing, and its
// answer says none came in time. Anything unexpected is 502.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unavailable:
		w.Header().Set("Retry-After", drain.RetryAfter)
		writeError(w, http.StatusServiceUnavailable, st.Message())
	case codes.InvalidArgument:
		writeError(w, http.StatusBadRequest, st.Message())
	case codes.DeadlineExceeded:
		prefix := "outcome unknown: "
		if r.Method == http.MethodGet {
			prefix = "no answer in time: "
		}
		writeError(w, http.StatusGatewayTimeout, prefix+st.Message())
	default:
		a.log.Warn("room backend failed", "method", r.Method, "path", r.URL.Path, "code", st.Code().String(), "err", st.Message())
		writeError(w, http.StatusBadGateway, st.Message())
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // a failed write means the client left
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, struct {
		Error string `json:"error"`
	}{msg})
}

// quote quotes s for an error message, cut short so a huge value is not
// echoed back whole.
func quote(s string) string {
	if len(s) > 80 {
		return fmt.Sprintf("%q…", s[:80])
	}
	return fmt.Sprintf("%q", s)
}
