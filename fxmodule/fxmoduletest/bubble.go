package fxmoduletest

import (
	"fmt"
	"runtime"
	"strings"
)

// clockBlocker describes a goroutine of the caller's testing/synctest
// bubble that waits on real network I/O, which holds the bubble's clock
// still, or returns "" when there is none or no bubble. Only the goroutine
// dump says so ("[IO wait, synctest bubble 1]"); should its format change,
// this finds nothing and Start goes on as before.
func clockBlocker() string {
	self := header(string(stackOf(false)))
	bubble := bubbleOf(self)
	if bubble == "" {
		return ""
	}
	// Goroutines the app has just started may not have reached their wait
	// yet: look again until every other one is durably blocked or one
	// waits on I/O. A goroutine that spins keeps this from ever settling:
	// then give up rather than fail a test on a guess.
	for range 1000 {
		settled := true
		for g := range strings.SplitSeq(string(stackOf(true)), "\n\n") {
			h := header(g)
			if h == self || bubbleOf(h) != bubble {
				continue
			}
			switch {
			case strings.Contains(h, "[IO wait"):
				return describe(h, g)
			case !strings.Contains(h, "(durable)"):
				settled = false
			}
		}
		if settled {
			return ""
		}
		runtime.Gosched()
	}
	return ""
}

// stackOf returns runtime.Stack's dump, of every goroutine when all.
func stackOf(all bool) []byte {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, all)
		if n < len(buf) {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}

// header is a goroutine's first line: "goroutine 7 [IO wait, synctest bubble 1]:".
func header(g string) string {
	h, _, _ := strings.Cut(strings.TrimLeft(g, "\n"), "\n")
	return h
}

// bubbleOf returns the bubble a goroutine's header names, or "".
func bubbleOf(h string) string {
	_, after, ok := strings.Cut(h, ", synctest bubble ")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(after, "]")
	return id
}

// describe names the goroutine by its id, its first function outside the
// runtime and package net (what chose to wait), and what started it.
func describe(h, g string) string {
	id, _, _ := strings.Cut(strings.TrimPrefix(h, "goroutine "), " ")
	var at, by string
	for line := range strings.SplitSeq(g, "\n") {
		if rest, ok := strings.CutPrefix(line, "created by "); ok {
			by, _, _ = strings.Cut(rest, " in goroutine")
		} else if i := strings.LastIndex(line, "("); at == "" && i > 0 && line[0] != '\t' && line != h {
			if fn := line[:i]; !internal(fn) { // the arguments follow the last "("
				at = fn
			}
		}
	}
	return fmt.Sprintf("goroutine %s (%s, started by %s)", id, at, by)
}

// internal reports whether fn is below the code that chose to wait: the
// runtime, the poller, package net itself.
func internal(fn string) bool {
	for _, p := range []string{"runtime.", "internal/", "net.", "syscall."} {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}
