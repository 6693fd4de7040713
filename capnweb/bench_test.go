package capnweb_test

// Round trips over loopback WebSocket. The Go server is built by capnweb.Accept, as the
// gateway and the executor server build theirs. The Benchmark functions measure the Go client against
// the Go test server (and the JS server) with testing.B. TestBenchReport, run on purpose with
// CAPNWEB_BENCH=1, measures every pairing side by side in one run — Go→Go, JS client→Go
// server, JS client→JS server, Go client→JS server — for a small call and a call that
// invokes one callback, plus pipelined throughput, and prints the figures and their ratios
// (the source of docs/benchmarks.md).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/internal/testutil"
)

const (
	// pipelineWindow is how many calls the pipelined measurements keep in flight.
	pipelineWindow = 256
	// benchCallTimeout bounds one benchmark's calls, so a stuck peer fails it, not hangs it.
	benchCallTimeout = 5 * time.Minute
)

// benchCall makes one round trip of the given mode: "small" is add(1, 2); "callback" is
// callCallback(cb, 1), whose server calls cb once before answering.
func benchCall(ctx context.Context, sess *capnweb.Session, mode string, cb capnweb.Func) error {
	var (
		got  any
		err  error
		want float64
	)
	switch mode {
	case "small":
		got, err = sess.Main().Call(ctx, "add", 1, 2)
		want = 3
	case "callback":
		got, err = sess.Main().Call(ctx, "callCallback", cb, 1)
		want = 2
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%s returned %v, want %v", mode, got, want)
	}
	return nil
}

var plusOne = capnweb.Func(func(ctx context.Context, args []any) (any, error) {
	n, _ := argAt(args, 0).(float64)
	return n + 1, nil
})

func dialSession(tb testing.TB, url string) *capnweb.Session {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := capnweb.Dial(ctx, url, nil, capnweb.Options{})
	if err != nil {
		tb.Fatalf("dialing %s: %v", url, err)
	}
	tb.Cleanup(func() { _ = sess.Close() })
	return sess
}

