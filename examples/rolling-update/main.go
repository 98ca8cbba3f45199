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
// process and a summary, and exits 1 if an invariant broke, a request
// failed, no lease event was seen or no room changed owner, an old instance
// did not exit 0 within DRAIN_TIMEOUT, or the load had stopped before the
// last old instance exited.
//
// Redis: REDIS_URL when set (redis://[user:password@]host:port, given to
// every room-service), otherwise an embedded in-memory Redis (miniredis) in
// this process. Load balancer: HAProxy when installed,
// otherwise a small in-process balancer with the same health checks and
// retries (BALANCER=inprocess picks it even when HAProxy is installed).
// Snapshots: MariaDB when mariadbd is installed (started in a temporary
// directory, given to every room-service as MYSQL_DSN; SNAPSHOTS=redis
// keeps them in Redis), otherwise Redis; the output says which.
// The end-to-end tests (go test ./e2e/) run the same harness
// against a real redis-server and HAProxy, with faults.
//
// It takes no flags or arguments (-h prints a summary). Ctrl-C, SIGTERM and
// SIGHUP (the terminal closed) stop everything it started and exit 130; a
// closed stdout (| head) does not kill it before it has. Exit codes are the
// built binary's: go run reports any failure as 1.
//
// This command is the demo's driver, built on that harness
// (examples/internal/e2e); it is not a service to copy. The services it
// updates, examples/room-service and examples/gateway, import only
// drainkit's public packages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/drainkit/drainkit/examples/internal/e2e"
)

// exitInterrupted is the exit code after a signal, as a shell reports Ctrl-C.
const exitInterrupted = 130

func main() {
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), `usage: go run ./examples/rolling-update

A rolling update of three room-services under load, measured; no flags.
Environment: REDIS_URL (default: embedded miniredis), BALANCER=inprocess
(default: HAProxy when installed), SNAPSHOTS=redis (default: MariaDB when
installed). Exit 0: every check passed; 1: one failed; 2: it could not run;
130: interrupted (codes of the built binary: go run reports any failure as 1).
`)
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "rolling-update: unexpected argument %q\n", flag.Arg(0))
		flag.Usage()
		os.Exit(2)
	}
	// A write to a closed stdout fails instead of killing the process
	// before it stops what it started; the run goes on to its end. Not
	// notified: any broken connection of the process would raise it.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	code := run(ctx)
	stop()
	os.Exit(code)
}

