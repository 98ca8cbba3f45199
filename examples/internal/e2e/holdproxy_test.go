package e2e

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/drainkit/drainkit/internal/redistest"
)

// Time budgets: heldFor is how long a held PING must stay unanswered, the
// deadline a caller cut off from Redis would give up at; answerWithin
// bounds an answer that must come, generous for a loaded machine.
const (
	heldFor      = 300 * time.Millisecond
	answerWithin = 5 * time.Second
)

func TestHoldProxyHoldsWithoutResetAndForwardDelivers(t *testing.T) {
	rs := redistest.Start(t)
	before := goleak.IgnoreCurrent() // redistest's output reader lives until cleanup
	p, err := StartHoldProxy(rs.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	clientPing(t, p.Addr())
	open := dial(t, p.Addr())
	if err := ping(open, answerWithin); err != nil {
		t.Fatalf("PING through the proxy: got %v; want PONG", err)
	}

	p.Hold()
	if err := ping(open, heldFor); !isTimeout(err) {
		t.Fatalf("PING on an open connection while held: got %v; want a timeout (no answer, no reset)", err)
	}
	fresh := dial(t, p.Addr()) // accepted, not refused
	if err := ping(fresh, heldFor); !isTimeout(err) {
		t.Fatalf("PING on a connection made while held: got %v; want a timeout", err)
	}

	p.Forward()
	// The PINGs sent while held were kept: their PONGs arrive now, on the
	// same connections, which were never reset.
	for name, c := range map[string]net.Conn{"open": open, "made while held": fresh} {
		if err := pong(c, answerWithin); err != nil {
			t.Errorf("held PING's answer on the %s connection after Forward: got %v; want PONG", name, err)
		}
	}
	clientPing(t, p.Addr())

	open.Close()
	fresh.Close()
	p.Close()
	goleak.VerifyNone(t, before)
}

func TestHoldProxyCloseWhileHeldEndsEveryGoroutine(t *testing.T) {
	rs := redistest.Start(t)
	before := goleak.IgnoreCurrent()
	p, err := StartHoldProxy(rs.Addr)
	if err != nil {
		t.Fatal(err)
	}
	open := dial(t, p.Addr())
	defer open.Close()
	if err := ping(open, answerWithin); err != nil {
		t.Fatalf("PING through the proxy: got %v; want PONG", err)
	}
	p.Hold()
	fresh := dial(t, p.Addr()) // waits at the gate, not yet dialled to Redis
	defer fresh.Close()
	if err := ping(open, heldFor); !isTimeout(err) { // a read is now held in a pump
		t.Fatalf("PING while held: got %v; want a timeout", err)
	}

	p.Close()
	for name, c := range map[string]net.Conn{"open": open, "made while held": fresh} {
		if err := pong(c, answerWithin); isTimeout(err) || err == nil {
			t.Errorf("read on the %s connection after Close: got %v; want it closed", name, err)
		}
	}
	goleak.VerifyNone(t, before)
}

// clientPing PINGs addr with a fresh go-redis client, as a service would.
func clientPing(t *testing.T, addr string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), answerWithin)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("go-redis PING via %s: got %v; want PONG", addr, err)
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, answerWithin)
	if err != nil {
		t.Fatalf("dial %s: got %v; want a connection", addr, err)
	}
	return c
}

// ping sends an inline PING on c and waits up to within for its answer.
// A raw connection, not a client: a client closes its connection on a
// timeout, and the test needs the same connection after the hold.
func ping(c net.Conn, within time.Duration) error {
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	return pong(c, within)
}

func pong(c net.Conn, within time.Duration) error {
	if err := c.SetReadDeadline(time.Now().Add(within)); err != nil {
		return err
	}
	buf := make([]byte, len("+PONG\r\n"))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "+PONG\r\n" {
		return errors.New("answer " + string(buf))
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// A client's half-close reaches the target, whose answer still comes
// back: the other direction stays open until the target ends it.
func TestHoldProxyPassesHalfClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() { // the target answers with what it read, once it saw the client's EOF
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(answerWithin))
		got, err := io.ReadAll(c)
		if err == nil {
			_, err = c.Write(append([]byte("got "), got...))
		}
		served <- err
	}()
	p, err := StartHoldProxy(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	c := dial(t, p.Addr())
	defer c.Close()
	if _, err := c.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(answerWithin))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "got bye" {
		t.Errorf("answer after a half-close: got %q, %v; want %q", got, err, "got bye")
	}
	if err := <-served; err != nil {
		t.Errorf("target: got %v; want it to read to EOF and answer", err)
	}
}