func benchmarkRoundTrips(b *testing.B, url string) {
	for _, mode := range []string{"small", "callback"} {
		b.Run(mode, func(b *testing.B) {
			sess := dialSession(b, url)
			ctx, cancel := context.WithTimeout(context.Background(), benchCallTimeout)
			defer cancel()
			if err := benchCall(ctx, sess, mode, plusOne); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if err := benchCall(ctx, sess, mode, plusOne); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}

// BenchmarkRoundTripGoGo: a Go client calling a Go server, one call at a time.
func BenchmarkRoundTripGoGo(b *testing.B) {
	benchmarkRoundTrips(b, startGoServer(b, true, capnweb.Options{}).URL)
}

// BenchmarkRoundTripGoJS: a Go client calling the JS server, one call at a time.
func BenchmarkRoundTripGoJS(b *testing.B) {
	benchmarkRoundTrips(b, startJSServer(b).URL)
}

// pipelined runs calls add(i, i) on one session with up to window calls in flight, until n
// calls completed or the deadline passed; it returns how many completed.
func pipelined(ctx context.Context, sess *capnweb.Session, n int, deadline time.Time, window int) (int, error) {
	inflight := make([]*capnweb.Promise, 0, window)
	want := make([]float64, 0, window)
	sent, done := 0, 0
	for done < n {
		for len(inflight) < window && sent < n && time.Now().Before(deadline) {
			inflight = append(inflight, sess.Main().Invoke("add", sent, sent))
			want = append(want, float64(2*sent))
			sent++
		}
		if len(inflight) == 0 {
			break
		}
		got, err := inflight[0].Await(ctx)
		if err != nil {
			return done, err
		}
		if got != want[0] {
			return done, fmt.Errorf("pipelined add returned %v, want %v", got, want[0])
		}
		inflight, want = inflight[1:], want[1:]
		done++
	}
	return done, nil
}

// BenchmarkPipelinedGoGo: many calls in flight on one Go→Go connection (goal ≥ 20,000/s).
func BenchmarkPipelinedGoGo(b *testing.B) {
	sess := dialSession(b, startGoServer(b, true, capnweb.Options{}).URL)
	ctx, cancel := context.WithTimeout(context.Background(), benchCallTimeout)
	defer cancel()
	b.ResetTimer()
	start := time.Now()
	done, err := pipelined(ctx, sess, b.N, time.Now().Add(time.Hour), pipelineWindow)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(done)/time.Since(start).Seconds(), "calls/s")
}

// goRate measures Go client round trips against url for d (after a short warm-up).
func goRate(t *testing.T, url, mode string, d time.Duration) float64 {
	t.Helper()
	sess := dialSession(t, url)
	defer sess.Close()
	ctx, cancel := context.WithTimeout(context.Background(), benchCallTimeout)
	defer cancel()
	run := func(d time.Duration) int {
		n := 0
		for end := time.Now().Add(d); time.Now().Before(end); n++ {
			if err := benchCall(ctx, sess, mode, plusOne); err != nil {
				t.Fatalf("%s against %s: %v", mode, url, err)
			}
		}
		return n
	}
	run(d / 4)
	start := time.Now()
	n := run(d)
	return float64(n) / time.Since(start).Seconds()
}

// goPipelinedRate measures pipelined Go client calls against url for d.
func goPipelinedRate(t *testing.T, url string, d time.Duration) float64 {
	t.Helper()
	sess := dialSession(t, url)
	defer sess.Close()
	ctx, cancel := context.WithTimeout(context.Background(), benchCallTimeout)
	defer cancel()
	if _, err := pipelined(ctx, sess, 1<<30, time.Now().Add(d/4), pipelineWindow); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n, err := pipelined(ctx, sess, 1<<30, time.Now().Add(d), pipelineWindow)
	if err != nil {
		t.Fatal(err)
	}
	return float64(n) / time.Since(start).Seconds()
}

// jsRun is one run of interop/bench.mjs.
type jsRun struct {
	callsPerSec float64
	// serverCPU is the CPU time the server used per call served, warm-up included: a measure
	// of server cost that other load on the machine disturbs far less than calls/s.
	serverCPU time.Duration
}

// jsRate runs interop/bench.mjs against url; serverCPU reads the server's CPU time so far.
func jsRate(t *testing.T, url, mode string, d time.Duration, inflight int, serverCPU func() time.Duration) jsRun {
	t.Helper()
	node := requireInterop(t)
	ctx, cancel := context.WithTimeout(context.Background(), d+time.Minute)
	defer cancel()
	args := []string{"bench.mjs", url, mode, fmt.Sprint(d.Seconds()), fmt.Sprint(inflight)}
	cmd := exec.CommandContext(ctx, node, args...)
	if cpus := os.Getenv("CAPNWEB_BENCH_CLIENT_CPUS"); cpus != "" {
		// The client on CPUs of its own: see TestBenchReport.
		cmd = exec.CommandContext(ctx, "taskset", append([]string{"-c", cpus, node}, args...)...)
	}
	cmd.Dir = interopDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { killGroup(cmd); return nil }
	cmd.WaitDelay = 5 * time.Second
	var stderr testutil.Buffer
	cmd.Stderr = &stderr
	cpuBefore := serverCPU()
	out, err := cmd.Output()
	cpuUsed := serverCPU() - cpuBefore
	killGroup(cmd)
	if err != nil {
		t.Fatalf("bench.mjs %s %s: %v; stderr:\n%s", url, mode, err, stderr.String())
	}
	var r struct {
		CallsPerSec float64 `json:"callsPerSec"`
		TotalCalls  int     `json:"totalCalls"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.CallsPerSec <= 0 || r.TotalCalls <= 0 {
		t.Fatalf("bench.mjs printed %q", out)
	}
	return jsRun{r.CallsPerSec, cpuUsed / time.Duration(r.TotalCalls)}
}

// selfCPU is the CPU time this process (which hosts the Go server) has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU returns a reader of another process's CPU time, from /proc/PID/stat.
func processCPU(pid int) func() time.Duration {
	return func() time.Duration {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0
		}
		// The fields after the parenthesised command name; utime and stime are the 14th and
		// 15th fields of the whole line, in clock ticks (100 per second on Linux).
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 13 {
			return 0
		}
		var utime, stime int64
		fmt.Sscan(fields[11], &utime)
		fmt.Sscan(fields[12], &stime)
		return time.Duration(utime+stime) * (time.Second / 100)
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func machineDescription() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				if _, v, ok := strings.Cut(line, ":"); ok {
					cpu = strings.TrimSpace(v)
				}
				break
			}
		}
	}
	nodeVersion := "?"
	if out, err := exec.Command("node", "--version").Output(); err == nil {
		nodeVersion = strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("%s, %d logical CPUs visible, %s/%s, %s, node %s",
		cpu, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), nodeVersion)
}

// allowedCPUs is the CPU list this process may run on.
func allowedCPUs() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// loadAverage is the 1-minute load average: how busy the machine was with other work.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}

// TestBenchReport measures all pairings side by side and prints them with their ratios. It is
// a measurement, not a check, and takes about a minute: run it on purpose with
//
//	CAPNWEB_BENCH=1 go test -run TestBenchReport -v ./capnweb/
//
// Client and server then share the machine's CPUs. To measure the servers without the client
// competing for theirs, give the client CPUs of its own: the servers (this process and the JS
// server it starts) run on the CPUs taskset gives the test, the JS client on the ones named:
//
//	CAPNWEB_BENCH=1 CAPNWEB_BENCH_CLIENT_CPUS=0 taskset -c 1 go test -run TestBenchReport -v ./capnweb/
func TestBenchReport(t *testing.T) {
	if os.Getenv("CAPNWEB_BENCH") != "1" {
		t.Skip("a measurement, not a test: set CAPNWEB_BENCH=1 to run it")
	}
	const (
		rounds = 5
		d      = time.Second
	)
	goSrv := startGoServer(t, true, capnweb.Options{})
	jsSrv := startJSServer(t)
	jsServerCPU := processCPU(jsSrv.PID)
	loadBefore := loadAverage()

	// Every round measures each pairing once, back to back, so that load from others on the
	// machine hits them alike; the JS-server and Go-server runs of a round swap order every
	// round, and each round gives one Go÷JS ratio. Figures are medians over the rounds.
	const (
		jsJS = "JS client → JS server"
		jsGo = "JS client → Go server"
		goGo = "Go client → Go server"
		goJS = "Go client → JS server"
	)
	type row struct {
		label     string
		rates     []float64
		serverCPU []float64 // µs of server CPU per call, JS-client rows only
	}
	var table []*row
	// Go server ÷ JS server per round.
	goRatios := newRatioSet()
	modes := []string{"small", "callback", "pipelined"}
	for _, mode := range modes {
		rows := map[string]*row{}
		for _, pair := range []string{jsJS, jsGo, goGo, goJS} {
			label := mode + ": " + pair
			if mode == "pipelined" {
				window := 64
				if pair == goGo {
					window = pipelineWindow
				}
				label = fmt.Sprintf("small, pipelined (%d in flight): %s", window, pair)
			}
			rows[pair] = &row{label: label}
		}
		jsClient := func(url string, cpu func() time.Duration) jsRun {
			if mode == "pipelined" {
				return jsRate(t, url, "small", d, 64, cpu)
			}
			return jsRate(t, url, mode, d, 1, cpu)
		}
		for i := 0; i < rounds; i++ {
			var onJS, onGo jsRun
			if i%2 == 0 {
				onJS, onGo = jsClient(jsSrv.URL, jsServerCPU), jsClient(goSrv.URL, selfCPU)
			} else {
				onGo, onJS = jsClient(goSrv.URL, selfCPU), jsClient(jsSrv.URL, jsServerCPU)
			}
			for pair, r := range map[string]jsRun{jsJS: onJS, jsGo: onGo} {
				rows[pair].rates = append(rows[pair].rates, r.callsPerSec)
				rows[pair].serverCPU = append(rows[pair].serverCPU, float64(r.serverCPU)/float64(time.Microsecond))
			}
			goRatios.add(mode, onGo, onJS)
			if mode == "pipelined" {
				rows[goGo].rates = append(rows[goGo].rates, goPipelinedRate(t, goSrv.URL, d))
			} else {
				rows[goGo].rates = append(rows[goGo].rates, goRate(t, goSrv.URL, mode, d))
				rows[goJS].rates = append(rows[goJS].rates, goRate(t, jsSrv.URL, mode, d))
			}
		}
		for _, pair := range []string{jsJS, jsGo, goGo, goJS} {
			if len(rows[pair].rates) > 0 {
				table = append(table, rows[pair])
			}
		}
	}

	var report strings.Builder
	fmt.Fprintf(&report, "machine: %s\n", machineDescription())
	fmt.Fprintf(&report, "load average (1 min) before/after: %s/%s\n", loadBefore, loadAverage())
	if cpus := os.Getenv("CAPNWEB_BENCH_CLIENT_CPUS"); cpus != "" {
		fmt.Fprintf(&report, "JS client pinned to CPUs %s; servers (and the Go client) on CPUs %s, GOMAXPROCS %d\n",
			cpus, allowedCPUs(), runtime.GOMAXPROCS(0))
	}
	fmt.Fprintf(&report, "%d rounds of %v per pairing, interleaved; figures are medians over the rounds\n\n", rounds, d)
	fmt.Fprintf(&report, "| pairing | calls/s | lowest–highest round | server CPU µs per call |\n|---|---:|---:|---:|\n")
	for _, r := range table {
		lo, hi := slices.Min(r.rates), slices.Max(r.rates)
		cpu := "–"
		if len(r.serverCPU) > 0 {
			cpu = fmt.Sprintf("%.1f", median(r.serverCPU))
		}
		fmt.Fprintf(&report, "| %s | %.0f | %.0f–%.0f | %s |\n", r.label, median(r.rates), lo, hi, cpu)
	}
	fmt.Fprintf(&report, "\nGo server ÷ JS server for the same JS client, median of the per-round ratios (lowest–highest):\n\n")
	goRatios.write(&report, modes)
	for _, r := range table {
		if strings.HasPrefix(r.label, "small, pipelined") && strings.HasSuffix(r.label, goGo) {
			m := median(r.rates)
			fmt.Fprintf(&report, "\nGo→Go pipelined: %.0f calls/s (goal ≥ 20000: %v)\n", m, m >= 20000)
		}
	}
	t.Log("\n" + report.String())
}

// ratioSet gathers, per call mode, one Go-server ÷ JS-server ratio per round of calls/s and of
// server CPU per call.
type ratioSet struct{ rate, cpu map[string][]float64 }

func newRatioSet() ratioSet {
	return ratioSet{rate: map[string][]float64{}, cpu: map[string][]float64{}}
}

func (rs ratioSet) add(mode string, onGo, onJS jsRun) {
	rs.rate[mode] = append(rs.rate[mode], onGo.callsPerSec/onJS.callsPerSec)
	if onJS.serverCPU > 0 {
		rs.cpu[mode] = append(rs.cpu[mode], float64(onGo.serverCPU)/float64(onJS.serverCPU))
	}
}

// write prints the medians with the lowest and highest round, a row per mode.
func (rs ratioSet) write(w io.Writer, modes []string) {
	fmt.Fprintf(w, "| call | calls/s ratio | server CPU per call ratio |\n|---|---:|---:|\n")
	for _, mode := range modes {
		fmt.Fprintf(w, "| %s | %.2f (%s) | %.2f (%s) |\n", mode,
			median(rs.rate[mode]), spread(rs.rate[mode]), median(rs.cpu[mode]), spread(rs.cpu[mode]))
	}
}

// spread is the lowest and highest of xs.
func spread(xs []float64) string {
	if len(xs) == 0 {
		return "–"
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return fmt.Sprintf("%.2f–%.2f", s[0], s[len(s)-1])
}
