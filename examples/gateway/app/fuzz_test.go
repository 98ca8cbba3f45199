package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/lifecycle"
)

// The handlers below are called on an api or events with no backends: a
// refused request must be answered before any backend is reached, and one
// that reached for a backend would panic.

// maxFuzzLen bounds a fuzzed body or field. Longer ones reach no new code,
// only higher counts in the JSON escaping loops, which the fuzzer takes
// for new coverage and then spends seconds minimizing (its minimizer is
// quadratic in the input's length) instead of fuzzing.
const maxFuzzLen = 256

// FuzzRequestTimeout: a Request-Timeout header (trimmed) is refused with
// 400 naming the header exactly when it is set and is not a positive
// duration; otherwise the budget is that duration capped at
// REQUEST_TIMEOUT, or REQUEST_TIMEOUT when the header is absent.
func FuzzRequestTimeout(f *testing.F) {
	for _, s := range []string{"", "2s", "750ms", "1m", "0s", "-1s", "abc", "5", "1h", " 3s ", "9223372036854775807ns"} {
		f.Add(s)
	}
	const limit = 15 * time.Second
	f.Fuzz(func(t *testing.T, v string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set(TimeoutHeader, v)
		got, err := requestBudget(r, limit)
		want, perr := time.ParseDuration(strings.TrimSpace(v))
		switch {
		case strings.TrimSpace(v) == "":
			require.NoError(t, err, "Request-Timeout %q", v)
			assert.Equal(t, limit, got, "Request-Timeout %q: got %s; want %s", v, got, limit)
		case perr != nil || want <= 0:
			require.Error(t, err, "Request-Timeout %q: got a budget of %s; want a refusal", v, got)
			assert.Contains(t, err.Error(), TimeoutHeader, "got %q; want the header named", err)
			r.SetPathValue("id", "r1")
			wantRefused(t, (&api{timeout: limit}).getRoom, r, http.StatusBadRequest, TimeoutHeader)
		default:
			require.NoError(t, err, "Request-Timeout %q", v)
			assert.Equal(t, min(want, limit), got, "Request-Timeout %q: got %s; want %s", v, got, min(want, limit))
		}
	})
}

// FuzzLastEventID: a Last-Event-ID is refused with 400 naming the header
// exactly when it is set and is not a non-negative decimal int64; otherwise
// it is the seq it reads as (0 when absent).
func FuzzLastEventID(f *testing.F) {
	for _, s := range []string{"", "0", "42", "-1", "x", "abc", "9223372036854775807", "9223372036854775808", "+5", "007", " 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := lastEventID(v)
		want, perr := strconv.ParseInt(v, 10, 64)
		switch {
		case v == "":
			require.NoError(t, err)
			assert.Zero(t, got, "got %d; want 0 for no Last-Event-ID", got)
		case perr != nil || want < 0:
			require.Error(t, err, "Last-Event-ID %q: got seq %d; want a refusal", v, got)
			assert.True(t, strings.HasPrefix(err.Error(), "Last-Event-ID "), "got %q; want the header named", err)
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.SetPathValue("id", "r1")
			r.Header.Set("Last-Event-ID", v)
			wantRefused(t, (&events{}).ServeHTTP, r, http.StatusBadRequest, "Last-Event-ID")
		default:
			require.NoError(t, err, "Last-Event-ID %q", v)
			assert.Equal(t, want, got, "Last-Event-ID %q: got %d; want %d", v, got, want)
		}
	})
}

// FuzzRoomID: a room id in the path is accepted exactly when it is 1 to 64
// characters of [A-Za-z0-9_-] (isID, written out rather than the product's
// regexp); a refusal, by either route, is 400 naming the room id.
func FuzzRoomID(f *testing.F) {
	for _, s := range []string{"r1", "", "a b", "a.b", "{x}", strings.Repeat("x", 64), strings.Repeat("x", 65), "room_1-a", "é", "r1\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"command_id":"c1","op":"join"}`))
		r.SetPathValue("id", id)
		got, ok := roomID(httptest.NewRecorder(), r)
		require.Equal(t, isID(id), ok, "roomID(%q): got ok=%t; want %t", id, ok, isID(id))
		if ok {
			assert.Equal(t, id, got)
			return
		}
		wantRefused(t, (&api{}).getRoom, r, http.StatusBadRequest, "room id")
		wantRefused(t, (&api{}).apply, r, http.StatusBadRequest, "room id")
	})
}

