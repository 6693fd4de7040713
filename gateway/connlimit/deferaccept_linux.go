package connlimit

import (
	"net"
	"syscall"
	"time"
)

// deferAccept asks the kernel to hand the listener a connection only once
// it has sent something, or once d has passed (TCP_DEFER_ACCEPT, in whole
// seconds).
func deferAccept(l *net.TCPListener, d time.Duration) error {
	rc, err := l.SyscallConn()
	if err != nil {
		return err
	}
	secs := max(int(d/time.Second), 1)
	var serr error
	err = rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT, secs)
	})
	if err != nil {
		return err
	}
	return serr
}

// hasPending reports whether bytes wait to be read on c, without reading
// them or waiting.
func hasPending(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var n int
	var buf [1]byte
	_ = rc.Control(func(fd uintptr) {
		n, _, _ = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	return n > 0
}
