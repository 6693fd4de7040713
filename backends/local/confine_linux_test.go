package local

import (
	"fmt"
	"testing"
)

// FuzzLookupUser: a workerUser of any shape is read or refused, never a
// panic; "uid:gid" in numbers reads back as those numbers.
func FuzzLookupUser(f *testing.F) {
	for _, s := range []string{"65534:65534", "nobody", "0:0", ":", "1:", "4294967296:1", "a:b", "root"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		uid, gid, err := lookupUser(spec)
		var u, g uint32
		if n, _ := fmt.Sscanf(spec, "%d:%d", &u, &g); n == 2 && spec == fmt.Sprintf("%d:%d", u, g) {
			if err != nil || uid != u || gid != g {
				t.Fatalf("%q read as %d:%d, %v", spec, uid, gid, err)
			}
		}
	})
}
