// Package queue holds Bounded, the one bounded first-in first-out queue of
// the local backend and its sandbox: work waits its turn in it, and work
// past its bound is refused.
package queue

import "slices"

// Bounded lines items up in arrival order behind a number of slots: at
// most slots of them are admitted at once (Add, Done), at most limit more
// wait, and one past both is refused. With no slots it is a plain bounded
// queue its owner takes items from (Pop). It is not safe for concurrent
// use: its owner serializes (a loop goroutine, or a lock).
type Bounded[T any] struct {
	slots, active int
	limit         int
	waiting       []T
}

// New is a Bounded of slots admitted at once and limit waiting.
func New[T any](slots, limit int) Bounded[T] {
	return Bounded[T]{slots: slots, limit: max(limit, 0)}
}

// Add admits v to a free slot (start: the caller starts it now), or lines
// it up while fewer than the limit wait. ok is false when it is refused.
func (q *Bounded[T]) Add(v T) (start, ok bool) {
	switch {
	case q.active < q.slots:
		q.active++
		return true, true
	case len(q.waiting) < q.limit:
		q.waiting = append(q.waiting, v)
		return false, true
	}
	return false, false
}

// Full reports whether Add would refuse the next item.
func (q *Bounded[T]) Full() bool { return q.active >= q.slots && len(q.waiting) >= q.limit }

// Push lines v up whatever the limit, for the one item the owner must
// always take.
func (q *Bounded[T]) Push(v T) { q.waiting = append(q.waiting, v) }

// Done frees the slot of admitted work. The first item waiting, if any,
// takes it and is returned for the caller to start.
func (q *Bounded[T]) Done() (next T, ok bool) {
	q.active--
	if next, ok = q.Pop(); ok {
		q.active++
	}
	return next, ok
}

// Pop takes out the first item waiting; ok is false when none waits.
func (q *Bounded[T]) Pop() (v T, ok bool) {
	if len(q.waiting) == 0 {
		return v, false
	}
	v = q.waiting[0]
	var zero T
	q.waiting[0] = zero // the backing array must not keep it alive
	q.waiting = q.waiting[1:]
	return v, true
}

// Len is how many items wait.
func (q *Bounded[T]) Len() int { return len(q.waiting) }

// Remove takes out the first waiting item match reports; false when none
// does.
func (q *Bounded[T]) Remove(match func(T) bool) bool {
	i := slices.IndexFunc(q.waiting, match)
	if i >= 0 {
		q.waiting = slices.Delete(q.waiting, i, i+1)
	}
	return i >= 0
}
