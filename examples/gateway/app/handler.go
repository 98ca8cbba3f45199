package app

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// Handler returns the room API as the gateway serves it under /api/: the
// request deadline, the waiting within it, the backend call slots and the
// pending cap (MaxPending, MaxPendingBytes; 0 takes the defaults), with
// the cap's metrics registered with reg. It connects to cfg's backends
// now; closeFn closes those connections. Only cfg's Backends or
// DNSTarget, RequestTimeout, AttemptTimeout and pending caps are read.
func Handler(ctx context.Context, cfg Config, reg prometheus.Registerer, log *slog.Logger) (h http.Handler, closeFn func() error, err error) {
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.MaxPendingBytes == 0 {
		cfg.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if err := cfg.checkAttemptTimeout(); err != nil {
		return nil, nil, err
	}
	p, err := newPending(cfg, reg)
	if err != nil {
		return nil, nil, err
	}
	b := newBackends(cfg, log)
	if err := b.Start(ctx); err != nil {
		return nil, nil, err
	}
	a, err := newAPI(b, p, cfg, log, reg)
	if err != nil {
		return nil, nil, errors.Join(err, b.Close(context.Background()))
	}
	return a.routes(), func() error { return b.Close(context.Background()) }, nil
}
