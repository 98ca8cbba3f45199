package harness

import (
	"net"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A picked port is held for the server it was picked for until Close or
// Free: a bind without SO_REUSEADDR fails, while the server, and the next
// instance on the same slot, can listen on it (net.Listen sets
// SO_REUSEADDR).
func TestPickedPortStaysReservedForItsServer(t *testing.T) {
	var p Ports
	defer p.Close()
	addrs, err := p.Pick(2)
	require.NoError(t, err)
	require.NotEqual(t, addrs[0], addrs[1])
	for _, addr := range addrs {
		assert.ErrorIs(t, bindPlain(t, addr), syscall.EADDRINUSE, "%s: a bind of another process while it is reserved", addr)
		for instance := range 2 {
			l, err := net.Listen("tcp", addr)
			require.NoError(t, err, "%s: instance %d listens on its slot", addr, instance)
			require.NoError(t, l.Close())
		}
	}
	p.Free(addrs[0])
	assert.NoError(t, bindPlain(t, addrs[0]), "a bind once the reservation was freed")
	assert.ErrorIs(t, bindPlain(t, addrs[1]), syscall.EADDRINUSE, "a bind of the port not freed")
	p.Close()
	assert.NoError(t, bindPlain(t, addrs[1]), "a bind once the reservations ended")
}

// bindPlain binds a TCP socket without SO_REUSEADDR to addr, and closes it.
func bindPlain(t *testing.T, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer syscall.Close(fd)
	return syscall.Bind(fd, &syscall.SockaddrInet4{Port: n, Addr: [4]byte{127, 0, 0, 1}})
}
