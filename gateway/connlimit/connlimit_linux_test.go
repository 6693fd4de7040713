package connlimit

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// TestTheKernelHoldsSilentConnectionsBack: with DeferAccept, a connection
// that has sent nothing is not handed to Accept, one that spoke is, and it
// counts as having spoken before the server reads it.
func TestTheKernelHoldsSilentConnectionsBack(t *testing.T) {
	l := listen(t, Options{MaxUnauthenticated: 4, DescriptorLimit: 1000, Reserve: 10, DeferAccept: 5 * time.Second})
	dial(t, l) // silent
	tl := l.Listener.(*net.TCPListener)
	tl.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if s, err := l.Accept(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Accept of a silent connection: %v, %v; want the deadline", s, err)
	}
	tl.SetDeadline(time.Time{})
	real := dial(t, l)
	speak(t, real)
	s := accept(t, l, false)
	if s.RemoteAddr().String() != real.LocalAddr().String() {
		t.Fatalf("accepted %v, want the client that spoke (%v)", s.RemoteAddr(), real.LocalAddr())
	}
	l.mu.Lock()
	silent, spoken := l.silent.Len(), l.spoken.Len()
	l.mu.Unlock()
	if silent != 0 || spoken != 1 {
		t.Fatalf("%d silent, %d that spoke; want 0, 1", silent, spoken)
	}
}
