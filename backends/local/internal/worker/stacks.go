package worker

// threadStack is the stack a worker built with cgo gives each thread it
// makes once it starts (smallThreadStacks). Go's code on a thread's own
// stack needs a few kilobytes (a static build gives it 16 KiB), and C code
// a worker calls (the C resolver, where the system asks for it) well under
// a mebibyte.
const threadStack = 1 << 20
