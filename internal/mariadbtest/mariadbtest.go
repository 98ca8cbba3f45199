// Package mariadbtest starts real MariaDB servers (mariadbd) for tests.
//
// Each server gets a data directory of its own in t.TempDir(), created with
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

	t    testing.TB
	bin  string
	args []string
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has been waited for
}

// Start creates a data directory, starts mariadbd on a free port and waits
// until User can ping Database over TCP.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := lookPath(t, "mariadbd")
	install := lookPath(t, "mariadb-install-db")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	osUser := currentUser(t)
	// A short directory for the unix socket: its path must fit in 108
	// bytes, and a test's temporary directory may not.
	sockDir, err := os.MkdirTemp("", "mdb")
	if err != nil {
		t.Fatalf("mariadbtest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })

	tuning := []string{
		"--innodb-buffer-pool-size=32M",
		"--innodb-log-file-size=16M",
		"--innodb-flush-log-at-trx-commit=2",
	}
	ia := append([]string{"--no-defaults", "--datadir=" + data, "--user=" + osUser,
		"--auth-root-authentication-method=socket", "--skip-test-db"}, tuning...)
	if out, err := exec.Command(install, ia...).CombinedOutput(); err != nil {
		t.Fatalf("mariadbtest: mariadb-install-db: %v\n%s", err, out)
	}
	initFile := filepath.Join(dir, "init.sql")
	initSQL := fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s';\n"+
		"GRANT ALL PRIVILEGES ON *.* TO '%s'@'%%';\n"+
		"CREATE DATABASE IF NOT EXISTS %s;\n", User, Password, User, Database)
	if err := os.WriteFile(initFile, []byte(initSQL), 0o600); err != nil {
		t.Fatalf("mariadbtest: %v", err)
	}
	port := freePort(t)
	s := &Server{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Port: port,
		t:    t,
		bin:  bin,
		dir:  dir,
		args: append([]string{
			"--no-defaults", // first, or mariadbd reads /etc/mysql
			"--datadir=" + data,
			"--user=" + osUser,
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
	t.Cleanup(s.kill)
	s.Start()
	return s
}

// Start starts the server again after Stop, on the same port with the same
// data; it waits until the server answers. Start on a running server fails
// the test.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil && s.cmd.ProcessState == nil {
		s.t.Fatalf("mariadbtest: Start of %s, which is running", s)
	}
	cmd := exec.Command(s.bin, s.args...)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("mariadbtest: start mariadbd: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	s.waitReady()
}

// Stop shuts the server down cleanly (SIGTERM) and waits for it to exit.
// Its data stays; Start brings it back.
func (s *Server) Stop() {
	s.t.Helper()
	if s.exited() {
		return
	}
	s.signal(syscall.SIGCONT) // a paused server cannot act on SIGTERM
	s.signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.t.Fatalf("mariadbtest: %s did not exit 30s after SIGTERM\n%s", s, s.errorLog())
	}
}

// Pause stops the server with SIGSTOP: its connections stay open but
// nothing answers, as a hung or partitioned database does. Resume
// continues it.
func (s *Server) Pause() { s.t.Helper(); s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.t.Helper(); s.signal(syscall.SIGCONT) }

// DB returns a database handle for DSN, closed at cleanup.
func (s *Server) DB() *sql.DB {
	s.t.Helper()
	db, err := sql.Open("mysql", s.DSN)
	if err != nil {
		s.t.Fatalf("mariadbtest: open %s: %v", s, err)
	}
	s.t.Cleanup(func() { _ = db.Close() })
	return db
}

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	if s.exited() {
		s.t.Fatalf("mariadbtest: %v to %s, which is not running", sig, s)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("mariadbtest: %v to %s: %v", sig, s, err)
	}
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

// kill ends the server at once, at cleanup (SIGKILL works on a paused
// process too).
func (s *Server) kill() {
	if s.exited() {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

// waitReady pings over TCP until the server answers, it exits, or 60 s
// pass: a server starting on a loaded machine may need InnoDB recovery.
func (s *Server) waitReady() {
	s.t.Helper()
	cfg, _ := mysql.ParseDSN(s.DSN)
	cfg.Timeout = 500 * time.Millisecond
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		s.t.Fatalf("mariadbtest: %v", err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var last error
	for {
		if last = db.PingContext(ctx); last == nil {
			return
		}
		select {
		case <-s.done:
			s.t.Fatalf("mariadbtest: mariadbd exited while starting (%v): %v\n%s", s.cmd.ProcessState, last, s.errorLog())
		case <-ctx.Done():
			s.t.Fatalf("mariadbtest: %s not ready: %v\n%s", s, last, s.errorLog())
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

func lookPath(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	t.Fatalf("mariadbtest: %s not found (run scripts/test, which installs mariadb-server)", name)
	return ""
}

func currentUser(t testing.TB) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatalf("mariadbtest: current user: %v", err)
	}
	return u.Username
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("mariadbtest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
