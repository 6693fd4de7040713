package queue

import (
	"slices"
	"testing"
)

// Work is admitted up to the slots, then waits up to the limit, then is
// refused; a slot freed goes to the first item waiting.
func TestBoundedAdmitsLinesUpAndRefuses(t *testing.T) {
	q := New[int](2, 2)
	for i, want := range []struct{ start, ok bool }{{true, true}, {true, true}, {false, true}, {false, true}, {false, false}} {
		if start, ok := q.Add(i); start != want.start || ok != want.ok {
			t.Fatalf("Add(%d) = %v, %v; want %v, %v", i, start, ok, want.start, want.ok)
		}
	}
	if q.Len() != 2 || !q.Full() {
		t.Fatalf("Len %d, Full %v; want 2, true", q.Len(), q.Full())
	}
	if next, ok := q.Done(); !ok || next != 2 || q.Full() {
		t.Fatalf("Done = %d, %v; want 2, true", next, ok)
	}
	if next, ok := q.Done(); !ok || next != 3 {
		t.Fatalf("Done = %d, %v; want 3, true", next, ok)
	}
	for range 2 {
		if _, ok := q.Done(); ok {
			t.Fatal("Done handed out an item with none waiting")
		}
	}
	// Both slots are free again: work starts at once.
	if start, ok := q.Add(9); !start || !ok {
		t.Fatalf("Add after the slots freed = %v, %v", start, ok)
	}
}

// Without slots it is a plain bounded queue: Pop takes items in arrival
// order, Push passes the limit, Remove keeps the others' order.
func TestBoundedAsAQueue(t *testing.T) {
	q := New[string](0, 3)
	for _, s := range []string{"a", "b", "c"} {
		if start, ok := q.Add(s); start || !ok {
			t.Fatalf("Add(%q) = %v, %v", s, start, ok)
		}
	}
	if _, ok := q.Add("d"); ok {
		t.Fatal("a fourth item passed a limit of three")
	}
	q.Push("e")
	if !q.Remove(func(s string) bool { return s == "b" }) || q.Remove(func(s string) bool { return s == "b" }) {
		t.Fatal("Remove did not take b out exactly once")
	}
	var order []string
	for {
		s, ok := q.Pop()
		if !ok {
			break
		}
		order = append(order, s)
	}
	if !slices.Equal(order, []string{"a", "c", "e"}) {
		t.Fatalf("popped %v, want [a c e]", order)
	}
	if n := New[int](0, -1); n.limit != 0 {
		t.Fatalf("a negative limit reads as %d, want 0", n.limit)
	}
}
