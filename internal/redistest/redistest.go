// Package redistest starts real redis-server processes for tests.
//
// Each server listens on a free loopback port, keeps nothing on disk and is
// stopped (and waited for) by t.Cleanup. Tests fail, never skip, when
// redis-server is missing: scripts/test installs it.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one running redis-server.
type Server struct {
	// Addr is host:port on loopback.
	Addr string
	Port int
	// Username and Password are what a client must AUTH with; empty for a
	// server started by Start, which lets every client in.
	Username, Password string

	t   testing.TB
	cmd *exec.Cmd
}

// Start starts a standalone redis-server with extra config arguments
// (e.g. "--cluster-enabled", "yes") and waits until it answers PING.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	return start(t, FreePort(t), "", "", args...)
}

// StartAuth is Start for a server that refuses every client that has not
// authenticated as user with password, as a production Redis does. User
// "default" sets requirepass (AUTH password, the pre-ACL way); any other
// name is an ACL user with every permission, and the default user is
// turned off (AUTH user password). Restart keeps the same credentials.
func StartAuth(t testing.TB, user, password string, args ...string) *Server {
	t.Helper()
	if user == "" || password == "" {
		t.Fatalf("redistest: StartAuth needs a user and a password")
	}
	return start(t, FreePort(t), user, password, args...)
}

// authArgs are the config arguments that make redis-server require user
// and password.
func authArgs(user, password string) []string {
	switch user {
	case "":
		return nil
	case "default":
		return []string{"--requirepass", password}
	}
	return []string{"--user", user, "on", ">" + password, "~*", "&*", "+@all", "--user", "default", "off"}
}

// URL is the server's redis:// URL, credentials included.
func (s *Server) URL() string {
	u := url.URL{Scheme: "redis", Host: s.Addr}
	if s.Password != "" {
		u.User = url.UserPassword(s.Username, s.Password)
	}
	return u.String()
}

func start(t testing.TB, port int, user, password string, args ...string) *Server {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server not found (run scripts/test, which installs it): %v", err)
	}
	dir := t.TempDir()
	base := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
		"--protected-mode", "no",
	}
	base = append(base, authArgs(user, password)...)
	cmd := exec.Command(path, append(base, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("redistest: start redis-server: %v", err)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port, Username: user, Password: password, t: t, cmd: cmd}
	logged := make(chan struct{})
	go func() { // drain the server's output so it never blocks on a full pipe
		defer close(logged)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
		}
	}()
	t.Cleanup(func() {
		s.Kill()
		<-logged
	})
	s.waitReady()
	return s
}

// Client returns a go-redis client for the server, closed at cleanup.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(s.options())
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill stops the server at once (SIGKILL) and waits for it. It is safe to
// call more than once; cleanup calls it too.
func (s *Server) Kill() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// Pause stops the server with SIGSTOP: it keeps its data and its
// connections but answers nothing, as a hung or partitioned Redis does.
// Unlike Kill and Restart, nothing written before the outage is lost, so
// a test can require that no acknowledged write is. Resume continues it.
func (s *Server) Pause() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatalf("redistest: pause %s: %v", s, err)
	}
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		s.t.Fatalf("redistest: resume %s: %v", s, err)
	}
}

// Restart starts a fresh, empty server on the same port after Kill, so a
// test can model Redis returning after an outage.
func (s *Server) Restart(args ...string) {
	s.t.Helper()
	s.Kill()
	n := start(s.t, s.Port, s.Username, s.Password, args...)
	*s = *n
}

// options are the client options that reach the server.
func (s *Server) options() *redis.Options {
	return &redis.Options{Addr: s.Addr, Username: s.Username, Password: s.Password}
}

func (s *Server) waitReady() {
	s.t.Helper()
	o := s.options()
	o.MaxRetries, o.DialTimeout = -1, 100*time.Millisecond
	c := redis.NewClient(o)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if err := c.Ping(ctx).Err(); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			s.t.Fatalf("redistest: redis-server on %s not ready: %v", s.Addr, ctx.Err())
		case <-time.After(10 * time.Millisecond): // polling an external process; nothing to be notified by
		}
	}
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) String() string { return fmt.Sprintf("redis-server@%s", s.Addr) }
