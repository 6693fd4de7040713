//go:build !linux

package worker

import "errors"

// Outside Linux a worker runs as the gateway's user, without a filter.

func confineWorker(sockets bool) error { return errors.New("no seccomp outside Linux") }
