package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// One redis-server for the whole run, shared by every lease contender, so
// they all pay the same round trip. drainkit's internal/redistest cannot be
// imported from this module; this is its few-line equivalent.
var (
	redisOnce sync.Once
	redisAddr string
	redisCmd  *exec.Cmd
	redisErr  error
)

// TestMain stops the redis-server a benchmark may have started. Run with
// clientURLEnv set, the binary is the client process of
// BenchmarkDrainInFlight instead.
func TestMain(m *testing.M) {
	if url := os.Getenv(clientURLEnv); url != "" {
		n, _ := strconv.Atoi(os.Getenv(clientCountEnv))
		os.Exit(runClients(url, n))
	}
	code := m.Run()
	if redisCmd != nil {
		_ = redisCmd.Process.Kill()
		_ = redisCmd.Wait()
	}
	os.Exit(code)
}

// redisServer returns the address of the shared redis-server, starting it
// on a free loopback port (nothing on disk) on first use.
func redisServer(b *testing.B) string {
	b.Helper()
	redisOnce.Do(func() { redisAddr, redisCmd, redisErr = startRedis() })
	if redisErr != nil {
		b.Fatalf("redis-server: %v (install it: apt-get install -y redis-server)", redisErr)
	}
	return redisAddr
}

func startRedis() (string, *exec.Cmd, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir, err := os.MkdirTemp("", "bench-redis")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no", "--protected-mode", "no")
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	// Waiting for another process to come up: poll with a bounded deadline.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c.Ping(context.Background()).Err() == nil {
			return addr, cmd, nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return "", nil, fmt.Errorf("no PING answer on %s within 5 s", addr)
		}
	}
}

// counted is a go-redis client whose round trips are counted: one per
// command sent alone, one per pipeline. A new connection's handshake
// (HELLO, CLIENT SETINFO) is not counted: it is paid once per pooled
// connection, not per operation.
type counted struct {
	*redis.Client
	trips atomic.Int64
}

// newRedisClient returns a client with the settings every lease contender
// shares: at most one retry and context deadlines honoured (what drainkit's
// lease.New demands, and what a careful redislock or redsync user sets
// too), a pool big enough for 16 concurrent callers. Contenders use
// distinct keys, so none inherits another's. The caller closes it (clients
// of shared fixtures live as long as the process).
func newRedisClient(b *testing.B) *counted {
	b.Helper()
	c := &counted{Client: redis.NewClient(&redis.Options{
		Addr:                  redisServer(b),
		MaxRetries:            1,
		ContextTimeoutEnabled: true,
		PoolSize:              32,
	})}
	c.AddHook(tripHook{&c.trips})
	return c
}

type tripHook struct{ n *atomic.Int64 }

func (tripHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h tripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "hello" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h tripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || cmds[0].Name() != "client" {
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// serverWork runs loop and returns the round trips it made and the
// redis-server CPU time it cost. The two INFO calls that measure the CPU
// are outside the counted trips.
func (c *counted) serverWork(b *testing.B, loop func()) (trips int64, cpu time.Duration) {
	b.Helper()
	cpu = c.serverCPU(b)
	start := c.trips.Load()
	loop()
	trips = c.trips.Load() - start
	return trips, c.serverCPU(b) - cpu
}

// commandStats is how many times the shared redis-server ran cmd and
// the microseconds it spent in it (INFO commandstats).
func (c *counted) commandStats(b *testing.B, cmd string) (calls, usec int64) {
	b.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatalf("INFO commandstats: %v", err)
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls = n
			case "usec":
				usec = n
			}
		}
	}
	return calls, usec
}

// serverCPU is the shared redis-server's CPU time so far (user + system,
// from INFO cpu, which the server reads from getrusage when asked).
func (c *counted) serverCPU(b *testing.B) time.Duration {
	b.Helper()
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatalf("INFO cpu: %v", err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		for _, field := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), field); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("INFO cpu: %s%q: %v", field, v, err)
				}
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}