// FuzzCommandBody: any body is accepted only as one JSON object with a
// valid command_id and op, which encodes back to a body read as the same
// command; a refusal is 400 whose error starts with what is wrong. Bodies
// over maxBodyLen are FuzzCommandFields's, built there from a length.
func FuzzCommandBody(f *testing.F) {
	for _, s := range []string{`{"command_id":"c1","op":"join"}`, `{}`, `null`, `["c1"]`, `{"command_id":7}`, `{"commandId":"c1"}`,
		`{"command_id":"c1","op":"join"} {}`, `{"command_id":"a b","op":"join"}`, `{"command_id":"c1","op":"dance"}`, `{"command_id":`, `[`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > maxFuzzLen {
			return
		}
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		cmd, code, err := decodeCommand(httptest.NewRecorder(), r)
		if err != nil {
			assert.Equal(t, http.StatusBadRequest, code, "got %d for %q; want 400", code, body)
			what := []string{"malformed JSON body", "command_id ", "op "}
			assert.True(t, slices.ContainsFunc(what, func(w string) bool { return strings.HasPrefix(err.Error(), w) }),
				"got %q for %q; want what is wrong named first", err, body)
			return
		}
		assert.True(t, isID(cmd.CommandID), "got command_id %q accepted; want an id", cmd.CommandID)
		assert.Contains(t, roompb.Ops(), cmd.Op, "got op %q accepted; want one of the ops", cmd.Op)
		again, err := json.Marshal(cmd)
		require.NoError(t, err)
		back, _, err := decodeCommand(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(again)))
		require.NoError(t, err, "the accepted command %s read back", again)
		assert.Equal(t, cmd, back)
	})
}

// FuzzCommandFields: a body holding any command_id and op, then pad
// spaces, is refused with 413 when over maxBodyLen bytes (white space
// included), and otherwise accepted exactly when the id is valid and the
// op one of roompb.Ops, as the very command sent; any other is answered
// 400 by the apply handler, naming the first field that is wrong.
func FuzzCommandFields(f *testing.F) {
	for _, s := range []struct {
		id, op string
		pad    uint16
	}{{"c1", "join", 0}, {"c1", "hello", 2}, {"", "join", 0}, {"c 1", "join", 0}, {"c1", "x", 0}, {"c1", "", 0},
		{strings.Repeat("c", 65), "join", 0}, {"c1", "JOIN", 0}, {"c1", "join", maxBodyLen}} {
		f.Add(s.id, s.op, s.pad)
	}
	f.Fuzz(func(t *testing.T, id, op string, pad uint16) {
		if len(id) > maxFuzzLen || len(op) > maxFuzzLen {
			return
		}
		obj, err := json.Marshal(command{CommandID: id, Op: op})
		require.NoError(t, err)
		body := append(obj, bytes.Repeat([]byte(" "), int(pad))...)
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.SetPathValue("id", "r1")
		switch {
		case len(body) > maxBodyLen:
			wantRefused(t, (&api{}).apply, r, http.StatusRequestEntityTooLarge, "body exceeds")
		case id == "":
			wantRefused(t, (&api{}).apply, r, http.StatusBadRequest, "command_id is required")
		case !isID(id):
			wantRefused(t, (&api{}).apply, r, http.StatusBadRequest, "command_id ")
		case !slices.Contains(roompb.Ops(), op):
			wantRefused(t, (&api{}).apply, r, http.StatusBadRequest, "op ")
		default:
			got, _, err := decodeCommand(httptest.NewRecorder(), r)
			require.NoError(t, err, "body %s", body)
			assert.Equal(t, command{CommandID: id, Op: op}, got)
		}
	})
}

