package worker

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// aloneEnv names the test a copy of the test binary was started to run.
const aloneEnv = "CODEMODE_TEST_ALONE"

// alone runs the calling test again by itself in a fresh copy of the test
// binary, where no other test's state is around (a heap that grows, threads,
// a meter whose timer takes the huge-page advice back later), and reports
// whether the caller is that copy and runs the test's body. In the test that
// started it, alone fails t with the copy's output when the copy failed, and
// skips t when the copy skipped.
func alone(t *testing.T) bool {
	t.Helper()
	if os.Getenv(aloneEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), aloneEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	switch {
	case err != nil:
		t.Fatalf("in a process of its own: %v\n%s", err, out)
	case strings.Contains(string(out), "--- SKIP: "+t.Name()):
		t.Skipf("in a process of its own:\n%s", out)
	default:
		t.Logf("in a process of its own:\n%s", out)
	}
	return false
}
