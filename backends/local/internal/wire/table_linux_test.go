package wire

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A run table holds what the worker writes in each slot, whole, and the
// parent reads back exactly that; slots out of range are ignored.
func TestTableSlotsRoundTrip(t *testing.T) {
	tab, err := NewTable(100)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Release()
	if n := tab.Slots(); n < 100 {
		t.Fatalf("%d slots, want at least 100", n)
	}
	a := Slot{Run: 7, Active: true, Deadline: 12345, Bound: BoundMemory, CPU: 3 * time.Millisecond, Clock: time.Second, Heap: 1 << 20, Peak: 2 << 20}
	b := Slot{Run: 9, CPU: time.Microsecond}
	tab.Write(0, a)
	tab.Write(99, b)
	tab.Write(-1, a)
	tab.Write(tab.Slots(), a)
	if got := tab.Read(0); !reflect.DeepEqual(got, a) {
		t.Fatalf("slot 0: %+v, want %+v", got, a)
	}
	if got := tab.Read(99); !reflect.DeepEqual(got, b) {
		t.Fatalf("slot 99: %+v, want %+v", got, b)
	}
	if got := tab.Read(tab.Slots()); got != (Slot{}) {
		t.Fatalf("out of range: %+v", got)
	}
	var seen []uint64
	tab.Each(func(s Slot) { seen = append(seen, s.Run) })
	if !reflect.DeepEqual(seen, []uint64{7, 9}) {
		t.Fatalf("slots in use: %v, want [7 9]", seen)
	}
	tab.Write(0, Slot{})
	seen = nil
	tab.Each(func(s Slot) { seen = append(seen, s.Run) })
	if !reflect.DeepEqual(seen, []uint64{9}) {
		t.Fatalf("after freeing slot 0: %v, want [9]", seen)
	}
	var nilTable *Table
	nilTable.Write(0, a)
	if nilTable.Slots() != 0 || nilTable.Read(0) != (Slot{}) {
		t.Fatal("a nil table is not empty")
	}
}

// The worker's descriptor of its table cannot resize it: shrunk under the
// parent's mapping, the parent's next read would fault.
func TestTableCannotBeResizedByTheWorker(t *testing.T) {
	tab, err := NewTable(4)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Release()
	fd := int(tab.ExtraFile().Fd())
	size := int64(tableBytes(4))
	for _, to := range []int64{0, size - 1, size * 2} {
		if err := unix.Ftruncate(fd, to); !errors.Is(err, unix.EPERM) {
			t.Errorf("ftruncate to %d: %v, want EPERM", to, err)
		}
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE); !errors.Is(err, unix.EPERM) {
		t.Errorf("adding a seal: %v, want EPERM (the seals are sealed)", err)
	}
	tab.Write(1, Slot{Run: 5})
	if got := tab.Read(1); got.Run != 5 {
		t.Fatalf("slot 1 after the attempts: %+v", got)
	}
}

// MonoNow reads CLOCK_MONOTONIC, the clock the parent and its workers
// share, without a system call: what it reads lies between two readings
// of the clock itself around it.
func TestMonoNowIsClockMonotonic(t *testing.T) {
	for range 1000 {
		var before, after unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &before); err != nil {
			t.Fatal(err)
		}
		now := MonoNow()
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &after)
		// A microsecond each side for the offset's one-off rounding.
		if now < before.Nano()-1000 || now > after.Nano()+1000 {
			t.Fatalf("MonoNow %d outside [%d, %d]", now, before.Nano(), after.Nano())
		}
	}
}
