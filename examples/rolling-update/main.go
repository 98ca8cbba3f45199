// Command rolling-update is drainkit's demo: a rolling update of three
// room-service instances under load, through two gateways behind a load
// balancer, measured.
//
//	go run ./examples/rolling-update
//
// It builds room-service and gateway, starts them as separate processes on
// loopback, sends a steady load of room commands (unique command ids over
// 20 rooms) through the load balancer, replaces every room-service in turn
// (start the new one, wait until ready, SIGTERM the old one, wait for it to
// exit), then reads every room back and checks that every acknowledged
// command was applied exactly once, that no room ever had two owners and
// that fencing tokens only increased. It prints the state changes of every
// process and a summary, and exits 1 if an invariant broke or a request
// failed.
//
// Redis: REDIS_ADDR when set, otherwise an embedded in-memory Redis
// (miniredis) in this process. Load balancer: HAProxy when installed,
// otherwise a small in-process balancer with the same health checks and
// retries (BALANCER=inprocess picks it even when HAProxy is installed).
// The end-to-end tests (go test ./e2e/) run the same harness
// against a real redis-server and HAProxy, with faults.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/drainkit/drainkit/internal/e2e"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx)
	stop()
	os.Exit(code)
}

func run(ctx context.Context) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "rolling-update:", err)
		return 2
	}
	dir, err := os.MkdirTemp("", "drainkit-demo")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)

	redisAddr := os.Getenv("REDIS_ADDR")
	if redisAddr == "" {
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			return fail(err)
		}
		defer mr.Close()
		redisAddr = mr.Addr()
		fmt.Printf("redis: embedded (miniredis) at %s; set REDIS_ADDR to use a real one\n", redisAddr)
	} else {
		fmt.Printf("redis: %s\n", redisAddr)
	}

	fmt.Println("building room-service and gateway …")
	bin, err := e2e.Build(ctx, dir, false)
	if err != nil {
		return fail(err)
	}
	balancer := os.Getenv("BALANCER")
	if balancer == "" {
		balancer = "auto"
	}
	c, err := e2e.Start(ctx, e2e.Config{Bin: bin, RedisAddr: redisAddr, Balancer: balancer, Dir: dir})
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	fmt.Printf("cluster: %d room-service, %d gateways behind %s at %s\n",
		len(c.Rooms()), len(c.Gateways()), c.BalancerName(), c.URL())

	const rate, duration = 100, 8 * time.Second
	fmt.Printf("load: %d commands/s for %s over %d rooms; rolling update of room-service under it …\n",
		rate, duration, e2e.DefaultLoadRooms)
	done := make(chan *e2e.LoadResult, 1)
	go func() {
		done <- e2e.Load{URL: c.URL(), Rate: rate, Duration: duration, Prefix: "demo-"}.Run(ctx)
	}()
	steadyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = c.AwaitOwned(steadyCtx, e2e.DefaultLoadRooms)
	cancel()
	var drained []e2e.Drained
	if err == nil {
		drained, err = c.RollRooms(ctx)
	}
	res := <-done
	if err != nil {
		return fail(err)
	}
	checkCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := e2e.Check(checkCtx, c, res, drained)
	if err != nil {
		return fail(err)
	}

	fmt.Println("\ntimeline (state changes of every process):")
	fmt.Print(e2e.FormatTimeline(c.Timeline(), c.Began()))
	fmt.Println("\nsummary:")
	fmt.Print(r.Table())

	bad := r.Problems()
	if r.Failed > 0 {
		bad = append(bad, fmt.Sprintf("%d requests failed", r.Failed))
	}
	for _, d := range drained {
		if d.ExitCode != 0 {
			bad = append(bad, fmt.Sprintf("%s exited %d", d.Name, d.ExitCode))
		}
	}
	if len(bad) > 0 {
		fmt.Println("\nFAILED:")
		for _, b := range bad {
			fmt.Println("  -", b)
		}
		return 1
	}
	fmt.Println("\nOK: 0 failed requests, 0 lost writes, never two owners of a room.")
	return 0
}
