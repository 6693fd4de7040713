package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/internal/sandbox"
	"github.com/supolka/codemode-gateway/backends/local/internal/wire"
	inworker "github.com/supolka/codemode-gateway/backends/local/internal/worker"
	"github.com/supolka/codemode-gateway/protocol"
)

// scriptedRun stands in for sandbox.Run inside a test worker. The job's
// code is one command per line; it lets the pool tests make a worker crash,
// spin in uninterruptible Go code, allocate, or call the host, on demand.
// The run's value is the JSON array of what each command produced.
//
// The worker runs it holding the CPU gate, as the sandbox holds it while it
// executes; "sleep" and "dispatch" let go of it while they wait, as the
// sandbox's loop does, so that sibling runs of the worker go on meanwhile.
//
// The one-line program "broken" ends as a run the sandbox broke under: an
// INTERNAL fault and no envelope.
func scriptedRun(ctx context.Context, job sandbox.Job, host sandbox.Host) (*protocol.ExecuteResult, error) {
	if strings.TrimSpace(job.Code) == "broken" {
		return nil, sandbox.InternalFault()
	}
	return scriptedEnvelope(ctx, job, host), nil
}

func scriptedEnvelope(ctx context.Context, job sandbox.Job, host sandbox.Host) *protocol.ExecuteResult {
	gate, _ := host.(sandbox.Gate)
	outside := func() func() {
		if gate == nil {
			return func() {}
		}
		gate.Leave()
		return func() {
			gate.Enter(context.WithoutCancel(ctx), inworker.BoundClock(time.Duration(job.TimeoutMs)*time.Millisecond))
		}
	}
	var out []any
	keep := [][]byte{}
	for _, line := range strings.Split(strings.TrimSpace(job.Code), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		n := 0
		if len(f) > 1 {
			n, _ = strconv.Atoi(f[1])
		}
		switch f[0] {
		case "pid":
			out = append(out, os.Getpid())
		case "sleep":
			back := outside()
			select {
			case <-time.After(time.Duration(n) * time.Millisecond):
			case <-ctx.Done():
				back()
				return causeResult(ctx)
			}
			back()
		case "dispatch":
			for i := range n {
				back := outside()
				ans, err := host.Dispatch(ctx, "store", fmt.Sprintf("tool%d", i), fmt.Sprintf("[%d]", i))
				back()
				if err != nil {
					out = append(out, "error: "+err.Error())
					continue
				}
				out = append(out, ans)
			}
		case "outbound":
			back := outside()
			r, err := host.Outbound(ctx, protocol.OutboundRequest{Method: "GET", URL: "https://example.test/x", Body: []byte("hi")})
			back()
			if err != nil {
				out = append(out, "error: "+err.Error())
				continue
			}
			out = append(out, fmt.Sprintf("%d %s", r.Status, r.Body))
		case "spinwhilecall": // a host call stays open while Go code spins
			go host.Dispatch(ctx, "store", "slow", "")
			time.Sleep(50 * time.Millisecond)
			//lint:ignore SA5002 the command spins in Go code on purpose
			for {
			}
		case "fire": // a host call the run does not wait for, open at the host before the run settles
			go host.Dispatch(ctx, "store", "unawaited", "")
			// The host answers this awaited call once the unawaited one reached it.
			back := outside()
			host.Dispatch(ctx, "store", "awaited", "")
			back()
			out = append(out, "fired")
		case "exit":
			os.Exit(n)
		case "hold": // Go code that waits, deaf to ctx, computing nothing
			time.Sleep(time.Duration(n) * time.Millisecond)
		case "spin": // Go code no interrupt reaches
			end := time.Now().Add(time.Duration(n) * time.Millisecond)
			for n == 0 || time.Now().Before(end) {
			}
		case "grow": // gradual growth that honours ctx, 1 MiB a step
			for i := 0; i < n; i++ {
				b := make([]byte, 1<<20)
				for j := 0; j < len(b); j += 4096 {
					b[j] = 1
				}
				keep = append(keep, b)
				if ctx.Err() != nil {
					return causeResult(ctx)
				}
			}
			out = append(out, len(keep))
		case "touch": // one allocation filled at once, then deaf to ctx
			b := make([]byte, n<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			keep = append(keep, b)
			for {
				time.Sleep(time.Millisecond)
				runtime.KeepAlive(keep)
			}
		case "huge": // one untouched allocation
			b := make([]byte, n<<20)
			keep = append(keep, b)
			out = append(out, len(b))
		case "ctxwait":
			back := outside()
			<-ctx.Done()
			back()
			return causeResult(ctx)
		case "env": // the worker's environment variable f[1], "unset" when it has none
			v, ok := os.LookupEnv(f[1])
			if !ok {
				v = "unset"
			}
			out = append(out, v)
		case "probe": // what the worker may do to the system (confine_test.go)
			out = append(out, probeWorker(f[1])...)
		case "forge": // what code that escaped the sandbox may write in the run table
			forgeTable(ctx)
			return causeResult(ctx)
		case "print": // stdout must not corrupt the frame stream
			fmt.Println("stray output on stdout")
			out = append(out, "printed")
		default:
			return &protocol.ExecuteResult{Error: "unknown command " + f[0], HasError: true}
		}
	}
	b, _ := json.Marshal(out)
	return &protocol.ExecuteResult{ResultJSON: string(b)}
}

// forgeTable writes, until ctx ends, every slot of the worker's run table
// as code that escaped the sandbox could: the ids of the first runs the
// parent made, whichever worker holds them, each executing past its
// deadline under the memory bound, having used an hour and a terabyte.
func forgeTable(ctx context.Context) {
	table := wire.OpenTable()
	for ctx.Err() == nil {
		for i := range table.Slots() {
			table.Write(i, wire.Slot{Run: uint64(i + 1), Active: true, Deadline: 1, Bound: wire.BoundMemory,
				CPU: time.Hour, Clock: time.Hour, Heap: 1 << 40, Peak: 1 << 40})
		}
		time.Sleep(time.Millisecond)
	}
}

func causeResult(ctx context.Context) *protocol.ExecuteResult {
	cause := context.Cause(ctx)
	return &protocol.ExecuteResult{Error: cause.Error(), HasError: true, Failure: protocol.FailureOf(cause)}
}
