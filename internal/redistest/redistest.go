// Package redistest starts real redis-server processes for tests.
//
// Each server listens on a free loopback port, keeps nothing on disk and is
// stopped (and waited for) by t.Cleanup. Tests fail, never skip, when
// redis-server is missing: scripts/test installs it.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
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

	t      testing.TB
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited and been waited for
	output *tail         // its last lines of output
	ready  chan struct{} // closed when its log says it accepts connections
}

// Start starts a standalone redis-server with extra config arguments
// (e.g. "--cluster-enabled", "yes") and waits until its log says it is ready.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	return startFree(t, "", "", func() []string { return args })
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
	return startFree(t, user, password, func() []string { return args })
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

// errPortTaken: redis-server found a port it was given already bound.
var errPortTaken = errors.New("port taken")

// startFree starts a server on a port FreePort picks; args returns the
// other arguments, so a port among them is picked afresh too. Another
// process may bind a picked port before redis-server does (a client's
// outgoing connection takes its port from the same range): the server
// then exits at once, and it is started again on other ports.
func startFree(t testing.TB, user, password string, args func() []string) *Server {
	t.Helper()
	for try := 1; ; try++ {
		s, err := start(t, FreePort(t), user, password, args()...)
		if err == nil {
			return s
		}
		if !errors.Is(err, errPortTaken) || try == 5 {
			t.Fatalf("redistest: %v", err)
		}
		t.Logf("redistest: %v; starting it on other ports", err)
	}
}

// start starts redis-server on port and waits until its log says it is
// ready. It returns an error, with the server's last output, if the
// server exits first; one matching errPortTaken if a port was taken.
func start(t testing.TB, port int, user, password string, args ...string) (*Server, error) {
	t.Helper()
	return launch(t, "", port, user, password, args...)
}

// launch is start, or with conf (a sentinel's config file, which it
// rewrites) a redis-sentinel, ready once it monitors its master.
func launch(t testing.TB, conf string, port int, user, password string, args ...string) (*Server, error) {
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
		"--logfile", "", // to standard output, where start reads that the server is ready
		"--loglevel", "notice",
	}
	base = append(base, authArgs(user, password)...)
	ready := "Ready to accept connections"
	if conf != "" {
		base, ready = append([]string{conf, "--sentinel"}, base...), "+monitor master"
	}
	cmd := exec.Command(path, append(base, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("redistest: start redis-server: %v", err)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port, Username: user, Password: password,
		t: t, cmd: cmd, exited: make(chan struct{}), output: &tail{}, ready: make(chan struct{})}
	go func() { // reads the output to its end, so the server never blocks on a full pipe, then reaps it
		defer close(s.exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.output.add(sc.Text())
			if strings.Contains(sc.Text(), ready) && !isClosed(s.ready) {
				close(s.ready)
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(s.Kill)
	if err := s.waitReady(); err != nil {
		s.Kill()
		return nil, err
	}
	return s, nil
}

// tail keeps the last lines a server wrote.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > 20 {
		t.lines = t.lines[1:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
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
	if !s.Exited() {
		_ = s.cmd.Process.Kill()
	}
	<-s.exited
}

// Exited reports whether the server's process has exited (Kill, or on its own).
func (s *Server) Exited() bool { return isClosed(s.exited) }

// Done returns a channel closed once the server's process has exited.
func (s *Server) Done() <-chan struct{} { return s.exited }

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
	n, err := start(s.t, s.Port, s.Username, s.Password, args...)
	if err != nil {
		s.t.Fatalf("redistest: restart: %v", err)
	}
	*s = *n
}

// options are the client options that reach the server.
func (s *Server) options() *redis.Options {
	return &redis.Options{Addr: s.Addr, Username: s.Username, Password: s.Password}
}

// waitReady waits until the server's own log says it accepts connections:
// a client's answer could come from another process that took the port
// (and a test may rename every command a client could ask with).
func (s *Server) waitReady() error {
	select {
	case <-s.ready:
		return nil
	case <-s.exited:
		err := fmt.Errorf("redis-server on %s exited before it was ready; its last output:\n%s", s.Addr, s.output)
		if strings.Contains(s.output.String(), "Address already in use") {
			err = fmt.Errorf("%w: %w", errPortTaken, err)
		}
		return err
	case <-time.After(10 * time.Second):
		return fmt.Errorf("redis-server on %s not ready after 10s; its last output:\n%s", s.Addr, s.output)
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
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
