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
// /healthz/ready (every 200 ms), retrying a request refused before a
// gateway processed it (connection refused, or a 503) on the next one, up
// to 3 times, as the HAProxy configuration does.
type inProcess struct {
	srv    *http.Server
	ln     net.Listener
	slots  []string
	up     []atomic.Bool
	next   atomic.Uint64
	retry  atomic.Int64
	client *http.Client

	stop chan struct{}
	wg   sync.WaitGroup
}

func startInProcess(slots []string) (*inProcess, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("e2e: in-process balancer: %w", err)
	}
	b := &inProcess{
		ln: ln, slots: slots, up: make([]atomic.Bool, len(slots)),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		stop:   make(chan struct{}),
	}
	b.srv = &http.Server{Handler: http.HandlerFunc(b.serve), ReadHeaderTimeout: 5 * time.Second}
	b.wg.Go(func() { _ = b.srv.Serve(ln) })
	b.wg.Go(b.probeLoop)
	return b, nil
}

func (b *inProcess) name() string   { return "inprocess" }
func (b *inProcess) addr() string   { return b.ln.Addr().String() }
func (b *inProcess) retries() int   { return int(b.retry.Load()) }
func (b *inProcess) output() string { return "" }

func (b *inProcess) close() {
	close(b.stop)
	_ = b.srv.Close()
	b.wg.Wait()
	b.client.CloseIdleConnections()
}

func (b *inProcess) probeLoop() {
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		for i, s := range b.slots {
			resp, err := probe.Get("http://" + s + "/healthz/ready")
			ok := err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				resp.Body.Close()
			}
			b.up[i].Store(ok)
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
		resp, err := b.client.Do(req)
		var op *net.OpError
		if err != nil && errors.As(err, &op) && op.Op == "dial" {
			continue // refused before anything was sent
		}
		if err != nil {
			http.Error(w, "gateway failed: "+err.Error(), http.StatusBadGateway)
			return
		}
		if resp.StatusCode == http.StatusServiceUnavailable && attempt < 3 {
			resp.Body.Close()
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
