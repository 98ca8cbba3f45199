package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// InProcess is HAProxy's rules in this process, for a machine without
// HAProxy: round robin over the servers that passed their last probe of
// the readiness path (every [ProbeInterval], [ProbeFall] failures take a
// server out, one success puts it back), a request whose connection was
// refused retried on another server up to 3 times, and nothing else
// retried: a server that answered 5xx, reset the connection or did not
// answer may have processed the request, so the client gets its answer,
// or 502.
type InProcess struct {
	srv       *http.Server
	ln        net.Listener
	servers   []Server
	checkPath string
	noServer  string
	up        []atomic.Bool
	next      atomic.Uint64
	retry     atomic.Int64
	client    *http.Client

	stop   chan struct{}
	cancel context.CancelFunc // ends every handler's requests at close
	wg     sync.WaitGroup     // Serve and probeLoop

	mu       sync.Mutex
	closing  bool
	handlers sync.WaitGroup // serve calls in flight
}

// StartInProcess starts an in-process balancer on a free loopback port in
// front of servers, probing checkPath (empty: [DefaultCheckPath]) on each
// server's CheckAddr; its own 503 carries {"error":noServer} (empty:
// [DefaultNoServer]). Every server starts out down. Close stops it.
func StartInProcess(servers []Server, checkPath, noServer string) (*InProcess, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("harness: in-process balancer: %w", err)
	}
	base, cancel := context.WithCancel(context.Background())
	b := &InProcess{
		ln: ln, servers: servers, up: make([]atomic.Bool, len(servers)),
		checkPath: or(checkPath, DefaultCheckPath), noServer: or(noServer, DefaultNoServer),
		// A fresh connection per attempt, as HAProxy's first request of a
		// session: a kept-alive connection the server closes while a
		// request is written on it would fail with no definite answer.
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
		stop:   make(chan struct{}),
		cancel: cancel,
	}
	b.srv = &http.Server{Handler: http.HandlerFunc(b.serve), ReadHeaderTimeout: 5 * time.Second,
		BaseContext: func(net.Listener) context.Context { return base }}
	b.wg.Go(func() { _ = b.srv.Serve(ln) })
	b.wg.Go(b.probeLoop)
	return b, nil
}

// Name is "inprocess".
func (b *InProcess) Name() string { return "inprocess" }

// Addr is the address the balancer listens on.
func (b *InProcess) Addr() string { return b.ln.Addr().String() }

// Retries is how many attempts went to another server after a refused
// connection.
func (b *InProcess) Retries() int { return int(b.retry.Load()) }

// Output is empty: the in-process balancer keeps no log.
func (b *InProcess) Output() string { return "" }

// Close stops the server, the probes and every handler, and waits for
// them: http.Server.Close does not wait for handlers, so serve counts
// itself in b.handlers, and no handler starts once closing is set.
func (b *InProcess) Close() {
	b.mu.Lock()
	b.closing = true
	b.mu.Unlock()
	close(b.stop)
	_ = b.srv.Close()
	b.cancel()
	b.wg.Wait()
	b.handlers.Wait()
	b.client.CloseIdleConnections()
}

func (b *InProcess) probeLoop() {
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	t := time.NewTicker(ProbeInterval)
	defer t.Stop()
	// failed counts, per server, probes failed in a row: ProbeFall of
	// them take a server out, one success puts it back. A server starts
	// out.
	failed := make([]int, len(b.servers))
	for i := range failed {
		failed[i] = ProbeFall
	}
	for {
		for i, s := range b.servers {
			resp, err := probe.Get("http://" + s.checkAddr() + b.checkPath)
			ok := err == nil && resp.StatusCode/100 == 2
			if err == nil {
				resp.Body.Close()
			}
			if failed[i]++; ok {
				failed[i] = 0
			}
			b.up[i].Store(failed[i] < ProbeFall)
		}
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
	}
}

// WaitServer waits until the probes hold server i up (or down).
func (b *InProcess) WaitServer(ctx context.Context, i int, up bool) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for b.up[i].Load() != up {
		select {
		case <-ctx.Done():
			return fmt.Errorf("harness: in-process balancer: server %s up=%v: %w", b.servers[i].Name, !up, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// pick returns the next server that is up, round robin, skipping tried
// ones.
func (b *InProcess) pick(tried map[int]bool) (int, bool) {
	for range b.servers {
		i := int(b.next.Add(1) % uint64(len(b.servers)))
		if b.up[i].Load() && !tried[i] {
			return i, true
		}
	}
	return 0, false
}

func (b *InProcess) serve(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		b.refuse(w, "balancer closing")
		return
	}
	b.handlers.Add(1)
	b.mu.Unlock()
	defer b.handlers.Done()

	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "bad request body", http.StatusBadRequest)
		return
	}
	tried := map[int]bool{}
	for attempt := 0; attempt <= 3; attempt++ {
		i, ok := b.pick(tried)
		if !ok {
			break
		}
		tried[i] = true
		if attempt > 0 {
			b.retry.Add(1)
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+b.servers[i].Addr+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil { // a request no server could take, such as an HTTP/2 preface's "PRI *"
			http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
			return
		}
		req.Header = r.Header.Clone()
		// Never let net/http resend on its own a request it has written.
		req.Header.Del("Idempotency-Key")
		req.Header.Del("X-Idempotency-Key")
		resp, err := b.client.Do(req)
		var op *net.OpError
		if err != nil && errors.As(err, &op) && op.Op == "dial" {
			continue // refused before anything was sent
		}
		if err != nil {
			http.Error(w, "server failed, outcome unknown: "+err.Error(), http.StatusBadGateway)
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, err = io.Copy(w, resp.Body)
		resp.Body.Close()
		if err != nil {
			// The server broke off its answer: break the client's off too,
			// as HAProxy does, rather than end it cleanly as if complete.
			panic(http.ErrAbortHandler)
		}
		return
	}
	b.refuse(w, b.noServer)
}

// refuse answers as HAProxy's http-error does when no server took the
// request: 503, Retry-After, {"error":msg}.
func (b *InProcess) refuse(w http.ResponseWriter, msg string) {
	body, _ := json.Marshal(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(body)
}
