package local

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/supolka/codemode-gateway/backends/local/internal/wire"
)

// killReason records why the parent ended a worker; the first reason wins
// and decides what the execution on it reports.
type killReason int32

const (
	killNone     killReason = iota
	killMemory              // RSS past the worker's memory
	killClosed              // the executor is closing
	killProtocol            // it sent a frame it should not have
	killRetired             // no longer wanted: idle, drained, or evicted for another tenant
	killOverrun             // a run held the gate past its deadline (or its cancel) plus grace
)

// process is the parent's handle on one worker process.
type process struct {
	cmd    *exec.Cmd
	pid    int
	stdin  io.WriteCloser
	wmu    sync.Mutex   // one frame at a time on stdin
	fw     *wire.Writer // writes to stdin; guarded by wmu
	frames chan *wire.Message
	// readErr is why frames closed; read it only after frames is closed.
	readErr error
	exited  chan struct{} // closed once the process is reaped
	waitErr error         // read only after exited is closed
	stderr  *stderrLog
	reason  atomic.Int32
	dying   chan struct{} // closed on the first kill
	dieOnce sync.Once
	rlimit  uint64
	// confined is set when the worker reported its system-call filter in
	// force.
	confined bool
	// baseRSS is the RSS right after start. The parent's RSS poll allows
	// the worker's memory plus headroom above it; untouched pages never
	// count towards RSS, and those are RLIMIT_AS's to refuse.
	baseRSS uint64
	// table is the run table shared with the worker; nil outside Linux.
	table *wire.Table
	// stat is the worker's /proc stat file, open until it is reaped.
	stat *statFile
	// cpu is the CPU the worker is pinned to; -1: none.
	cpu int
}

// tableSpare is how many slots a run table has beyond RunsPerWorker: runs
// on their way out of a worker still hold theirs.
const tableSpare = 8

// workerEnvPassed are the only variables of the gateway's environment a
// worker inherits. The rest stays out: a gateway's environment carries
// secrets (the executionId key, JWT keys, TLS settings), and guest code
// runs in the worker. Each of these changes how Go code there behaves the
// way the operator meant it to: the time zone of Date, the TLS roots of
// native fetch, runtime settings.
var workerEnvPassed = []string{"TZ", "ZONEINFO", "SSL_CERT_FILE", "SSL_CERT_DIR", "GODEBUG", "GOMAXPROCS"}

// workerEnvironment is a worker's whole environment: the worker marker,
// workerEnvPassed from the gateway's, then Options.WorkerEnv.
func workerEnvironment(extra []string) []string {
	env := []string{wire.WorkerEnv + "=" + wire.WorkerEnvValue, "GOTRACEBACK=single"}
	for _, k := range workerEnvPassed {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}

// spawn starts one worker and waits for its ready frame. A worker that
// started and then failed its start is reaped in the background, and
// spent is told the CPU it burned: it belongs to no tenant, but it was
// burned.
func spawn(o *Options, spent func(time.Duration)) (*process, error) {
	table, err := wire.NewTable(o.RunsPerWorker + tableSpare)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			table.Release()
		}
	}()
	cmd := exec.Command(workerPath(o.WorkerCommand[0], o.cred), o.WorkerCommand[1:]...)
	cmd.Args[0] = o.WorkerCommand[0]
	cmd.Env = workerEnvironment(o.WorkerEnv)
	if f := table.ExtraFile(); f != nil {
		cmd.ExtraFiles = []*os.File{f} // descriptor wire.TableFD in the worker
	}
	// Its own session and process group (processGroupAttr says why the
	// session), so a kill reaches anything it started and no
	// descendant keeps the pipes open after it.
	cmd.SysProcAttr = processGroupAttr(o.cred)
	closeOnExec()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	table.CloseFile() // the worker has its own descriptor now
	p := &process{
		table:  table,
		cpu:    -1,
		cmd:    cmd,
		pid:    cmd.Process.Pid,
		stdin:  stdin,
		fw:     wire.NewWriter(stdin),
		frames: make(chan *wire.Message, 16),
		exited: make(chan struct{}),
		dying:  make(chan struct{}),
		stderr: newStderrLog(),
		stat:   openStat(cmd.Process.Pid),
	}
	// The stderr and stdout readers must finish before Wait, which closes
	// the pipes; Wait then reaps the process.
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); p.stderr.consume(errPipe) }()
	go func() { defer readers.Done(); p.readFrames(stdout) }()
	go func() {
		readers.Wait()
		p.waitErr = cmd.Wait()
		p.stat.close()
		close(p.exited)
	}()
	// From here the page goes with the process: the start failures below
	// release it once the process is reaped, and after a start whoever
	// watches the worker does (it reads the page after the worker died).
	ok = true
	reaped := func() {
		table.Release()
		if st := cmd.ProcessState; st != nil {
			spent(st.UserTime() + st.SystemTime())
		}
	}
	failed := func() { go func() { <-p.exited; reaped() }() }

	init := &wire.Message{Kind: wire.KindInit, Init: &wire.Init{
		MemoryLimitMB:  o.MemoryLimitMB,
		WorkerMemoryMB: o.WorkerMemoryMB,
		AddressSpaceMB: o.AddressSpaceHeadroomMB,
		Confine:        confineSupported && !o.NoSeccomp,
		Sockets:        !o.Native.Vetoed,
	}}
	if err := p.send(init); err != nil {
		p.kill(killProtocol)
		failed()
		return nil, fmt.Errorf("worker %d: send init: %w", p.pid, err)
	}
	timer := time.NewTimer(o.StartTimeout)
	defer timer.Stop()
	select {
	case m, ok := <-p.frames:
		if !ok || m.Kind != wire.KindReady || m.Ready == nil {
			p.kill(killProtocol)
			<-p.exited
			reaped()
			return nil, fmt.Errorf("worker %d did not start: %v", p.pid, p.describeExit())
		}
		p.rlimit = m.Ready.RlimitAS
		p.confined = m.Ready.Confined
		if st, ok := p.stat.read(); ok {
			p.baseRSS = st.rss
		}
		return p, nil
	case <-timer.C:
		p.kill(killProtocol)
		failed()
		return nil, fmt.Errorf("worker %d sent no ready frame within %v", p.pid, o.StartTimeout)
	}
}

