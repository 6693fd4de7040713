//go:build cgo && linux

package worker

/*
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>

// codemode_thread_stacks makes size the stack of every thread created
// after it that asks for the default, keeps the C allocator to one arena,
// and returns an error number.
static int codemode_thread_stacks(size_t size) {
#ifdef M_ARENA_MAX
	// Each thread that calls malloc (the runtime asks every new thread for
	// its stack's bounds, which does) would get an arena of its own from
	// glibc, 64 MiB of address space each, up to eight a CPU. (A C library
	// without arenas, musl's, has no M_ARENA_MAX.)
	if (mallopt(M_ARENA_MAX, 1) != 1) {
		return -1;
	}
#endif
	pthread_attr_t attr;
	int err = pthread_getattr_default_np(&attr);
	if (err != 0) {
		return err;
	}
	err = pthread_attr_setstacksize(&attr, size);
	if (err == 0) {
		err = pthread_setattr_default_np(&attr);
	}
	pthread_attr_destroy(&attr);
	return err;
}
*/
import "C"

import (
	"errors"
	"syscall"
)

// smallThreadStacks bounds what each thread of a worker built with cgo
// takes of its address space. Go makes such threads with pthread, whose
// default stack is the process's stack limit (8 MiB as a rule), and the C
// allocator gives each an arena of 64 MiB: 32 threads took 960 MiB. Every
// run computing on holds a thread of its own, and some sixty of them took a
// worker past the address-space limit it sets itself; the runtime died with
// every run on it. Static builds make their threads with small stacks and
// no C allocator, and need nothing here.
func smallThreadStacks() error {
	switch errno := C.codemode_thread_stacks(C.size_t(threadStack)); {
	case errno < 0:
		return errors.New("mallopt(M_ARENA_MAX) failed")
	case errno > 0:
		return syscall.Errno(errno)
	}
	return nil
}