// FuzzGatewayConfig: whatever the gateway's variables hold (and the
// drain's, read by lifecycle.ConfigFromEnv as main reads them),
// configFromEnv refuses them with a *ConfigError naming a variable that
// was set, the required ROOM_GRPC_ADDRS, or one left unset whose default
// does not fit, saying so. Or it returns a Config holding each value set
// as that value parses, backends that format back to themselves, a
// request budget that fits the drain and an attempt budget shorter than
// the request's.
func FuzzGatewayConfig(f *testing.F) {
	f.Add("a:1", "", "", "", "", "", "", "", "")
	f.Add("dns:///room-service-headless:13001", "127.0.0.1:8080", "4s", "1s", "10", "off", "1000000", "", "")
	f.Add("10.0.0.1:13001, room-b:13001", "", "26s", "", "0", "150.5", "100", "", "")
	f.Add("", ":x", "abc", "0s", "-1", "NaN", "", "", "")
	f.Add("a:1,,b:2", "13000", "", "", "", "fast", "", "", "")
	f.Add("a:1", "", "", "", "", "", "", "10s", "1s") // the default REQUEST_TIMEOUT outlasts the drain
	f.Fuzz(func(t *testing.T, addrs, httpAddr, reqTimeout, attempt, maxPending, closeRate, maxPendingBytes, drainTimeout, drainDelay string) {
		vars := map[string]string{"ROOM_GRPC_ADDRS": addrs, "HTTP_ADDR": httpAddr, "REQUEST_TIMEOUT": reqTimeout,
			"ATTEMPT_TIMEOUT": attempt, "MAX_PENDING": maxPending, "SSE_MAX_CLOSE_RATE": closeRate,
			"MAX_PENDING_BYTES": maxPendingBytes, "DRAIN_TIMEOUT": drainTimeout, "DRAIN_DELAY": drainDelay}
		getenv := func(k string) string { return vars[k] }
		lcfg, err := lifecycle.ConfigFromEnv(lifecycleEnv(getenv))
		if err != nil {
			return // lifecycle's FuzzConfigFromEnv covers its refusals
		}
		c, err := configFromEnv(getenv, lcfg)
		if err != nil {
			var ce *ConfigError
			require.True(t, errors.As(err, &ce), "got %T %v; want a *ConfigError", err, err)
			named := vars[ce.Var] != "" || strings.Contains(ce.Problem, ce.Var+" is unset") ||
				(ce.Var == "ROOM_GRPC_ADDRS" && strings.HasPrefix(ce.Problem, "required"))
			assert.True(t, named, "got %q; want a variable that was set, or one whose default does not fit, saying so", err)
			return
		}
		wantParsed(t, vars, "HTTP_ADDR", c.HTTPAddr, func(s string) (string, error) { return s, nil })
		wantParsed(t, vars, "REQUEST_TIMEOUT", c.RequestTimeout, time.ParseDuration)
		wantParsed(t, vars, "ATTEMPT_TIMEOUT", c.AttemptTimeout, time.ParseDuration)
		wantParsed(t, vars, "MAX_PENDING", c.MaxPending, strconv.Atoi)
		wantParsed(t, vars, "MAX_PENDING_BYTES", c.MaxPendingBytes, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) })
		if closeRate == "off" {
			assert.True(t, c.SSECloseAtDeadline, "SSE_MAX_CLOSE_RATE=off")
		} else {
			wantParsed(t, vars, "SSE_MAX_CLOSE_RATE", c.SSEMaxCloseRate, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) })
		}
		if c.DNSTarget == "" {
			require.Len(t, c.Backends, strings.Count(addrs, ",")+1, "ROOM_GRPC_ADDRS=%q: got %q", addrs, c.Backends)
			back, err := parseAddrs(strings.Join(c.Backends, ","))
			require.NoError(t, err, "backends %q read back", c.Backends)
			assert.Equal(t, c.Backends, back)
		}
		assert.Less(t, c.RequestTimeout, lcfg.DrainTimeout-lcfg.DrainDelay, "request budget")
		assert.Less(t, c.attemptTimeout(), c.RequestTimeout, "attempt budget")
	})
}

// wantParsed asserts that the variable env, when set, holds got as parse
// reads its whole value.
func wantParsed[T comparable](t *testing.T, vars map[string]string, env string, got T, parse func(string) (T, error)) {
	t.Helper()
	v := vars[env]
	if v == "" {
		return
	}
	want, err := parse(v)
	require.NoError(t, err, "%s=%q was accepted", env, v)
	assert.Equal(t, want, got, "%s=%q: got %v; want %v", env, v, got, want)
}

// wantRefused serves r with h and asserts the code and an error that
// names what.
func wantRefused(t *testing.T, h http.HandlerFunc, r *http.Request, code int, what string) {
	t.Helper()
	w := httptest.NewRecorder()
	h(w, r)
	var body struct{ Error string }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), "got body %q; want a JSON error", w.Body)
	assert.Equal(t, code, w.Code, "got %d (%s); want %d", w.Code, body.Error, code)
	assert.Contains(t, body.Error, what, "got %q; want %q named", body.Error, what)
}

// isID is the syntax of room and command ids written out: 1 to 64 bytes
// of A-Z, a-z, 0-9, '_' and '-'.
func isID(s string) bool {
	const idChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
	return len(s) >= 1 && len(s) <= 64 && strings.Trim(s, idChars) == ""
}
