package readiness

import (
	"net/http"
	"net/url"
)

// Paths that [Registry.Mount] serves.
const (
	LivePath  = "/healthz/live"
	ReadyPath = "/healthz/ready"
)

// Mount serves the probes on mux, for GET (and HEAD), with JSON bodies that
// list the failing checks (?verbose=1 lists all):
//
//   - [ReadyPath] answers 200 when ready (ok or degraded), 503 otherwise; a
//     client that disconnects stops only its own wait, not the evaluation.
//   - [LivePath] answers 200 while every heartbeat is recent (and always
//     while starting or draining), 500 otherwise; it checks no dependency.
//
// Like mux.Handle, Mount panics if mux is nil or already serves the paths
// (a second Mount on one mux): a mistake in how the program is put together.
func (r *Registry) Mount(mux *http.ServeMux) {
	if mux == nil {
		panic("readiness: Mount: mux is nil")
	}
	for _, path := range []string{LivePath, ReadyPath} { // both checked before either is added
		probe := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: path}}
		if _, pattern := mux.Handler(probe); pattern == "GET "+path {
			panic("readiness: Mount: mux already serves " + pattern + "; mount a registry once per mux")
		}
	}
	mux.Handle("GET "+LivePath, r.liveHandler())
	mux.Handle("GET "+ReadyPath, r.readyHandler())
}

func (r *Registry) readyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		verbose := isVerbose(req)
		rep := r.ready(req.Context(), verbose)
		code := http.StatusOK
		if rep.Status == StatusFail {
			code = http.StatusServiceUnavailable
		}
		write(w, req, &rep, code, verbose)
	})
}

func (r *Registry) liveHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rep := r.live()
		code := http.StatusOK
		if rep.Status == StatusFail {
			code = http.StatusInternalServerError
		}
		write(w, req, &rep, code, isVerbose(req))
	})
}

// isVerbose reports ?verbose=1 (or true): list every check, not only the
// failing ones.
func isVerbose(req *http.Request) bool {
	if req.URL.RawQuery == "" { // most probes carry none: skip the parse
		return false
	}
	v := req.URL.Query().Get("verbose")
	return v == "1" || v == "true"
}

func write(w http.ResponseWriter, req *http.Request, rep *Report, code int, verbose bool) {
	b := rep.marshal(verbose)
	// Header.Set would allocate one slice per value; the keys are already
	// canonical, so one backing array serves both, owned by this response.
	vals := [2]string{"application/json", "no-store"}
	h := w.Header()
	h["Content-Type"] = vals[0:1:1]
	h["Cache-Control"] = vals[1:2:2]
	w.WriteHeader(code)
	if req.Method != http.MethodHead {
		w.Write(b)
	}
}
