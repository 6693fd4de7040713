//go:build !linux

package connlimit

import (
	"net"
	"time"
)

// deferAccept: no kernel holds silent connections back here.
func deferAccept(*net.TCPListener, time.Duration) error { return nil }

// hasPending: not known here; the first read tells.
func hasPending(net.Conn) bool { return false }
