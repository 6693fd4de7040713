package webplatform

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dop251/goja"
	"github.com/supolka/codemode-gateway/protocol"
)

// BenchmarkInstall is the cost the web platform adds to every run: the glue
// evaluated in a fresh runtime.
func BenchmarkInstall(b *testing.B) {
	l := newTestLoop()
	defer l.close()
	for b.Loop() {
		l.vm = goja.New()
		if _, err := Install(l.vm, l, disabled); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFetch100Stub is a program that makes 100 sequential fetch calls
// through the stub outbound function and reads each body.
func BenchmarkFetch100Stub(b *testing.B) {
	cfg := Config{Mode: protocol.OutboundStub, Stub: func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		return protocol.OutboundResponse{Status: 200, Headers: []protocol.Header{{"content-type", "application/json"}}, Body: []byte(`{"ok":true}`)}, nil
	}}
	for b.Loop() {
		got, _ := runProgram(b, cfg, `let n = 0; for (let i = 0; i < 100; i++) { const r = await fetch('https://api.example/item/' + i, {headers: {accept: 'application/json'}}); if ((await r.json()).ok) n++ } return n`)
		if got.String() != "100" {
			b.Fatalf("got %s", got)
		}
	}
}

// cryptoOp is one crypto.subtle operation measured by the benchmarks and by
// TestCryptoBenchReport beside Node's: setup (an async function body, the
// same text in both) prepares the globals op's expression uses.
type cryptoOp struct {
	name, setup, op string
}

var cryptoOps = []cryptoOp{
	{"digest SHA-256, 32 MiB",
		`globalThis.data = new Uint8Array(32 << 20).fill(7)`,
		`crypto.subtle.digest('SHA-256', data)`},
	{"HMAC SHA-256 sign, 4 MiB",
		`globalThis.data = new Uint8Array(4 << 20).fill(7);
		globalThis.key = await crypto.subtle.importKey('raw', new Uint8Array(32).fill(1), {name: 'HMAC', hash: 'SHA-256'}, false, ['sign', 'verify'])`,
		`crypto.subtle.sign('HMAC', key, data)`},
	{"HMAC SHA-256 verify, 4 MiB",
		`globalThis.data = new Uint8Array(4 << 20).fill(7);
		globalThis.key = await crypto.subtle.importKey('raw', new Uint8Array(32).fill(1), {name: 'HMAC', hash: 'SHA-256'}, false, ['sign', 'verify']);
		globalThis.sig = await crypto.subtle.sign('HMAC', key, data)`,
		`crypto.subtle.verify('HMAC', key, sig, data)`},
	{"AES-GCM 256 encrypt, 4 MiB",
		`globalThis.data = new Uint8Array(4 << 20).fill(7);
		globalThis.iv = new Uint8Array(12).fill(2);
		globalThis.key = await crypto.subtle.importKey('raw', new Uint8Array(32).fill(1), 'AES-GCM', false, ['encrypt', 'decrypt'])`,
		`crypto.subtle.encrypt({name: 'AES-GCM', iv}, key, data)`},
	{"AES-GCM 256 decrypt, 4 MiB",
		`globalThis.iv = new Uint8Array(12).fill(2);
		globalThis.key = await crypto.subtle.importKey('raw', new Uint8Array(32).fill(1), 'AES-GCM', false, ['encrypt', 'decrypt']);
		globalThis.data = await crypto.subtle.encrypt({name: 'AES-GCM', iv}, key, new Uint8Array(4 << 20).fill(7))`,
		`crypto.subtle.decrypt({name: 'AES-GCM', iv}, key, data)`},
}

// cryptoRuntime is a runtime with the platform installed and op's setup
// done; call runs op's expression once, to its settlement.
type cryptoRuntime struct {
	l  *testLoop
	op goja.Callable
}

func newCryptoRuntime(tb testing.TB, op cryptoOp) *cryptoRuntime {
	tb.Helper()
	l := newTestLoop()
	tb.Cleanup(l.close)
	l.vm = goja.New()
	if _, err := Install(l.vm, l, disabled); err != nil {
		tb.Fatal(err)
	}
	r := &cryptoRuntime{l: l}
	setup, err := l.vm.RunString("(async () => {\n" + op.setup + "\n})")
	if err != nil {
		tb.Fatal(err)
	}
	f, _ := goja.AssertFunction(setup)
	r.settle(tb, f)
	v, err := l.vm.RunString("() => " + op.op)
	if err != nil {
		tb.Fatal(err)
	}
	r.op, _ = goja.AssertFunction(v)
	return r
}

func (r *cryptoRuntime) call(tb testing.TB) { r.settle(tb, r.op) }

// settle calls f and runs the loop's tasks until its promise settles.
func (r *cryptoRuntime) settle(tb testing.TB, f goja.Callable) {
	v, err := f(goja.Undefined())
	if err != nil {
		tb.Fatal(err)
	}
	p := v.Export().(*goja.Promise)
	for p.State() == goja.PromiseStatePending {
		(<-r.l.tasks)()
	}
	if p.State() == goja.PromiseStateRejected {
		tb.Fatalf("rejected: %v", p.Result())
	}
}

// BenchmarkCrypto runs each of cryptoOps in the sandbox's runtime; the
// bytes per second are those of the op's data.
func BenchmarkCrypto(b *testing.B) {
	for _, op := range cryptoOps {
		b.Run(op.name, func(b *testing.B) {
			r := newCryptoRuntime(b, op)
			n, err := r.l.vm.RunString("data.byteLength")
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(n.ToInteger())
			for b.Loop() {
				r.call(b)
			}
		})
	}
}

// TestCryptoBenchReport measures each of cryptoOps in the sandbox's runtime
// and in Node's WebCrypto (a node subprocess running the same setup and
// expression) and prints the times side by side with their ratio. It is a
// measurement, not a check, run by make bench:
//
//	CRYPTO_BENCH=1 go test -count=1 -run '^TestCryptoBenchReport$' -v ./backends/local/internal/webplatform/
func TestCryptoBenchReport(t *testing.T) {
	if os.Getenv("CRYPTO_BENCH") != "1" {
		t.Skip("a measurement, not a test: set CRYPTO_BENCH=1 to run it")
	}
	const d = 500 * time.Millisecond
	nodeTimes := nodeCryptoTimes(t, d)
	var report strings.Builder
	fmt.Fprintf(&report, "each op repeated for %v after one warm-up call; ms per op\n\n", d)
	fmt.Fprintf(&report, "| op | sandbox | Node | sandbox ÷ Node |\n|---|---:|---:|---:|\n")
	for i, op := range cryptoOps {
		r := newCryptoRuntime(t, op)
		r.call(t)
		n, began := 0, time.Now()
		for n < 3 || time.Since(began) < d {
			r.call(t)
			n++
		}
		ours := float64(time.Since(began)) / float64(n) / float64(time.Millisecond)
		fmt.Fprintf(&report, "| %s | %.2f | %.2f | %.2f |\n", op.name, ours, nodeTimes[i], ours/nodeTimes[i])
	}
	t.Log("\n" + report.String())
}

// nodeCryptoTimes runs cryptoOps in node, each timed as the sandbox's are,
// and returns the milliseconds per op.
func nodeCryptoTimes(t *testing.T, d time.Duration) []float64 {
	t.Helper()
	var script strings.Builder
	script.WriteString("(async () => { const out = [];\n")
	for _, op := range cryptoOps {
		fmt.Fprintf(&script, `out.push(await (async () => { %s
			const op = () => %s;
			await op(); let n = 0; const began = performance.now();
			while (n < 3 || performance.now() - began < %d) { await op(); n++ }
			return (performance.now() - began) / n })());
`, op.setup, op.op, d.Milliseconds())
	}
	script.WriteString("console.log(JSON.stringify(out)) })()")
	out, err := exec.Command("node", "-e", script.String()).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var times []float64
	if err := json.Unmarshal(out, &times); err != nil || len(times) != len(cryptoOps) {
		t.Fatalf("node answered %q: %v", out, err)
	}
	return times
}
