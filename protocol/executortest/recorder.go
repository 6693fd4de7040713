package executortest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// Recorder is a protocol.PolicyExecutor for tests of what sits in front of an
// executor (the wire, the gateway). It records every request it receives
// and acts on a small command language in the code, so each test states
// what the far side does:
//
//	"result:<json>"         returns <json> as the run's value
//	"error:<text>"          returns <text> as the run's error
//	"failure:<kind>:<text>" returns <text> as the run's error, of that FailureKind
//	"dispatch:<p>:<t>:<a>"  makes one tool call and returns its envelope
//	"fetch:<url>"           makes one outbound request, returns status and body
//	"retain"                grants handles that answer through the outbound stub
//	"fault:<CODE>"          fails with that fault
//	"plain-error:<text>"    fails with an error that carries no code
//	"block"                 waits until the context ends
//
// It runs no JavaScript: the behaviour of a real executor is what Run
// checks.
type Recorder struct {
	mu       sync.Mutex
	requests []*protocol.ExecuteRequest
	handles  map[string]protocol.OutboundFunc
	// onClosed are the HandlesClosed callbacks of the held executions.
	onClosed map[string]func(string)
	// Started receives one value per "block" run that started.
	Started chan struct{}
	closed  []string
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{handles: map[string]protocol.OutboundFunc{}, onClosed: map[string]func(string){}, Started: make(chan struct{}, 16)}
}

// Last is the most recent request the recorder received.
func (f *Recorder) Last() *protocol.ExecuteRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1]
}

// Execute implements protocol.Executor: ExecuteWith with no policy.
func (f *Recorder) Execute(ctx context.Context, req *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
	return f.ExecuteWith(ctx, req, protocol.Policy{})
}

// ExecuteWith implements protocol.PolicyExecutor; of p it keeps the
// HandlesClosed of a retained execution.
func (f *Recorder) ExecuteWith(ctx context.Context, req *protocol.ExecuteRequest, p protocol.Policy) (*protocol.ExecuteResult, error) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	cmd, rest, _ := strings.Cut(req.Code, ":")
	switch cmd {
	case "result":
		return &protocol.ExecuteResult{ResultJSON: rest, Logs: []protocol.LogLine{{Level: protocol.LogLevelLog, Text: "ran"}}}, nil
	case "error":
		return &protocol.ExecuteResult{Error: rest, HasError: true}, nil
	case "failure":
		kind, text, _ := strings.Cut(rest, ":")
		return &protocol.ExecuteResult{Error: text, HasError: true, Failure: protocol.FailureKind(kind)}, nil
	case "dispatch":
		parts := strings.SplitN(rest, ":", 3)
		if req.Dispatch == nil {
			return &protocol.ExecuteResult{Error: "no dispatch", HasError: true}, nil
		}
		env, err := req.Dispatch(ctx, parts[0], parts[1], parts[2])
		if err != nil {
			return &protocol.ExecuteResult{Error: "dispatch failed: " + err.Error(), HasError: true}, nil
		}
		s, _ := protocol.StringifyForDispatch(env)
		return &protocol.ExecuteResult{ResultJSON: s}, nil
	case "fetch":
		fn := req.Outbound.Func()
		if fn == nil {
			return &protocol.ExecuteResult{Error: "mode " + string(req.Outbound.Mode()), HasError: true}, nil
		}
		resp, err := fn(ctx, protocol.OutboundRequest{Method: "POST", URL: rest,
			Headers: []protocol.Header{{"x-a", "1"}, {"x-a", "2"}}, Body: []byte{0, 1, 0xfe, 0xff}})
		if err != nil {
			return &protocol.ExecuteResult{Error: "fetch failed: " + err.Error(), HasError: true}, nil
		}
		s, _ := protocol.StringifyForDispatch(map[string]any{"status": resp.Status, "body": string(resp.Body)})
		return &protocol.ExecuteResult{ResultJSON: s}, nil
	case "retain":
		id := make([]byte, 16)
		rand.Read(id)
		f.mu.Lock()
		f.handles[hex.EncodeToString(id)] = req.Outbound.Func()
		if p.HandlesClosed != nil {
			f.onClosed[hex.EncodeToString(id)] = p.HandlesClosed
		}
		f.mu.Unlock()
		return &protocol.ExecuteResult{ExecutionID: hex.EncodeToString(id), Handles: []string{"fetch"}}, nil
	case "fault":
		switch protocol.Code(rest) {
		case protocol.CodeQueueOverflow:
			return nil, protocol.NewQueueOverflowError(4, 40*time.Millisecond)
		default:
			return nil, protocol.NewFault(protocol.Code(rest), "the far side failed with "+rest)
		}
	case "plain-error":
		return nil, errors.New(rest)
	case "block":
		f.Started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("unknown command %q", req.Code)
}

func (f *Recorder) InvokeHandle(ctx context.Context, id, handle string, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	f.mu.Lock()
	fn, ok := f.handles[id]
	f.mu.Unlock()
	if !ok {
		return protocol.OutboundResponse{}, protocol.NewHandlesClosedError(id)
	}
	if handle != "fetch" {
		return protocol.OutboundResponse{}, protocol.NewHandleNotFoundError(id, handle, []string{"fetch"})
	}
	if req.URL == "big" {
		return protocol.OutboundResponse{Status: 200, Body: make([]byte, 4096)}, nil
	}
	if text, ok := strings.CutPrefix(req.URL, "reject:"); ok {
		// A handler's throw: the invocation fails with text, the handles
		// serve on.
		return protocol.OutboundResponse{}, errors.New(text)
	}
	if req.URL == "spin" {
		// A handler past its bound: the bound ends the invocation and
		// closes the handles.
		f.end(id)
		return protocol.OutboundResponse{}, protocol.NewExecutionTimeoutError(300)
	}
	if fn == nil {
		return protocol.OutboundResponse{Status: 200, StatusText: "OK", Body: append([]byte("echo:"), req.Body...)}, nil
	}
	// The handler fetches through the caller that started the execution.
	return fn(ctx, req)
}

func (f *Recorder) CloseHandles(_ context.Context, id string) error {
	f.mu.Lock()
	if _, ok := f.handles[id]; !ok {
		f.mu.Unlock()
		return protocol.NewHandlesClosedError(id)
	}
	f.closed = append(f.closed, id)
	f.mu.Unlock()
	f.end(id)
	return nil
}

// ExpireAll closes every held execution by itself, as an executor's idle
// bound does, and reports how many it closed.
func (f *Recorder) ExpireAll() int {
	f.mu.Lock()
	ids := make([]string, 0, len(f.handles))
	for id := range f.handles {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	for _, id := range ids {
		f.end(id)
	}
	return len(ids)
}

// end forgets id's handles and calls its HandlesClosed, on its own
// goroutine, as protocol.Policy says.
func (f *Recorder) end(id string) {
	f.mu.Lock()
	delete(f.handles, id)
	fn := f.onClosed[id]
	delete(f.onClosed, id)
	f.mu.Unlock()
	if fn != nil {
		go fn(id)
	}
}

// Closed lists the executionIds whose handles were closed, in order.
func (f *Recorder) Closed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.closed...)
}

// Held is how many executions hold handles now.
func (f *Recorder) Held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.handles)
}

func (f *Recorder) Close() error { return nil }
