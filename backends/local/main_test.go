package local

import (
	"os"
	"testing"

	inworker "github.com/supolka/codemode-gateway/backends/local/internal/worker"
)

// scriptedEnv makes a test worker run scripted jobs (scriptedRun) instead
// of JavaScript, so pool mechanics can be tested with exact control over
// what the worker does.
const scriptedEnv = "CODEMODE_LOCAL_TEST_SCRIPTED=1"

func TestMain(m *testing.M) {
	// The test binary is its own worker: the pool re-executes it.
	if os.Getenv("CODEMODE_LOCAL_TEST_SCRIPTED") == "1" {
		inworker.ServeIfRequested(scriptedRun)
	}
	RunWorkerIfRequested()
	code := m.Run()
	if plainWorker.dir != "" {
		os.RemoveAll(plainWorker.dir)
	}
	os.Exit(code)
}
