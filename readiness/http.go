package readiness

import (
	"net/http"
)

// Paths that [Registry.Mount] serves.
const (
	LivePath  = "/healthz/live"
	ReadyPath = "/healthz/ready"
)

// Mount serves the probes on mux, for GET (and HEAD):
//
//   - [ReadyPath] answers 200 when ready (status ok or degraded) and 503
//     otherwise. A client that disconnects stops only its own wait, never
//     the shared evaluation.
//   - [LivePath] answers 200 while every heartbeat is recent (and always
//     while draining) and 500 otherwise. It never checks a dependency.
//
// Bodies are JSON and list the failing checks; ?verbose=1 lists all.
func (r *Registry) Mount(mux *http.ServeMux) {
	mux.Handle("GET "+LivePath, r.liveHandler())
	mux.Handle("GET "+ReadyPath, r.readyHandler())
}

func (r *Registry) readyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rep := r.Ready(req.Context())
		code := http.StatusOK
		if rep.Status == StatusFail {
			code = http.StatusServiceUnavailable
		}
		write(w, req, &rep, code)
	})
}

func (r *Registry) liveHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rep := r.Live()
		code := http.StatusOK
		if rep.Status == StatusFail {
			code = http.StatusInternalServerError
		}
		write(w, req, &rep, code)
	})
}

func write(w http.ResponseWriter, req *http.Request, rep *Report, code int) {
	verbose := false
	if req.URL.RawQuery != "" { // most probes carry none: skip the parse
		v := req.URL.Query().Get("verbose")
		verbose = v == "1" || v == "true"
	}
	b, err := rep.marshal(verbose)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if req.Method != http.MethodHead {
		w.Write(append(b, '\n'))
	}
}
