package worker

import (
	"bufio"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func TestParseAnonMapping(t *testing.T) {
	for _, c := range []struct {
		line string
		want memRange
		ok   bool
	}{
		{"c000000000-c004000000 rw-p 00000000 00:00 0 ", memRange{0xc000000000, 0xc004000000}, true},
		{"7f3a2c000000-7f3a2c021000 rw-p 00000000 00:00 0", memRange{0x7f3a2c000000, 0x7f3a2c021000}, true},
		{"00400000-00a00000 r-xp 00000000 08:01 1234 /usr/bin/gateway", memRange{}, false},
		{"7f3a2c000000-7f3a2c021000 rw-s 00000000 00:01 77 /memfd:gate (deleted)", memRange{}, false},
		{"7f3a2c000000-7f3a2c021000 rw-p 00001000 08:01 1234 /usr/bin/gateway", memRange{}, false},
		{"7ffd1000-7ffd2000 rw-p 00000000 00:00 0 [stack]", memRange{}, false},
		{"7f3a2c021000-7f3a30000000 ---p 00000000 00:00 0", memRange{}, false},
		{"zz-7f3a30000000 rw-p 00000000 00:00 0", memRange{}, false},
		{"2000-1000 rw-p 00000000 00:00 0", memRange{}, false},
	} {
		got, ok := parseAnonMapping(c.line)
		if got != c.want || ok != c.ok {
			t.Errorf("parseAnonMapping(%q) = %v, %v; want %v, %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

// vmFlags reads the VmFlags of the mapping that holds addr from
// /proc/self/smaps.
func vmFlags(t *testing.T, addr uintptr) []string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	inside := false
	for sc.Scan() {
		line := sc.Text()
		if r, ok := parseRange(line); ok {
			inside = r.start <= addr && addr < r.end
			continue
		}
		if inside && strings.HasPrefix(line, "VmFlags:") {
			return strings.Fields(strings.TrimPrefix(line, "VmFlags:"))
		}
	}
	t.Fatalf("no mapping in /proc/self/smaps holds %#x", addr)
	return nil
}

// parseRange reads the address range opening a line of smaps, if it has one.
func parseRange(line string) (memRange, bool) {
	lo, rest, ok := strings.Cut(line, "-")
	if !ok {
		return memRange{}, false
	}
	hi, _, _ := strings.Cut(rest, " ")
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	return memRange{uintptr(start), uintptr(end)}, err1 == nil && err2 == nil
}

// A step that saw a large copy advises huge pages over the heap, a later
// large copy past a new mapping advises that one too, and the advice is
// taken back when its hold ends; steps that saw no large copy change
// nothing. It runs alone: a meter of another test holds the advice over
// the same heap for hugeHold after its last large copy.
func TestHugePagesFollowLargeCopies(t *testing.T) {
	if !alone(t) {
		return
	}
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skip("this kernel has no transparent huge pages:", err)
	}
	big := make([]byte, 8<<20)
	addr := uintptr(unsafe.Pointer(&big[0]))
	has := func(flag string) bool { return slices.Contains(vmFlags(t, addr), flag) }
	h := readHeap()
	hp := hugePages{enabled: true, large: h.large}
	if hp.step(1, h) || has("hg") {
		t.Fatalf("the first step turned the advice on, or the heap had it already: %v", vmFlags(t, addr))
	}
	h.large += hugeTrigger - 1
	if hp.step(2, h) || has("hg") {
		t.Fatal("a step short of hugeTrigger turned the advice on")
	}
	h.large += hugeTrigger
	if !hp.step(3, h) || !has("hg") {
		t.Fatalf("a large copy left the heap without the advice: %v", vmFlags(t, addr))
	}
	if hp.hold(3) != hugeHold || hp.hold(3+int64(hugeHold)) != 0 {
		t.Fatalf("hold: %v from the copy, %v at its end; want %v and 0", hp.hold(3), hp.hold(3+int64(hugeHold)), hugeHold)
	}
	// A mapping made after the advice, found at the next large copy.
	more := make([]byte, 256<<20)
	h2 := readHeap()
	h2.large = h.large + hugeTrigger
	moreAddr := uintptr(unsafe.Pointer(&more[len(more)-1]))
	if !hp.step(4, h2) {
		t.Fatal("the advice went off at a large copy")
	}
	if !slices.Contains(vmFlags(t, moreAddr), "hg") {
		t.Fatalf("the mapping made after the advice was not advised at the next large copy: %v", vmFlags(t, moreAddr))
	}
	hp.off()
	if has("hg") || !has("nh") {
		t.Fatalf("off left the advice on: %v", vmFlags(t, addr))
	}
	runtime.KeepAlive(big)
	runtime.KeepAlive(more)
}
