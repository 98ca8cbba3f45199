// Package testlog holds a log sink for tests: several goroutines of an app
// write to it while the test reads it.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer safe for concurrent use; its zero value is empty
// and ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
