package readiness

import (
	"context"
	"net"
	"time"
)

// DefaultListenerTimeout is the timeout of [Listener]: a connection to this
// process's own listener needs no network round trip.
const DefaultListenerTimeout = 100 * time.Millisecond

// Listener checks that this process's own listener at addr accepts a TCP
// connection, e.g. Listener(":8080"). It only connects and closes. The check
// is gating, named "listener "+addr, with [DefaultListenerTimeout]; it is a
// plain [Check], so a caller overrides what it needs before Add:
//
//	c := readiness.Listener(":8080")
//	c.Name = "http_listener"
func Listener(addr string) Check {
	return Check{Name: "listener " + addr, Tier: Gating, Timeout: DefaultListenerTimeout,
		Probe: func(ctx context.Context) error {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return err
			}
			return c.Close()
		}}
}
