// Package mariadbtest starts real MariaDB servers (mariadbd) for tests.
//
// Each server gets a data directory of its own in t.TempDir() ([Start]; or
// in a directory the caller gives, [Launch]), created with
// mariadb-install-db --no-defaults, listens on a free loopback port and
// reads no system configuration and no system socket. It is stopped (and
// waited for) by t.Cleanup. Tests fail, never skip, when mariadbd is
// missing: scripts/test installs it.
//
// Clients connect as an ordinary user with a password, as a production
// database wants, to the database "test". The helper links the MySQL driver
// (github.com/go-sql-driver/mysql); the library packages do not.
package mariadbtest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/drainkit/drainkit/internal/harness"
)

// The account and database every server is created with.
const (
	User     = "app"
	Password = "s3cret"
	Database = "test"
)

// Server is one running mariadbd.
type Server struct {
	// Addr is host:port on loopback; Port its port. Both stay the same
	// across Stop and Start.
	Addr string
	Port int
	// DSN is the go-sql-driver/mysql data source name of Database, as
	// User with Password.
	DSN string

	t       testing.TB // nil for a server from Launch
	bin     string
	args    []string
	dir     string
	sockDir string
	cmd     *exec.Cmd
	done    chan struct{} // closed once cmd has been waited for
}

// Start creates a data directory in t.TempDir(), starts mariadbd on a free
// port and waits until User can ping Database over TCP. The server is
// stopped at cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := Launch(t.TempDir())
	if err != nil {
		t.Fatalf("%v", err)
	}
	s.t = t
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Launch is Start outside a test (the demo uses it): the server lives in
// dir, which the caller removes after [Server.Close]. The methods that
// fail a test panic instead on a server that Launch returned.
func Launch(dir string) (*Server, error) {
	bin, err := lookPath("mariadbd")
	if err != nil {
		return nil, err
	}
	install, err := lookPath("mariadb-install-db")
	if err != nil {
		return nil, err
	}
	u, err := user.Current()
	if err != nil {
		return nil, fmt.Errorf("mariadbtest: current user: %w", err)
	}
	data := filepath.Join(dir, "data")
	// A short directory for the unix socket: its path must fit in 108
	// bytes, and a test's temporary directory may not.
	sockDir, err := os.MkdirTemp("", "mdb")
	if err != nil {
		return nil, fmt.Errorf("mariadbtest: %w", err)
	}
	// Its own directory for temporary tables: in a shared /tmp, one
	// server's bootstrap lost its temporary tables while others ran.
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		_ = os.RemoveAll(sockDir)
		return nil, fmt.Errorf("mariadbtest: %w", err)
	}
	tuning := []string{
		"--tmpdir=" + tmp,
		"--innodb-buffer-pool-size=32M",
		"--innodb-log-file-size=16M",
		"--innodb-flush-log-at-trx-commit=2",
	}
	ia := append([]string{"--no-defaults", "--datadir=" + data, "--user=" + u.Username,
		"--auth-root-authentication-method=socket", "--skip-test-db"}, tuning...)
	installDB := exec.Command(install, ia...)
	harness.OwnGroup(installDB) // it runs a mariadbd of its own to bootstrap the data
	if out, err := installDB.CombinedOutput(); err != nil {
		_ = os.RemoveAll(sockDir)
		return nil, fmt.Errorf("mariadbtest: mariadb-install-db: %w\n%s", err, out)
	}
	initFile := filepath.Join(dir, "init.sql")
	initSQL := fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s';\n"+
		"GRANT ALL PRIVILEGES ON *.* TO '%s'@'%%';\n"+
		"CREATE DATABASE IF NOT EXISTS %s;\n", User, Password, User, Database)
	if err := os.WriteFile(initFile, []byte(initSQL), 0o600); err != nil {
		_ = os.RemoveAll(sockDir)
		return nil, fmt.Errorf("mariadbtest: %w", err)
	}
	port, err := freePort()
	if err != nil {
		_ = os.RemoveAll(sockDir)
		return nil, err
	}
	s := &Server{
		Addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Port:    port,
		bin:     bin,
		dir:     dir,
		sockDir: sockDir,
		args: append([]string{
			"--no-defaults", // first, or mariadbd reads /etc/mysql
			"--datadir=" + data,
			"--user=" + u.Username,
			"--port=" + strconv.Itoa(port),
			"--bind-address=127.0.0.1",
			"--socket=" + filepath.Join(sockDir, "s"),
			"--pid-file=" + filepath.Join(dir, "mariadbd.pid"),
			"--log-error=" + filepath.Join(dir, "error.log"),
			"--init-file=" + initFile,
			"--skip-log-bin",
		}, tuning...),
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = User, Password, "tcp", s.Addr, Database
	s.DSN = cfg.FormatDSN()
	if err := s.start(); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// Close kills the server (SIGKILL works on a paused process too), waits
// for it and removes its socket directory. The data directory is the
// caller's (Start's is the test's temporary directory).
func (s *Server) Close() error {
	if !s.exited() {
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	return os.RemoveAll(s.sockDir)
}

// Start starts the server again after Stop, on the same port with the same
// data; it waits until the server answers. Start on a running server fails
// the test.
func (s *Server) Start() {
	s.helper()
	if err := s.start(); err != nil {
		s.fatal("%v", err)
	}
}

func (s *Server) start() error {
	if !s.exited() {
		return fmt.Errorf("mariadbtest: Start of %s, which is running", s)
	}
	cmd := exec.Command(s.bin, s.args...)
	harness.OwnGroup(cmd) // a demo or test killed outright takes its server with it
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("mariadbtest: start mariadbd: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	return s.waitReady()
}

// Stop shuts the server down cleanly (SIGTERM) and waits for it to exit.
// Its data stays; Start brings it back.
func (s *Server) Stop() {
	s.helper()
	if s.exited() {
		return
	}
	s.signal(syscall.SIGCONT) // a paused server cannot act on SIGTERM
	s.signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.fatal("mariadbtest: %s did not exit 30s after SIGTERM\n%s", s, s.errorLog())
	}
}

// Pause stops the server with SIGSTOP: its connections stay open but
// nothing answers, as a hung or partitioned database does. It returns once
// every thread of the server has stopped (a signal is delivered
// asynchronously, and a thread still running would answer). Resume
// continues it.
func (s *Server) Pause() {
	s.helper()
	s.signal(syscall.SIGSTOP)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		running, err := runningThreads(s.cmd.Process.Pid)
		if err != nil {
			s.fatal("mariadbtest: pause %s: %v", s, err)
		}
		if running == 0 {
			return
		}
		select {
		case <-ctx.Done():
			s.fatal("mariadbtest: pause %s: %d threads still running after SIGSTOP", s, running)
		case <-time.After(time.Millisecond): // the kernel notifies nobody of a stop
		}
	}
}

// runningThreads counts the threads of pid not in the stopped state, from
// /proc/PID/task/*/stat.
func runningThreads(pid int) (int, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("no threads in /proc/%d/task: %v", pid, err)
	}
	n := 0
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		// "pid (comm) S ...": the state follows the last ')'.
		rest := b[strings.LastIndexByte(string(b), ')')+1:]
		if st := strings.TrimSpace(string(rest)); st != "" && st[0] != 'T' && st[0] != 't' {
			n++
		}
	}
	return n, nil
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.helper(); s.signal(syscall.SIGCONT) }