// readFrames forwards every frame to p.frames and closes it when the stream
// ends. A malformed frame kills the worker: nothing after it can be trusted.
func (p *process) readFrames(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	fr := wire.NewReader(br)
	for {
		m, err := fr.Read(wire.MaxWorkerFrame)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				p.kill(killProtocol)
			}
			p.readErr = err
			close(p.frames)
			// Drain so that a worker still writing never blocks on a full
			// pipe while it is being killed.
			_, _ = io.Copy(io.Discard, br)
			return
		}
		select {
		case p.frames <- m:
		case <-p.dying:
			p.readErr = errors.New("worker killed")
			close(p.frames)
			_, _ = io.Copy(io.Discard, br)
			return
		}
	}
}

func (p *process) send(m *wire.Message) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return p.fw.Write(m, wire.MaxParentFrame)
}

// kill ends the worker with SIGKILL, recording why unless a reason is
// already recorded.
func (p *process) kill(r killReason) {
	p.reason.CompareAndSwap(int32(killNone), int32(r))
	p.dieOnce.Do(func() { close(p.dying) })
	killGroup(p.pid)
	_ = p.cmd.Process.Kill()
}

// killedFor is the recorded kill reason.
func (p *process) killedFor() killReason { return killReason(p.reason.Load()) }

// retire stops a worker the pool no longer wants. Closing stdin asks it to
// exit; the kill makes sure.
func (p *process) retire() {
	_ = p.stdin.Close()
	p.kill(killRetired)
}

// describeExit is a one-line account of how the process ended, with the
// tail of its stderr, for logs. Call it after exited is closed.
func (p *process) describeExit() string {
	select {
	case <-p.exited:
	default:
		return "still running"
	}
	s := "exited"
	if p.waitErr != nil {
		s = p.waitErr.Error()
	}
	if t := p.stderr.tail(); t != "" {
		s += "; stderr: " + t
	}
	return s
}

// exitCause says how a process the parent did not kill ended: "exited:
// signal SIGKILL", "crashed: exit status 2", "exited: status 0". Call it
// after exited is closed.
func (p *process) exitCause() string {
	ps := p.cmd.ProcessState
	if ps == nil {
		return "exited: " + fmt.Sprint(p.waitErr)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "exited: signal " + unix.SignalName(ws.Signal())
	}
	if ps.ExitCode() == 0 {
		return "exited: status 0"
	}
	return "crashed: exit status " + strconv.Itoa(ps.ExitCode())
}

// ranOutOfMemory reports whether the worker's runtime died of an
// allocation the address-space limit refused, or of a stack grown past the
// cap the worker set from the memory limit. The guest cannot write to
// stderr, so these lines come from the Go runtime alone.
func (p *process) ranOutOfMemory() bool { return p.stderr.sawOOM.Load() }

// stderrLog keeps a bounded view of a worker's stderr: its first and last
// lines, and whether the runtime reported running out of memory.
type stderrLog struct {
	mu     sync.Mutex
	head   bytes.Buffer
	last   []string
	sawOOM atomic.Bool
}

const (
	stderrHeadBytes = 2048
	stderrTailLines = 8
	stderrLineBytes = 512
)

// oomMarkers are the Go runtime's words when an allocation fails, or a
// goroutine's stack passes the cap the worker set at its memory limit.
var oomMarkers = [][]byte{
	[]byte("goroutine stack exceeds"),
	[]byte("out of memory"),
	[]byte("cannot allocate memory"),
	[]byte("failed to reserve page summary memory"),
	// A race-detector build reports a refused heap reservation this way.
	[]byte("too many address space collisions"),
	[]byte("ThreadSanitizer failed to allocate"),
}

func newStderrLog() *stderrLog { return &stderrLog{} }

func (l *stderrLog) consume(r io.Reader) {
	br := bufio.NewReaderSize(r, stderrLineBytes)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			l.add(line)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

func (l *stderrLog) add(line []byte) {
	for _, m := range oomMarkers {
		if bytes.Contains(line, m) {
			l.sawOOM.Store(true)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := stderrHeadBytes - l.head.Len(); room > 0 {
		l.head.Write(line[:min(room, len(line))])
		return
	}
	l.last = append(l.last, string(bytes.TrimRight(line, "\n")))
	if len(l.last) > stderrTailLines {
		l.last = l.last[1:]
	}
}

func (l *stderrLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := string(bytes.TrimSpace(l.head.Bytes()))
	if len(l.last) > 0 {
		s += " … " + fmt.Sprint(l.last)
	}
	return s
}

// exitWait bounds how long the parent waits for a worker whose stream has
// ended to be reaped before it kills it.
const exitWait = 2 * time.Second

// reap waits until a worker whose stream ended has exited, killing it
// when it has not after exitWait.
func (p *process) reap() {
	select {
	case <-p.exited:
	case <-time.After(exitWait):
		p.kill(killProtocol)
		<-p.exited
	}
}
