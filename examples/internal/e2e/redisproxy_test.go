package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/internal/harness"
	"github.com/drainkit/drainkit/internal/redistest"
)

// The URL StartRoomVia hands a room-service reaches the cluster's Redis,
// which wants a user and password, through the proxy.
func TestRedisProxyCarriesTheClusterCredentials(t *testing.T) {
	rs := redistest.StartAuth(t, "room-service", "e2e-s3cret")
	c := &Cluster{cfg: Config{RedisURL: rs.URL()}}
	p, err := c.StartRedisProxy()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	via, err := redisURLVia(c.cfg.RedisURL, p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(via) // as room-service parses REDIS_URL
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opt)
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), answerWithin)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		t.Errorf("authenticated PING via the proxy: got %v; want PONG", err)
	}
}

func TestRedisURLVia(t *testing.T) {
	tests := []struct {
		give, want string
	}{
		{"redis://127.0.0.1:6379", "redis://127.0.0.1:7000"},
		{"redis://room-service:s3cret@127.0.0.1:6379", "redis://room-service:s3cret@127.0.0.1:7000"},
		{"redis://127.0.0.1:6379/2?dial_timeout=1s", "redis://127.0.0.1:7000/2?dial_timeout=1s"},
	}
	for _, tt := range tests {
		got, err := redisURLVia(tt.give, "127.0.0.1:7000")
		if err != nil || got != tt.want {
			t.Errorf("redisURLVia(%q): got %q, %v; want %q", tt.give, got, err, tt.want)
		}
	}
	if _, err := redisURLVia("127.0.0.1:6379", "127.0.0.1:7000"); err == nil {
		t.Error("redisURLVia of a bare host:port: got no error; want one")
	}
}

// StartRoomVia appends REDIS_URL after the cluster's: the process must
// see the later one, as room-service reads it with os.Getenv.
func TestProcSeesTheLastOfADuplicatedVariable(t *testing.T) {
	p, err := harness.StartProc("env", "/bin/sh", []string{"REDIS_URL=redis://first", "REDIS_URL=redis://last"}, "-c", "echo REDIS_URL=$REDIS_URL")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), answerWithin)
	defer cancel()
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(p.Output()); got != "REDIS_URL=redis://last" {
		t.Errorf("the child's REDIS_URL: got %q; want %q", got, "REDIS_URL=redis://last")
	}
}
