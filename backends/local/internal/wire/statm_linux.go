package wire

import (
	"bytes"
	"os"
	"strconv"
)

// pageSize converts statm's page counts to bytes.
var pageSize = uint64(os.Getpagesize())

// ReadStatm reads field i of a statm file, a count of pages, in bytes. The
// parent reads a worker's resident set with it, and a worker its own
// address space.
func ReadStatm(path string, i int) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) <= i {
		return 0, false
	}
	n, err := strconv.ParseUint(string(f[i]), 10, 64)
	if err != nil {
		return 0, false
	}
	return n * pageSize, true
}
