package serving

import "testing"

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Idle is closed at once on a count of zero, and when the count falls to
// zero, not when it only falls.
func TestInFlightCountSignalsZero(t *testing.T) {
	var c InFlight
	if !isClosed(c.Idle()) {
		t.Fatal("zero is not idle")
	}
	c.Add(2)
	idle := c.Idle()
	c.Add(-1)
	if isClosed(idle) {
		t.Fatal("idle closed at one in flight")
	}
	c.Add(-1)
	if !isClosed(idle) || !isClosed(c.Idle()) {
		t.Fatal("idle not closed at zero")
	}
}
