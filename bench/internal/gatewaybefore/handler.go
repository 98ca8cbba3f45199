package gatewaybefore

import (
	"context"
	"log/slog"
	"net/http"
)

// Handler returns the room API as the gateway served it under /api/
// before the request-deadline change, connected to cfg's backends;
// closeFn closes the connections.
func Handler(ctx context.Context, cfg Config, log *slog.Logger) (h http.Handler, closeFn func() error, err error) {
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	b := newBackends(cfg)
	if err := b.Start(ctx); err != nil {
		return nil, nil, err
	}
	a := &api{b: b, timeout: cfg.RequestTimeout, log: log}
	return a.routes(), func() error { return b.Close(context.Background()) }, nil
}