func run(ctx context.Context) int {
	fail := func(err error) int {
		if ctx.Err() != nil { // the processes' errors are the signal's doing, not theirs
			fmt.Fprintln(os.Stderr, "rolling-update: interrupted; stopping what it started")
			return exitInterrupted
		}
		fmt.Fprintln(os.Stderr, "rolling-update:", err)
		return 2
	}
	dir, err := os.MkdirTemp("", "drainkit-demo")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)

	redisURL := os.Getenv("REDIS_URL")
	if redisURL == "" {
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			return fail(err)
		}
		defer mr.Close()
		redisURL = "redis://" + mr.Addr()
		fmt.Printf("redis: embedded (miniredis) at %s; set REDIS_URL to use a real one\n", mr.Addr())
	} else {
		u, err := url.Parse(redisURL)
		if err != nil {
			return fail(errors.New("REDIS_URL is not a URL")) // not quoted: it may hold a password
		}
		fmt.Printf("redis: %s\n", u.Redacted())
	}

	roomEnv, stopDB, err := e2e.SnapshotStore(dir)
	if err != nil {
		return fail(err)
	}
	defer stopDB()

	fmt.Println("building room-service and gateway …")
	bin, err := e2e.Build(ctx, dir, false)
	if err != nil {
		return fail(err)
	}
	balancer := os.Getenv("BALANCER")
	if balancer == "" {
		balancer = "auto"
	}
	c, err := e2e.Start(ctx, e2e.Config{Bin: bin, RedisURL: redisURL, Balancer: balancer, Dir: dir, RoomEnv: roomEnv})
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	fmt.Printf("cluster: %d room-service, %d gateways behind %s at %s\n",
		len(c.Rooms()), len(c.Gateways()), c.BalancerName(), c.URL())

	// The load runs until the update is over and loadAfterRoll more, at
	// most maxLoad: the update happens under load, then the new instances
	// serve some on their own.
	const rate, loadAfterRoll, maxLoad = 100, time.Second, 60 * time.Second
	fmt.Printf("load: %d commands/s over %d rooms until a second after the update; rolling update of room-service under it …\n",
		rate, e2e.DefaultLoadRooms)
	stopLoad := make(chan struct{})
	loadCtx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	done := make(chan *e2e.LoadResult, 1)
	go func() {
		done <- e2e.Load{URL: c.URL(), Rate: rate, Duration: maxLoad, Prefix: "demo-", Until: stopLoad}.Run(loadCtx)
	}()
	steadyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = c.AwaitOwned(steadyCtx, e2e.DefaultLoadRooms)
	cancel()
	var drained []e2e.Drained
	var roll e2e.Window
	if err == nil {
		roll.From = time.Now()
		drained, err = c.RollRooms(ctx)
		roll.To = time.Now()
	}
	if err != nil {
		cancelLoad()
		<-done
		return fail(err)
	}
	select {
	case <-time.After(loadAfterRoll): // the load's length after the update, not a wait for a condition
	case <-ctx.Done():
	}
	close(stopLoad)
	res := <-done
	checkCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := e2e.Check(checkCtx, c, res, drained, roll)
	if err != nil {
		return fail(err)
	}

	fmt.Println("\ntimeline (state changes of every process):")
	fmt.Print(timeline(c.Timeline(), c.Began(), res))
	fmt.Println("\nsummary:")
	fmt.Print(r.Table())

	bad := r.Problems()
	if r.Failed > 0 {
		bad = append(bad, fmt.Sprintf("%d requests failed", r.Failed))
	}
	if len(r.Holds) == 0 {
		bad = append(bad, "no lease events in the room-service logs: the ownership checks saw nothing")
	}
	if r.RoomsHandedOver == 0 {
		bad = append(bad, "no room changed owner: the update moved nothing")
	}
	if len(drained) != e2e.DefaultRooms {
		bad = append(bad, fmt.Sprintf("%d instances replaced; want %d", len(drained), e2e.DefaultRooms))
	}
	for _, d := range drained {
		if d.ExitCode != 0 || d.DrainTime >= e2e.DefaultDrainTimeout {
			bad = append(bad, fmt.Sprintf("%s exited %d after %s; want 0 within DRAIN_TIMEOUT %s",
				d.Name, d.ExitCode, d.DrainTime.Round(time.Millisecond), e2e.DefaultDrainTimeout))
		}
	}
	if last := e2e.LastExit(drained); !res.LastSent.After(last) {
		bad = append(bad, fmt.Sprintf("the load stopped at %s, before the last old instance exited at %s: the update was not under load",
			res.LastSent.Format("15:04:05.000"), last.Format("15:04:05.000")))
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

// timeline is every process's state changes and the load's first and last
// command, in time order, as offsets from zero.
func timeline(trs []e2e.Transition, zero time.Time, load *e2e.LoadResult) string {
	type line struct {
		at   time.Time
		text string
	}
	lines := []line{
		{load.Began, fmt.Sprintf("t+%6dms  load       first command sent\n", load.Began.Sub(zero).Milliseconds())},
		{load.LastSent, fmt.Sprintf("t+%6dms  load       last command sent\n", load.LastSent.Sub(zero).Milliseconds())},
	}
	for _, t := range trs {
		lines = append(lines, line{t.At, e2e.FormatTimeline([]e2e.Transition{t}, zero)})
	}
	slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	var s string
	for _, l := range lines {
		s += l.text
	}
	return s
}
