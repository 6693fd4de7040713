package local

import (
	"os/exec"
	"testing"
	"time"
)

// A worker's stat file, read again through its one descriptor, gives the
// kernel's counts as they are at each read, and fails once the process is
// reaped instead of reading whichever process takes its number next.
func TestStatFileReadsTheCountsNowAndFailsOnceReaped(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := false
	defer func() {
		if !reaped {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	s := openStat(cmd.Process.Pid)
	defer s.close()
	first, ok := s.read()
	if !ok {
		t.Fatal("the first read failed")
	}
	// The child spins: its CPU count moves between reads of the same
	// descriptor.
	deadline := time.Now().Add(10 * time.Second)
	var later procStat
	for {
		time.Sleep(50 * time.Millisecond)
		if later, ok = s.read(); !ok {
			t.Fatal("a later read failed while the process lives")
		}
		if later.cpu >= first.cpu+100*time.Millisecond && later.rss > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s of spinning the counts read %+v, first %+v", later, first)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	reaped = true
	if st, ok := s.read(); ok {
		t.Fatalf("a read after the process was reaped gave %+v", st)
	}
	s.close()
	if st, ok := s.read(); ok {
		t.Fatalf("a read after close gave %+v", st)
	}
}
