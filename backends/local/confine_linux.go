package local

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// A worker process runs guest code, so it gives up what it does not need
// before it takes its first job: the parent starts it as an unprivileged
// user when the gateway is root (workerCredential), and the worker itself
// makes its memory unreadable to other processes of that user, sets
// no_new_privs and loads a seccomp filter that allows only the system calls
// a worker makes (confineWorker, in package worker).

// defaultWorkerUser is who workers run as under a root gateway: nobody.
const defaultWorkerUser = "65534:65534"

// workerCredential resolves Options.WorkerUser into the credential the
// parent starts workers with: nil when the gateway is not root (it cannot
// switch users, and its workers already run unprivileged) or when the user
// named is root itself.
func workerCredential(spec string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if spec == "" {
		spec = defaultWorkerUser
	}
	uid, gid, err := lookupUser(spec)
	if err != nil {
		return nil, fmt.Errorf("local: worker user %q: %w", spec, err)
	}
	if uid == 0 {
		return nil, nil
	}
	// Groups empty: the worker keeps none of the gateway's supplementary
	// groups.
	return &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}, nil
}

// lookupUser reads "uid:gid" or a user name (its primary group).
func lookupUser(spec string) (uid, gid uint32, err error) {
	if u, g, ok := strings.Cut(spec, ":"); ok {
		un, err1 := strconv.ParseUint(u, 10, 32)
		gn, err2 := strconv.ParseUint(g, 10, 32)
		if err1 != nil || err2 != nil {
			return 0, 0, fmt.Errorf("write a user name or uid:gid in numbers")
		}
		return uint32(un), uint32(gn), nil
	}
	u, err := user.Lookup(spec)
	if err != nil {
		return 0, 0, err
	}
	un, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gn, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("user %s has a uid or gid that is not a number", spec)
	}
	return uint32(un), uint32(gn), nil
}
