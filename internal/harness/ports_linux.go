package harness

import (
	"net"
	"strconv"
	"syscall"
)

// reserve binds a TCP socket to a free loopback port with SO_REUSEADDR
// and never listens on it; release ends the reservation. While it holds
// the port, Linux (with the default net.ipv4.ip_autobind_reuse=0) gives
// it neither to a bind to port 0 nor to an outgoing connection, and
// refuses a bind without SO_REUSEADDR (SO_REUSEPORT alone included); a
// server that binds it with SO_REUSEADDR and listens, as Go's net.Listen
// and HAProxy do, may, as the reservation itself never listens.
func reserve() (addr string, release func(), err error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", nil, err
	}
	release = func() { _ = syscall.Close(fd) }
	sa, err := func() (syscall.Sockaddr, error) {
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
			return nil, err
		}
		if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return nil, err
		}
		return syscall.Getsockname(fd)
	}()
	if err != nil {
		release()
		return "", nil, err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)), release, nil
}
