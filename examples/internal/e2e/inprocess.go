package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// inProcess is the demo's stand-in for HAProxy when it is not installed:
// round robin over the gateway slots that passed their last probe of
// /healthz/ready (every ProbeInterval), retrying a request refused before
// a gateway processed it (connection refused, or a 503 with Retry-After)
// on the next one, up to 3 times, as the HAProxy configuration does.
// Nothing else is retried: a gateway that took the request and failed
// (a reset, no answer) may have processed it, so the client gets 502.
type inProcess struct {
	srv    *http.Server
	ln     net.Listener
	slots  []string
	up     []atomic.Bool
	next   atomic.Uint64
	retry  atomic.Int64
	client *http.Client

	stop   chan struct{}
	cancel context.CancelFunc // ends every handler's requests at close
	wg     sync.WaitGroup     // Serve and probeLoop

	mu       sync.Mutex
	closing  bool
	handlers sync.WaitGroup // serve calls in flight
}

func startInProcess(slots []string) (*inProcess, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("e2e: in-process balancer: %w", err)
	}
	base, cancel := context.WithCancel(context.Background())
	b := &inProcess{
		ln: ln, slots: slots, up: make([]atomic.Bool, len(slots)),
		// A fresh connection per attempt, as HAProxy's first request of a
		// session: a kept-alive connection the gateway closes while a
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

func (b *inProcess) name() string   { return "inprocess" }
func (b *inProcess) addr() string   { return b.ln.Addr().String() }
func (b *inProcess) retries() int   { return int(b.retry.Load()) }
func (b *inProcess) output() string { return "" }

// close stops the server, the probes and every handler, and waits for
// them: http.Server.Close does not wait for handlers, so serve counts
// itself in b.handlers, and no handler starts once closing is set.
func (b *inProcess) close() {
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

func (b *inProcess) probeLoop() {
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	t := time.NewTicker(ProbeInterval)
	defer t.Stop()
	// failed counts, per slot, probes failed in a row: ProbeFall of them
	// take a slot out, one success puts it back. A slot starts out.
	failed := make([]int, len(b.slots))
	for i := range failed {
		failed[i] = ProbeFall
	}
	for {
		for i, s := range b.slots {
			resp, err := probe.Get("http://" + s + "/healthz/ready")
			ok := err == nil && resp.StatusCode == http.StatusOK
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

func (b *inProcess) waitServer(ctx context.Context, slot int, up bool) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for b.up[slot].Load() != up {
		select {
		case <-ctx.Done():
			return fmt.Errorf("e2e: balancer slot %d up=%v: %w", slot, !up, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// pick returns the next slot that is up, round robin, skipping tried ones.
func (b *inProcess) pick(tried map[int]bool) (int, bool) {
	for range b.slots {
		i := int(b.next.Add(1) % uint64(len(b.slots)))
		if b.up[i].Load() && !tried[i] {
			return i, true
		}
	}
	return 0, false
}

func (b *inProcess) serve(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		w.Header().Set("Retry-After", "1") // refused before any gateway saw it
		http.Error(w, "balancer closing", http.StatusServiceUnavailable)
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
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, "http://"+b.slots[i]+r.URL.RequestURI(), bytes.NewReader(body))
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
			http.Error(w, "gateway failed, outcome unknown: "+err.Error(), http.StatusBadGateway)
			return
		}
		if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" && attempt < 3 {
			resp.Body.Close() // refused before processing
			continue
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		resp.Body.Close()
		return
	}
	w.Header().Set("Retry-After", "1")
	http.Error(w, "no gateway available", http.StatusServiceUnavailable)
}
