package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// When a phase ended is the latest start_ms + duration_ms of its hooks in
// the report (0 for one that ended at once with the report); a phase none
// of whose hooks ran, or a report without start_ms, has none.
func TestPhaseEnd(t *testing.T) {
	tests := []struct {
		name   string
		give   string // the report's hooks
		want   time.Duration
		wantOK bool
	}{
		{"one hook", `[{"name":"api.stop_intake","phase":"stop_intake","outcome":"ok","start_ms":5000.25,"duration_ms":0.2}]`, 5000450 * time.Microsecond, true},
		{"the later end of two", `[{"name":"a","phase":"stop_intake","start_ms":12.25,"duration_ms":500},{"name":"b","phase":"stop_intake","start_ms":12.5,"duration_ms":0.25}]`, 512250 * time.Microsecond, true},
		{"with the report, at once", `[{"name":"a","phase":"stop_intake","start_ms":0,"duration_ms":0}]`, 0, true},
		{"another phase", `[{"name":"f","phase":"flush","start_ms":7.5}]`, 0, false},
		{"skipped", `[{"name":"api.stop_intake","phase":"stop_intake","outcome":"skipped","duration_ms":0}]`, 0, false},
		{"older report", `[{"name":"api.stop_intake","phase":"stop_intake","outcome":"ok","duration_ms":0.2}]`, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r drainReport
			require.NoError(t, json.Unmarshal([]byte(`{"hooks":`+tt.give+`}`), &r))
			got, ok := r.phaseEnd("stop_intake")
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

// A drain report is read from slog's JSON form, its text form and the
// default logger's form; other lines are not reports.
func TestParseReport(t *testing.T) {
	const report = `{"reason":"signal: terminated","duration_ms":5001.2,"exit_code":0,"forced":false,"deadline_exceeded":false,` +
		`"hooks":[{"name":"api.stop_intake","phase":"stop_intake","outcome":"ok","start_ms":5000.5,"duration_ms":0.2}]}`
	quoted := fmt.Sprintf("%q", report)
	tests := []struct {
		name string
		give string
		want bool
	}{
		{name: "json", give: `{"time":"2026-12-03T11:44:15Z","level":"INFO","msg":"drain report","exit_code":0,"report":` + report + `}`, want: true},
		{name: "text", give: `time=2026-12-03T11:44:15Z level=INFO msg="drain report" exit_code=0 report=` + quoted, want: true},
		{name: "default logger", give: `2026/12/03 11:44:15 INFO drain report service=x node_id=vm exit_code=0 report=` + quoted, want: true},
		{name: "another message", give: `{"time":"2026-12-03T11:44:15Z","msg":"drain phase","report":` + report + `}`},
		{name: "no report field", give: `2026/12/03 11:44:15 INFO drain report service=x`},
		{name: "plain line", give: `listening on 127.0.0.1:8080`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := parseReport(tt.give)
			if !tt.want {
				assert.Nil(t, r)
				return
			}
			if assert.NotNil(t, r) {
				assert.Equal(t, 5001.2, r.Duration)
				start := 5000.5
				assert.Equal(t, []hookReport{{Name: "api.stop_intake", Phase: "stop_intake", Outcome: "ok", Start: &start, Duration: 0.2}}, r.Hooks)
			}
		})
	}
}

// A failure is counted under the cause the client saw.
func TestClassify(t *testing.T) {
	refused := &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	tests := []struct {
		name   string
		status int
		err    error
		want   string
	}{
		{name: "200", status: 200, want: ""},
		{name: "302", status: 302, want: ""},
		{name: "404", status: 404, want: causeOther},
		{name: "503", status: 503, want: cause5xx},
		{name: "refused", err: fmt.Errorf("get: %w", refused), want: causeRefused},
		{name: "reset", err: fmt.Errorf("get: %w", reset), want: causeReset},
		{name: "eof", err: fmt.Errorf("get: %w", io.EOF), want: causeReset},
		{name: "deadline", err: fmt.Errorf("get: %w", context.DeadlineExceeded), want: causeTimeout},
		{name: "other", err: errors.New("tls: bad certificate"), want: causeOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.status, tt.err); got != tt.want {
				t.Errorf("classify(%d, %v) = %q; want %q", tt.status, tt.err, got, tt.want)
			}
		})
	}
}

// The progress line says what was sent and what the drill is doing, and
// is cleared when the drill ends.
func TestProgressLine(t *testing.T) {
	var b bytes.Buffer
	l := &load{}
	l.sent.Store(3)
	l.ok.Store(2)
	l.failed.Store(1)
	p := &phase{}
	p.set("update 1/3: starting i4")
	stop := showProgress(&b, l, p)
	stop()
	assert.Contains(t, b.String(), "sent 3  ok 2  failed 1  update 1/3: starting i4")
	assert.True(t, strings.HasSuffix(b.String(), "\r\033[K"), "got %q; want the line cleared at the end", b.String())
}
