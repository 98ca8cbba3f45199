//go:build !linux

package harness

import (
	"net"
)

// reserve returns a port that was free a moment ago; nothing holds it.
func reserve() (addr string, release func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr = l.Addr().String()
	l.Close()
	return addr, func() {}, nil
}
