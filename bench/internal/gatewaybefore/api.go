package gatewaybefore

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

	"google.golang.org/grpc"
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

// applied answers an applied or duplicate command.
type applied struct {
	Status string `json:"status"` // "applied" or "duplicate"
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
	timeout time.Duration
	log     *slog.Logger
}

// routes returns the API's handler (the drain tracks it, not the probes).
func (a *api) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/rooms/{id}/commands", a.apply)
	mux.HandleFunc("GET /api/v1/rooms/{id}", a.getRoom)
	return mux
}

func (a *api) apply(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !idPattern.MatchString(id) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("room id %s: want 1 to 64 characters of [A-Za-z0-9_-]", quote(id)))
		return
	}
	cmd, code, err := decodeCommand(w, r)
	if err != nil {
		writeError(w, code, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.timeout)
	defer cancel()
	resp, err := a.forwardApply(ctx, &roompb.ApplyRequest{RoomId: id, CommandId: cmd.CommandID, Op: cmd.Op})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	s := "applied"
	if resp.GetStatus() == applyDuplicate {
		s = "duplicate"
	}
	writeJSON(w, http.StatusOK, applied{Status: s, Seq: resp.GetSeq()})
}

func (a *api) getRoom(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !idPattern.MatchString(id) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("room id %s: want 1 to 64 characters of [A-Za-z0-9_-]", quote(id)))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.timeout)
	defer cancel()
	rooms, err := a.b.rooms()
	if err != nil {
		a.fail(w, r, err)
		return
	}
	rm, err := retryRefused(ctx, func(opts ...grpc.CallOption) (*roompb.Room, error) {
		return rooms.GetRoom(ctx, &roompb.GetRoomRequest{RoomId: id}, opts...)
	})
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
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return c, http.StatusRequestEntityTooLarge, fmt.Errorf("body exceeds %d bytes", mbe.Limit)
		}
		return c, http.StatusBadRequest, fmt.Errorf("malformed JSON body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return c, http.StatusBadRequest, errors.New("malformed JSON body: data after the object")
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

// fail answers a backend failure. UNAVAILABLE is, by the time it gets
// here, a refusal (see call): nothing was processed, so 503 with
// Retry-After, as the drain middleware answers, and a client or load
// balancer may retry anywhere. Unknown and DeadlineExceeded mean the
// command may have been applied: 502 and 504, which say so and carry no
// Retry-After; the client may retry with the same command_id, which
// room-service deduplicates. Anything unexpected is 502.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unavailable:
		w.Header().Set("Retry-After", drain.RetryAfter)
		writeError(w, http.StatusServiceUnavailable, st.Message())
	case codes.InvalidArgument:
		writeError(w, http.StatusBadRequest, st.Message())
	case codes.DeadlineExceeded:
		writeError(w, http.StatusGatewayTimeout, "outcome unknown: "+st.Message())
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
