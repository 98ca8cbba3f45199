package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/lifecycle"
)

// FuzzRequestTimeout: a Request-Timeout header is the request's budget,
// capped at REQUEST_TIMEOUT, or refused naming the header.
func FuzzRequestTimeout(f *testing.F) {
	for _, s := range []string{"", "2s", "750ms", "0s", "-1s", "abc", "1h", " 3s ", "9223372036854775807ns"} {
		f.Add(s)
	}
	const limit = 15 * time.Second
	f.Fuzz(func(t *testing.T, v string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set(TimeoutHeader, v)
		d, err := requestBudget(r, limit)
		if err != nil {
			assert.Contains(t, err.Error(), TimeoutHeader, "got %q; want the header named", err)
			return
		}
		assert.Positive(t, d, "budget for %q", v)
		assert.LessOrEqual(t, d, limit, "budget for %q", v)
		if p, perr := time.ParseDuration(strings.TrimSpace(r.Header.Get(TimeoutHeader))); perr == nil {
			assert.Equal(t, min(p, limit), d, "budget for %q", v)
		}
	})
}

// FuzzLastEventID: a Last-Event-ID is a seq that formats back to itself,
// or refused naming the header.
func FuzzLastEventID(f *testing.F) {
	for _, s := range []string{"", "0", "42", "-1", "abc", "9223372036854775808", "+5", "007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, err := lastEventID(v)
		if err != nil {
			assert.True(t, strings.HasPrefix(err.Error(), "Last-Event-ID "), "got %q; want the header named", err)
			return
		}
		assert.GreaterOrEqual(t, n, int64(0), "seq from %q", v)
		if v != "" {
			back, _ := strconv.ParseInt(strconv.FormatInt(n, 10), 10, 64)
			assert.Equal(t, n, back, "seq from %q", v)
		}
	})
}

// FuzzRoomID: a room id in the path is accepted exactly when it matches
// the id pattern; a refusal is 400 naming the room id.
func FuzzRoomID(f *testing.F) {
	for _, s := range []string{"r1", "", "a b", strings.Repeat("x", 65), "room_1-a", "{x}", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.SetPathValue("id", id)
		w := httptest.NewRecorder()
		got, ok := roomID(w, r)
		require.Equal(t, idPattern.MatchString(id), ok, "roomID(%q)", id)
		if ok {
			assert.Equal(t, id, got)
			return
		}
		assert.Equal(t, http.StatusBadRequest, w.Code, "roomID(%q)", id)
		assert.Contains(t, w.Body.String(), "room id", "the 400 for %q names the field", id)
	})
}

// FuzzCommandBody: a command body is accepted only with a valid
// command_id and op, and an accepted one encodes back to what was read;
// a refused one is 400 or 413 with an error that names what is wrong.
func FuzzCommandBody(f *testing.F) {
	for _, s := range []string{`{"command_id":"c1","op":"join"}`, `{}`, `{"commandId":"c1"}`, `{"command_id":"c1","op":"join"} {}`,
		`{"command_id":"a b","op":"join"}`, `{"command_id":"c1","op":"dance"}`, `[`, ``, strings.Repeat(" ", maxBodyLen+1)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		w := httptest.NewRecorder()
		cmd, code, err := decodeCommand(w, r)
		if err != nil {
			assert.Contains(t, []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge}, code, "code for %q", body)
			msg := err.Error()
			named := strings.Contains(msg, "command_id") || strings.Contains(msg, "op") ||
				strings.Contains(msg, "JSON body") || strings.Contains(msg, "body exceeds")
			assert.True(t, named, "got %q for %q; want what is wrong named", msg, body)
			return
		}
		assert.True(t, idPattern.MatchString(cmd.CommandID), "accepted command_id %q", cmd.CommandID)
		again, err := json.Marshal(cmd)
		require.NoError(t, err)
		back, _, err := decodeCommand(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(again)))
		require.NoError(t, err, "the accepted command %s read back", again)
		assert.Equal(t, cmd, back)
	})
}

// FuzzGatewayConfig: whatever the gateway's variables hold, configFromEnv
// refuses them with a *ConfigError naming a variable that was set (or one
// whose default does not fit, saying so), or returns a
// Config whose request budget fits the drain and whose attempt budget is
// shorter than the request's.
func FuzzGatewayConfig(f *testing.F) {
	f.Add("a:1", "", "", "", "", "")
	f.Add("dns:///room-service-headless:13001", "127.0.0.1:8080", "4s", "1s", "10", "off")
	f.Add("a:1, b:2", "", "26s", "", "0", "150.5")
	f.Add("", ":x", "abc", "0s", "-1", "NaN")
	f.Fuzz(func(t *testing.T, addrs, httpAddr, reqTimeout, attempt, maxPending, closeRate string) {
		vars := map[string]string{"ROOM_GRPC_ADDRS": addrs, "HTTP_ADDR": httpAddr, "REQUEST_TIMEOUT": reqTimeout,
			"ATTEMPT_TIMEOUT": attempt, "MAX_PENDING": maxPending, "SSE_MAX_CLOSE_RATE": closeRate}
		lcfg := lifecycle.Config{DrainTimeout: 30 * time.Second, DrainDelay: 5 * time.Second}
		c, err := configFromEnv(func(k string) string { return vars[k] }, lcfg)
		if err != nil {
			var ce *ConfigError
			require.True(t, errors.As(err, &ce), "got %T %v; want a *ConfigError", err, err)
			set := vars[ce.Var] != "" || ce.Var == "REQUEST_TIMEOUT" || ce.Var == "ROOM_GRPC_ADDRS" || ce.Var == "HTTP_ADDR" ||
				strings.Contains(ce.Problem, ce.Var+" is unset")
			assert.True(t, set, "got %q; want a variable that was set, or one with a default that may not fit", err)
			return
		}
		assert.Less(t, c.RequestTimeout, lcfg.DrainTimeout-lcfg.DrainDelay, "request budget")
		assert.Less(t, c.attemptTimeout(), c.RequestTimeout, "attempt budget")
		assert.True(t, c.DNSTarget != "" || len(c.Backends) > 0, "a config with no backend")
	})
}
