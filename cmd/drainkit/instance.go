package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/drainkit/drainkit/internal/harness"
)

// instance is one of the service's instances: the first -n are the old
// ones the update replaces, the next -n the new ones.
type instance struct {
	name  string // i1, i2, …
	index int    // 1, 2, …
	addr  string // 127.0.0.1:{port}, where requests go
	admin string // 127.0.0.1:{admin}, or empty
	ready string // the readiness URL, or readyGRPC
	env   []string
	ports *harness.Ports // frees addr and admin just before the start
	proc  *harness.Proc  // nil until started

	startedAt, readyAt time.Time // for -html
}

// newInstances gives 2n instances their ports, environment and readiness
// URL.
func newInstances(cfg *drillConfig, ports *harness.Ports) ([]*instance, error) {
	perInstance := 1
	if cfg.usesAdmin() {
		perInstance = 2
	}
	n := 2 * cfg.Instances
	addrs, err := ports.Pick(n * perInstance)
	if err != nil {
		return nil, err
	}
	insts := make([]*instance, n)
	for i := range insts {
		in := &instance{name: "i" + strconv.Itoa(i+1), index: i + 1, addr: addrs[i*perInstance], ports: ports}
		v := instanceVars{Port: portOf(in.addr), Name: in.name, Index: in.index}
		if perInstance == 2 {
			in.admin = addrs[i*perInstance+1]
			v.Admin = portOf(in.admin)
		}
		for _, e := range cfg.Env {
			in.env = append(in.env, expand(e, v))
		}
		in.ready = expand(cfg.Ready, v)
		insts[i] = in
	}
	return insts, nil
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// start runs the instance and waits, within -start, until it is ready.
func (in *instance) start(ctx context.Context, cfg *drillConfig) error {
	in.startedAt = time.Now()
	in.ports.Free(in.addr, in.admin) // the service may bind without SO_REUSEADDR
	p, err := harness.StartProc(in.name, cfg.Command[0], in.env, cfg.Command[1:]...)
	if err != nil {
		return err
	}
	in.proc = p
	ctx, cancel := context.WithTimeout(ctx, cfg.Start)
	defer cancel()
	if err := in.waitReady(ctx); err != nil {
		return fmt.Errorf("instance %s did not become ready within -start %s: %w", in.name, cfg.Start, err)
	}
	in.readyAt = time.Now()
	return nil
}

// waitReady waits until the readiness URL answers 2xx or, with -ready
// grpc, the gRPC health service on the instance's port answers SERVING.
func (in *instance) waitReady(ctx context.Context) error {
	if in.ready == readyGRPC {
		return waitServing(ctx, in.proc, in.addr)
	}
	return harness.WaitReady(ctx, in.proc, in.ready)
}

// running reports whether the instance was started and has not exited.
func (in *instance) running() bool {
	if in.proc == nil {
		return false
	}
	select {
	case <-in.proc.Done():
		return false
	default:
		return true
	}
}

// stopped is what became of an old instance.
type stopped struct {
	Name string `json:"name"`
	Pid  int    `json:"pid"`
	// ExitCode is the exit status, -1 when a signal ended it.
	ExitCode int `json:"exit_code"`
	// Exit says how it ended, e.g. "exit status 0", "signal: killed".
	Exit string `json:"exit"`
	// Killed is set when it did not exit within -grace and was SIGKILLed.
	Killed bool `json:"killed"`
	// TimeToExit is from SIGTERM to the exit, as the drill saw it.
	TimeToExit duration `json:"time_to_exit_ms"`
	// Report is its drainkit drain report, when it printed one.
	Report *drainReport `json:"drain_report,omitempty"`
	// Early is set when it exited before its SIGTERM.
	Early bool `json:"exited_early,omitempty"`

	sigterm, removed, exited time.Time // removed: the kube balancer's endpoint removal
}

// terminate sends SIGTERM, tells onTerm when (it returns when the
// balancer removes the instance, if it knows), waits grace for the exit
// and SIGKILLs the instance after it.
func (in *instance) terminate(ctx context.Context, grace time.Duration, onTerm func(time.Time) time.Time) (stopped, error) {
	s := stopped{Name: in.name, Pid: in.proc.Pid(), Early: !in.running()}
	if err := in.proc.Signal(syscall.SIGTERM); err != nil {
		if !errors.Is(err, os.ErrProcessDone) && !s.Early {
			return s, err
		}
		s.Early = true // it exited between the look and the signal
	}
	s.sigterm = in.proc.Signalled()
	s.removed = onTerm(s.sigterm)
	wait, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	if _, err := in.proc.Wait(wait); err != nil {
		if ctx.Err() != nil {
			return s, ctx.Err()
		}
		in.proc.Kill()
		s.Killed = true
	}
	<-in.proc.Done()
	s.ExitCode, _ = in.proc.Wait(context.Background()) // it is done
	s.Exit = in.proc.ExitState()
	s.exited, _ = in.proc.Exited()
	s.Report = findReport(in.proc.Lines())
	if s.Early {
		return s, nil
	}
	s.TimeToExit = duration(in.proc.ExitSeenAfter())
	return s, nil
}
