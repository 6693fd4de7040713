//go:build !cgo || !linux

package worker

// smallThreadStacks has nothing to do in a static build: Go makes its
// threads with stacks of a few kilobytes.
func smallThreadStacks() error { return nil }
