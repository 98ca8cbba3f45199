package drain_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/drain"
)

// sse serves Server-Sent Events on a registered stream: a hello event, a
// retry: field once told of the drain, and a goodbye event when its turn
// to close comes.
func sse(s *drain.Streams) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, end, ok := s.Open(r.Context())
		if !ok {
			w.Header().Set("Retry-After", drain.RetryAfter)
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		defer end()
		rc := http.NewResponseController(w)
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(s string) { _, _ = io.WriteString(w, s); _ = rc.Flush() }
		send("event: hello\ndata: hi\n\n")
		told := s.Told()
		for {
			select {
			case <-told:
				send("retry: 1000\n\n")
				told = nil
			case <-ctx.Done():
				if told != nil {
					select { // both may be ready: tell first
					case <-told:
						send("retry: 1000\n\n")
					default:
					}
				}
				send("event: goodbye\ndata: reconnect elsewhere\n\n")
				return
			}
		}
	}
}

// hijacked takes the connection over, as a WebSocket handler does, and
// speaks a line protocol on it: "going-away" when told, "bye" and a close
// when its turn comes.
func hijacked(s *drain.Streams) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, end, ok := s.Open(r.Context())
		if !ok {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		defer end()
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		var mu sync.Mutex // the told and close goroutines both write
		write := func(s string) {
			mu.Lock()
			defer mu.Unlock()
			_, _ = buf.WriteString(s)
			_ = buf.Flush()
		}
		write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: lines\r\nConnection: Upgrade\r\n\r\nhello\n")
		told := make(chan struct{})
		go func() {
			defer close(told)
			select {
			case <-s.Told():
			case <-ctx.Done(): // the client's context ended, or both are ready
				select {
				case <-s.Told():
				default:
					return
				}
			}
			write("going-away\n")
		}()
		stop := context.AfterFunc(ctx, func() { <-told; write("bye\n"); _ = conn.Close() })
		defer stop()
		_, _ = io.Copy(io.Discard, buf) // until the close above, or the client's
		end()                           // ends the context, so the told goroutine ends too
		<-told
		_ = conn.Close()
	}
}

// server serves h behind a tracker on loopback, with its HTTP drain hooks
// and the streams' hooks.
func server(t *testing.T, s *drain.Streams, h http.Handler) (string, []drain.Hook, <-chan error) {
	t.Helper()
	var tr drain.Tracker
	srv := &http.Server{Handler: tr.Middleware(h), ReadHeaderTimeout: time.Second}
	hooks := append(drain.HTTPHooks("http", srv, &tr), s.Hooks()...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-served })
	return ln.Addr().String(), hooks, served
}

func TestStreamsSSEOverHTTP(t *testing.T) {
	const n = 20
	s := newStreams(t, drain.StreamsConfig{Name: "sse", Margin: 300 * time.Millisecond})
	addr, hooks, _ := server(t, s, sse(s))
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	type result struct {
		lines []string
		err   error
	}
	results := make(chan result, n)
	var subscribed sync.WaitGroup
	for range n {
		subscribed.Add(1)
		go func() {
			resp, err := client.Get("http://" + addr + "/events")
			if err != nil {
				subscribed.Done()
				results <- result{err: err}
				return
			}
			defer resp.Body.Close()
			var res result
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				res.lines = append(res.lines, sc.Text())
				if sc.Text() == "data: hi" {
					subscribed.Done() // registered: Open came before the hello
				}
			}
			res.err = sc.Err()
			results <- res
		}()
	}
	subscribed.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	r := drain.Run(ctx, "test", hooks)
	require.NoError(t, r.Err())
	rep, _ := r.Hook("sse.close")
	require.NotNil(t, rep.Streams)
	assert.Equal(t, n, rep.Streams.Told)
	assert.Equal(t, n, rep.Streams.Paced+rep.Streams.Hard, "every stream closed by the drain: %+v", *rep.Streams)
	assert.Zero(t, rep.Streams.Unended)

	for range n {
		res := <-results
		require.NoError(t, res.err)
		got := strings.Join(res.lines, "\n")
		assert.Contains(t, got, "retry: 1000", "told of the drain")
		assert.True(t, strings.HasSuffix(got, "event: goodbye\ndata: reconnect elsewhere\n"), "got %q; want it to end with the goodbye event", got)
	}

	resp, err := client.Get("http://" + addr + "/events")
	if err == nil { // the listener is closed; a kept-alive connection is refused
		resp.Body.Close()
		t.Errorf("a new subscription after the drain got %s; want it refused", resp.Status)
	}
}

func TestStreamsHijackedConnection(t *testing.T) {
	const n = 5
	s := newStreams(t, drain.StreamsConfig{Name: "ws", Margin: 300 * time.Millisecond})
	addr, hooks, _ := server(t, s, hijacked(s))

	type result struct {
		lines []string
		err   error
	}
	results := make(chan result, n)
	for range n {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		_, err = fmt.Fprint(conn, "GET /lines HTTP/1.1\r\nHost: test\r\nUpgrade: lines\r\nConnection: Upgrade\r\n\r\n")
		require.NoError(t, err)
		rd := bufio.NewReader(conn)
		for { // the 101 response and hello: the stream is registered
			line, err := rd.ReadString('\n')
			require.NoError(t, err)
			if line == "hello\n" {
				break
			}
		}
		go func() {
			var res result
			for {
				line, err := rd.ReadString('\n')
				if err != nil {
					if !errors.Is(err, io.EOF) {
						res.err = err
					}
					break
				}
				res.lines = append(res.lines, strings.TrimSuffix(line, "\n"))
			}
			results <- res
		}()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	r := drain.Run(ctx, "test", hooks)
	// http.Server neither waits for nor closes a hijacked connection: the
	// streams' close hook does, so the drain ends well before its deadline.
	require.NoError(t, r.Err())
	rep, _ := r.Hook("ws.close")
	require.NotNil(t, rep.Streams)
	assert.Equal(t, n, rep.Streams.Told)
	assert.Equal(t, n, rep.Streams.Paced+rep.Streams.Hard)
	for range n {
		res := <-results
		require.NoError(t, res.err)
		assert.Equal(t, []string{"going-away", "bye"}, res.lines, "then the server closed the connection")
	}
}