// DB returns a database handle for DSN, closed at the test's cleanup.
func (s *Server) DB() *sql.DB {
	s.helper()
	db, err := sql.Open("mysql", s.DSN)
	if err != nil {
		s.fatal("mariadbtest: open %s: %v", s, err)
	}
	if s.t != nil {
		s.t.Cleanup(func() { _ = db.Close() })
	}
	return db
}

func (s *Server) signal(sig syscall.Signal) {
	s.helper()
	if s.exited() {
		s.fatal("mariadbtest: %v to %s, which is not running", sig, s)
		return
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.fatal("mariadbtest: %v to %s: %v", sig, s, err)
	}
}

func (s *Server) helper() {
	if s.t != nil {
		s.t.Helper()
	}
}

// fatal fails the test, or panics outside one.
func (s *Server) fatal(format string, args ...any) {
	if s.t != nil {
		s.t.Helper()
		s.t.Fatalf(format, args...)
	}
	panic(fmt.Sprintf(format, args...))
}

func (s *Server) exited() bool {
	if s.cmd == nil {
		return true
	}
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// waitReady pings over TCP until the server answers, it exits, or 60 s
// pass: a server starting on a loaded machine may need InnoDB recovery.
func (s *Server) waitReady() error {
	cfg, _ := mysql.ParseDSN(s.DSN)
	cfg.Timeout = 500 * time.Millisecond
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return fmt.Errorf("mariadbtest: %w", err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var last error
	for {
		if last = db.PingContext(ctx); last == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("mariadbtest: mariadbd exited while starting (%v): %w\n%s", s.cmd.ProcessState, last, s.errorLog())
		case <-ctx.Done():
			return fmt.Errorf("mariadbtest: %s not ready: %w\n%s", s, last, s.errorLog())
		case <-time.After(20 * time.Millisecond): // polling an external process; nothing to be notified by
		}
	}
}

// errorLog is the end of the server's error log, for a failure message.
func (s *Server) errorLog() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "error.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

func (s *Server) String() string { return "mariadbd@" + s.Addr }

// Installed reports whether mariadbd and mariadb-install-db are found, in
// PATH or in /usr/sbin where Debian puts the server.
func Installed() bool {
	_, err1 := lookPath("mariadbd")
	_, err2 := lookPath("mariadb-install-db")
	return err1 == nil && err2 == nil
}

func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("mariadbtest: %s not found (run scripts/test, which installs mariadb-server)", name)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("mariadbtest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
