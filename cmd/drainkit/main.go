// Command drainkit proves, on one machine, whether a service survives a
// rolling update without dropping a request.
//
//	go run github.com/drainkit/drainkit/cmd/drainkit@latest drill [flags] -- <command> [args]
//
// drill starts a few instances of the command behind a load balancer,
// sends them a steady load, replaces every instance in turn as a
// Kubernetes Deployment does, and prints what the clients saw: requests
// failed by cause, latency during the update and outside it, and how each
// old instance exited. See "drainkit drill -h" and docs/drill.md.
//
// Exit codes: 0 nothing failed and every old instance exited 0 in time,
// 1 otherwise, 2 the drill could not run (bad flags, an instance that never
// became ready).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes of the drainkit command.
const (
	exitPass    = 0
	exitFail    = 1
	exitCantRun = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `drainkit proves whether a service survives a rolling update.

Usage:

	drainkit drill [flags] -- <command> [args]

Run "drainkit drill -h" for the drill's flags.
`

// run is the command with its arguments, writing to stdout and stderr, and
// returns its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitCantRun
	}
	switch args[0] {
	case "drill":
		return runDrill(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && args[1] == "drill" {
			return runDrill(ctx, []string{"-h"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return exitPass
	}
	fmt.Fprintf(stderr, "drainkit: unknown command %q\n\n%s", args[0], usage)
	return exitCantRun
}
