package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// testService is a real HTTP service for the drill to run, whose
// shutdown is chosen by mode:
//
//	drains    readiness 503 from SIGTERM, serving until no request came
//	          for DELAY, then a drain report line and exit 0 (drainkit's
//	          way, with its adaptive delay: however long the balancer
//	          takes to notice, nothing is refused)
//	naive     http.Server.Shutdown at SIGTERM, exit 0 (most services' way)
//	answers503 ready and answering 503 to every request from SIGTERM for
//	          DELAY (a 5xx the balancer must not retry), then readiness
//	          503 until no request came for DELAY, and exit 0: closing
//	          kept-alive connections while the balancer still sends on
//	          them would end some in its 502, outcome unknown
//	stubborn  ignores SIGTERM
//	exit1     exits 1 at SIGTERM
//	crash     prints a line and exits 3 at start
//	deaf      runs, never listens
//
// ADDR is where it serves /hello; ADMIN_ADDR, when set, serves
// /healthz/ready instead of ADDR. With PID_DIR set it writes its pid to
// PID_DIR/NAME once it serves (at once for crash and deaf).
func testService(mode string) int {
	fmt.Fprintf(os.Stderr, "test service %s starting\n", mode)
	switch mode {
	case "crash":
		writePid()
		fmt.Fprintln(os.Stderr, "fatal: cannot open the database")
		return 3
	case "deaf":
		writePid()
		time.Sleep(time.Hour) // until the drill kills it
		return 0
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
	}
	delay, _ := time.ParseDuration(os.Getenv("DELAY"))
	term := make(chan os.Signal, 1)
	if mode != "stubborn" {
		signal.Notify(term, syscall.SIGTERM)
	}

	var draining, unready atomic.Bool
	var lastRequest atomic.Int64 // unix nanoseconds
	ready := func(w http.ResponseWriter, _ *http.Request) {
		if draining.Load() && mode == "drains" || unready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) {
		if draining.Load() && mode == "answers503" {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("hello\n"))
	})
	// POST /shape answers 200 to the drill's request shape only, and
	// /broken 500 to anything.
	mux.HandleFunc("POST /shape", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if string(body) != "ping" || r.Header.Get("X-Drill") != "yes" || r.Host != "svc.local" {
			http.Error(w, "not the shape", http.StatusBadRequest)
		}
	})
	mux.HandleFunc("/broken", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "broken", http.StatusInternalServerError)
	})
	var servers []*http.Server
	listen := func(addr string, h http.Handler) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: h}
		servers = append(servers, srv)
		go func() { _ = srv.Serve(ln) }()
		return nil
	}
	if admin := os.Getenv("ADMIN_ADDR"); admin != "" {
		adminMux := http.NewServeMux()
		adminMux.HandleFunc("GET /healthz/ready", ready)
		if err := listen(admin, adminMux); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	} else {
		mux.HandleFunc("GET /healthz/ready", ready)
	}
	// A request, not a probe, restarts the quiet window.
	traffic := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/healthz/") {
			lastRequest.Store(time.Now().UnixNano())
		}
		mux.ServeHTTP(w, r)
	})
	if err := listen(os.Getenv("ADDR"), traffic); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "test service serving")
	writePid()

	<-term
	start := time.Now()
	draining.Store(true)
	switch mode {
	case "exit1":
		return 1
	case "naive":
		for _, s := range servers {
			_ = s.Shutdown(context.Background())
		}
		return 0
	}
	if mode == "answers503" {
		time.Sleep(delay) // answering 503
		unready.Store(true)
	}
	if mode == "drains" || mode == "answers503" {
		// Serve until the balancer has stopped sending: polling its own
		// clock, as drainkit's adaptive delay does.
		for time.Since(time.Unix(0, lastRequest.Load())) < delay {
			time.Sleep(delay / 10)
		}
	} else {
		time.Sleep(delay) // the service's own fixed drain delay
	}
	intakeAt := time.Since(start) // phase stop_intake, as the report says
	for _, s := range servers {
		if err := s.Shutdown(context.Background()); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return 1
		}
	}
	if mode == "drains" {
		report, _ := json.Marshal(map[string]any{
			"reason": "signal: terminated", "start": start, "duration_ms": float64(time.Since(start).Microseconds()) / 1000, "exit_code": 0,
			"hooks": []map[string]any{{"name": "api.stop_intake", "phase": "stop_intake", "outcome": "ok",
				"start_ms": float64(intakeAt.Microseconds()) / 1000, "duration_ms": 0.2}},
			"arrivals": map[string]any{"after_flip": 7, "last_after_flip_ms": 250.0, "refused_after_intake": 0},
		})
		fmt.Fprintf(os.Stderr, `{"time":%q,"level":"INFO","msg":"drain report","exit_code":0,"report":%s}`+"\n",
			time.Now().Format(time.RFC3339Nano), report)
	}
	return 0
}

// writePid writes the pid to PID_DIR/NAME, if PID_DIR is set.
func writePid() {
	if dir := os.Getenv("PID_DIR"); dir != "" {
		tmp := filepath.Join(dir, "."+os.Getenv("NAME"))
		_ = os.WriteFile(tmp, []byte(fmt.Sprint(os.Getpid())), 0o644)
		_ = os.Rename(tmp, filepath.Join(dir, os.Getenv("NAME"))) // whole, or not there
	}
}

// drillArgsFromEnv are the drill's arguments for the DRILL_TEST_MAIN
// program, one a line.
func drillArgsFromEnv() []string { return strings.Split(os.Getenv("DRILL_TEST_MAIN"), "\n") }
