package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
)

// arrivalExecutor serves invocations the way an executor in front of a
// handle's queue may (the gateway forwarding to a member, say): it does
// work of varying length before the invocation reaches the handle, the
// earlier calls the longest. It records the order in which invocations
// reach the handle and whether two ever ran at once.
type arrivalExecutor struct {
	n int

	mu      sync.Mutex
	reached []string
	running int
	overlap bool
}

func (e *arrivalExecutor) Execute(context.Context, *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
	return nil, protocol.Faultf(protocol.CodeInternal, fmt.Errorf("this executor only serves invocations"))
}

func (e *arrivalExecutor) InvokeHandle(ctx context.Context, id, handle string, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	i, _ := strconv.Atoi(req.URL[len("https://app.example/"):])
	time.Sleep(time.Duration(e.n-i) * time.Millisecond)
	e.mu.Lock()
	e.reached = append(e.reached, req.URL)
	e.running++
	e.overlap = e.overlap || e.running > 1
	e.mu.Unlock()
	time.Sleep(time.Millisecond)
	e.mu.Lock()
	e.running--
	e.mu.Unlock()
	return protocol.OutboundResponse{Status: 200, Body: []byte(req.URL)}, nil
}

func (e *arrivalExecutor) CloseHandles(context.Context, string) error { return nil }
func (e *arrivalExecutor) Close() error                               { return nil }

// TestPipelinedInvocationsKeepTheirOrder: invocations of one execution that
// the real capnweb JavaScript client pipelines on one session run one at a
// time in the order they were sent, however long each takes to reach the
// handle: the executor server queues them before it lets the session's next
// call in.
func TestPipelinedInvocationsKeepTheirOrder(t *testing.T) {
	nodeModules(t)
	const n = 20
	ex := &arrivalExecutor{n: n}
	srv := executorapi.NewServer(ex, executorapi.ServerOptions{})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "node", "pipeline.mjs", "ws"+hs.URL[len("http"):], "exec-1", strconv.Itoa(n)).CombinedOutput()
	if err != nil {
		t.Fatalf("pipeline.mjs: %v\n%s", err, out)
	}
	var answers []string
	if err := json.Unmarshal(out, &answers); err != nil {
		t.Fatalf("pipeline.mjs printed %q: %v", out, err)
	}
	want := make([]string, n)
	for i := range want {
		want[i] = "https://app.example/" + strconv.Itoa(i+1)
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if fmt.Sprint(ex.reached) != fmt.Sprint(want) {
		t.Errorf("invocations reached the handle in the order\n%v\nwant\n%v", ex.reached, want)
	}
	if ex.overlap {
		t.Error("two invocations ran at once")
	}
	if fmt.Sprint(answers) != fmt.Sprint(want) {
		t.Errorf("answers %v, want %v", answers, want)
	}
}
