package mariadbtest

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"go.uber.org/goleak"

	"github.com/drainkit/drainkit/internal/harness"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStopStartKeepsData(t *testing.T) {
	s := Start(t)
	db := s.DB()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (v INT)"); err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (42)"); err != nil {
		t.Fatalf("insert: %v", err)
	}
	addr := s.Addr
	s.Stop()
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := db.PingContext(short); err == nil {
		t.Fatal("ping of a stopped server: got nil; want an error")
	}
	s.Start()
	if s.Addr != addr {
		t.Errorf("address after Start: got %s; want %s", s.Addr, addr)
	}
	var got int
	if err := db.QueryRowContext(ctx, "SELECT v FROM t").Scan(&got); err != nil || got != 42 {
		t.Fatalf("after restart: got %d, %v; want 42, nil", got, err)
	}
}

func TestPauseHangsAndResumeAnswers(t *testing.T) {
	s := Start(t)
	db := s.DB()
	ctx := context.Background()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	s.Pause()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := db.PingContext(short); err == nil {
		t.Fatal("ping of a paused server: got nil; want a timeout")
	}
	s.Resume()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("ping after resume: %v", err)
	}
}

func TestRefusesWrongPassword(t *testing.T) {
	s := Start(t)
	cfg, err := mysql.ParseDSN(s.DSN)
	if err != nil {
		t.Fatalf("parse %s: %v", s.DSN, err)
	}
	if cfg.User != User || cfg.Passwd != Password || cfg.Addr != s.Addr {
		t.Errorf("DSN %s: got %s:%s@%s; want %s:%s@%s", s.DSN, cfg.User, cfg.Passwd, cfg.Addr, User, Password, s.Addr)
	}
	cfg.Passwd = "wrong"
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.PingContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "Access denied") {
		t.Fatalf("ping with a wrong password: got %v; want access denied", err)
	}
}

func TestLaunchOutsideATest(t *testing.T) {
	s, err := Launch(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !s.exited() {
		t.Fatal("after Close: mariadbd still runs")
	}
}

// childDirEnv makes the test binary the process that launches a server
// and is killed (TestServerDiesWithTheProcessThatStartedIt).
const childDirEnv = "MARIADBTEST_CHILD_DIR"

// A demo or test killed outright (SIGKILL, a CI timeout: no cleanup runs)
// takes its server with it, rather than leaving a mariadbd that holds its
// port and data directory.
func TestServerDiesWithTheProcessThatStartedIt(t *testing.T) {
	if dir := os.Getenv(childDirEnv); dir != "" {
		s, err := Launch(dir)
		if err != nil {
			fmt.Println("launch:", err)
			os.Exit(1)
		}
		fmt.Printf("pid %d sockets %s\n", s.cmd.Process.Pid, s.sockDir)
		_, _ = io.Copy(io.Discard, os.Stdin) // the parent never closes it: wait to be killed
		os.Exit(1)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithTheProcessThatStartedIt$")
	child.Env = append(os.Environ(), childDirEnv+"="+t.TempDir())
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	var sockets string
	var said strings.Builder
	lines := bufio.NewScanner(out)
	for lines.Scan() { // until the child says which server it started, or exits
		if n, _ := fmt.Sscanf(lines.Text(), "pid %d sockets %s", &pid, &sockets); n == 2 {
			break
		}
		said.WriteString(lines.Text() + "\n")
	}
	if pid == 0 {
		_ = child.Process.Kill()
		_ = child.Wait()
		t.Fatalf("the child started no server:\n%s", said.String())
	}
	t.Cleanup(func() {
		if t.Failed() && harness.Alive(pid) { // the server outlived its parent: nothing left behind all the same
			_ = syscall.Kill(pid, syscall.SIGKILL)
			for deadline := time.Now().Add(10 * time.Second); harness.Alive(pid) && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
		}
		_ = os.RemoveAll(sockets)
	})
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	// Another process's exit: polled, within a bound far above the kernel's delivery.
	for deadline := time.Now().Add(10 * time.Second); harness.Alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("mariadbd (pid %d) still runs 10 s after the process that started it was killed", pid)
		}
	}
}
