package redistest

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestStartRestart(t *testing.T) {
	s := Start(t)
	c := s.Client()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("set: %v", err)
	}
	s.Restart()
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("after restart: exists = %d, %v; want 0, nil", n, err)
	}
}

func TestPauseKeepsData(t *testing.T) {
	s := Start(t)
	c := s.Client()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("set: %v", err)
	}
	s.Pause()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := c.Ping(short).Err(); err == nil {
		t.Fatal("ping of a paused server: got nil; want a timeout")
	}
	s.Resume()
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("after resume: get = %q, %v; want \"v\", nil", got, err)
	}
}

func TestStartAuthRefusesStrangers(t *testing.T) {
	tests := []struct {
		name, user string
	}{
		{"requirepass", "default"},
		{"acl user", "app"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := StartAuth(t, tt.user, "s3cret")
			ctx := context.Background()
			if err := s.Client().Ping(ctx).Err(); err != nil {
				t.Fatalf("ping with the credentials: %v", err)
			}
			o, err := redis.ParseURL(s.URL())
			if err != nil {
				t.Fatalf("parse %s: %v", s.URL(), err)
			}
			if o.Username != tt.user || o.Password != "s3cret" {
				t.Errorf("URL credentials %q:%q; want %q:%q", o.Username, o.Password, tt.user, "s3cret")
			}
			stranger := redis.NewClient(&redis.Options{Addr: s.Addr})
			defer stranger.Close()
			if err := stranger.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
				t.Errorf("ping without credentials: got %v; want NOAUTH", err)
			}
			s.Restart()
			if err := s.Client().Ping(ctx).Err(); err != nil {
				t.Errorf("ping after restart with the same credentials: %v", err)
			}
		})
	}
}

// A port bound by someone else between FreePort and redis-server's own
// bind makes the server exit at once: start says so with errPortTaken,
// which startFree answers with other ports, rather than waiting out its
// readiness deadline.
func TestStartOnATakenPortSaysSo(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	// errPortTaken comes only from the server's exit: a wait that missed
	// it would end at its deadline with another error.
	_, err = start(t, port, "", "")
	if !errors.Is(err, errPortTaken) {
		t.Fatalf("start on a bound port: %v; want errPortTaken", err)
	}
}

// A server that exits before it answers (a bad argument) fails with its
// own output, which says why.
func TestStartOfAServerThatExitsShowsItsOutput(t *testing.T) {
	_, err := start(t, FreePort(t), "", "", "--no-such-directive", "yes")
	if err == nil || errors.Is(err, errPortTaken) || !strings.Contains(err.Error(), "no-such-directive") {
		t.Fatalf("start with a bad argument: %v; want an error quoting the server's output", err)
	}
}
