//go:build !linux

package worker

import "errors"

// Outside Linux the worker keeps the pages the runtime maps.

func hugePagesAdvisable() bool { return false }

func heapMappings() ([]memRange, error) { return nil, errors.ErrUnsupported }

func adviseHuge([]memRange, bool) {}
