package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/supolka/codemode-gateway/backends/local/internal/sandbox"
	"github.com/supolka/codemode-gateway/protocol"
)

// The pipe between the parent and a worker carries frames: a 4-byte
// big-endian length followed by that many bytes of one JSON message.
const frameHeaderSize = 4

// Frame bounds. A worker runs untrusted code, so everything it sends is
// bounded tightly: a result envelope is at most PayloadLimit of answer plus
// ConsoleCaptureLimit of logs, and JSON escaping of those inside a frame can
// grow them at most sixfold. The parent is trusted, but a job (code plus
// module map) or a tool's answer still gets a ceiling so that neither side
// ever allocates an unbounded buffer off a length it read.
const (
	MaxWorkerFrame = 4 << 20  // worker → parent
	MaxParentFrame = 64 << 20 // parent → worker
)

// Kind says what a frame is. A worker hosts many runs at once, so
// every frame about one carries its run id, which the parent assigns.
type Kind string

const (
	KindInit           Kind = "init"           // parent → worker: limits, before anything else
	KindReady          Kind = "ready"          // worker → parent: limits applied, serving
	KindJob            Kind = "job"            // parent → worker: start one run
	KindCancel         Kind = "cancel"         // parent → worker: stop a run
	KindDispatch       Kind = "dispatch"       // worker → parent: one tool call of a run
	KindDispatchAnswer Kind = "dispatchAnswer" // parent → worker: the tool call's envelope
	KindOutbound       Kind = "outbound"       // worker → parent: one stub-mode request of a run
	KindOutboundAnswer Kind = "outboundAnswer" // parent → worker: its response
	KindResult         Kind = "result"         // worker → parent: a run's envelope
	KindInvoke         Kind = "invoke"         // parent → worker: one invocation of a retained handler
	KindInvokeAnswer   Kind = "invokeAnswer"   // worker → parent: its response or rejection
	KindRelease        Kind = "release"        // parent → worker: close a retained run's handles
	KindEnded          Kind = "ended"          // worker → parent: a retained run is gone (released, or ended by a bound)
	KindHog            Kind = "hog"            // worker → parent: a thread runs a piece past its slice: lower its priority
)

// Message is every frame's JSON shape.
type Message struct {
	// Kind says which of the fields below are set.
	Kind Kind `json:"kind"`
	// Run names the run a frame is about.
	Run uint64 `json:"run,omitempty"`
	// ID pairs a host call or an invocation with its answer. The worker
	// numbers its host calls once for its whole life, so an answer that
	// arrives after its run ended never matches a call of another run.
	ID uint64 `json:"id,omitempty"`

	Job   *sandbox.Job `json:"job,omitempty"`
	Init  *Init        `json:"init,omitempty"`
	Ready *Ready       `json:"ready,omitempty"`

	Provider string `json:"provider,omitempty"`
	Tool     string `json:"tool,omitempty"`
	Args     string `json:"args,omitempty"`
	Answer   string `json:"answer,omitempty"`

	OutboundRequest  *protocol.OutboundRequest  `json:"outboundRequest,omitempty"`
	OutboundResponse *protocol.OutboundResponse `json:"outboundResponse,omitempty"`

	// Err is the host's error for a dispatch or outbound call; HasErr tells
	// an empty text apart from no error.
	Err    string `json:"err,omitempty"`
	HasErr bool   `json:"hasErr,omitempty"`

	Result *protocol.ExecuteResult `json:"result,omitempty"`
	// OverLimit says the memory watchdog ended the run, or the retained
	// session (invokeAnswer, ended).
	OverLimit bool `json:"overLimit,omitempty"`
	// CPUNanos and PeakHeap are the run's usage the meter measured so far
	// (result, and a retained run's invokeAnswer and ended); ClockNanos is
	// what a retained run's clock spent since its last such frame (its
	// invocation, and the work between invocations).
	CPUNanos   int64 `json:"cpuNanos,omitempty"`
	PeakHeap   int64 `json:"peakHeap,omitempty"`
	ClockNanos int64 `json:"clockNanos,omitempty"`
	// WaitNanos is how long the run's work waited for the CPU behind its
	// siblings (result).
	WaitNanos int64 `json:"waitNanos,omitempty"`
	// TID is the thread a hog frame names: one of the worker's own.
	TID int `json:"tid,omitempty"`

	// Size is the frame's length in bytes as it was read (never sent).
	Size int `json:"-"`
	// Ended says a retained session is gone (invokeAnswer, ended): Err is
	// the bound's text that ended it, empty when it was released, and
	// Failure its kind. A result's kind is in its Result.
	Ended   bool                 `json:"ended,omitempty"`
	Failure protocol.FailureKind `json:"failure,omitempty"`
	// Broken says the sandbox itself broke (result, invokeAnswer, ended):
	// the call fails with an INTERNAL fault, and a result has no envelope.
	Broken bool `json:"broken,omitempty"`
}

// Init carries the per-worker limits.
type Init struct {
	// MemoryLimitMB is a run's memory limit unless its job sets a lower
	// one; it also caps a goroutine's stack.
	MemoryLimitMB int `json:"memoryLimitMB"`
	// WorkerMemoryMB is the memory of the whole worker across its runs.
	WorkerMemoryMB int `json:"workerMemoryMB"`
	// AddressSpaceMB is RLIMIT_AS's headroom over VmSize plus
	// WorkerMemoryMB; 0 disables it.
	AddressSpaceMB int `json:"addressSpaceMB"`
	// Confine asks the worker to load its system-call filter before it
	// reports ready; Sockets lets that filter allow outbound sockets.
	Confine bool `json:"confine,omitempty"`
	Sockets bool `json:"sockets,omitempty"`
}

// Ready reports what the worker applied.
type Ready struct {
	PID int `json:"pid"`
	// RlimitAS is the address-space limit set, in bytes; 0 when none.
	RlimitAS uint64 `json:"rlimitAS"`
	// Confined is set once the filter is in force.
	Confined bool `json:"confined,omitempty"`
}

// Errors of a frame the reader refused.
var (
	ErrFrameEmpty    = errors.New("empty frame")
	ErrFrameTooLarge = errors.New("frame exceeds its bound")
)

// FrameTooLargeError is a message the writer refused to send: larger than
// the reader's bound. It matches ErrFrameTooLarge.
type FrameTooLargeError struct {
	Kind      Kind // the message's
	Size, Max int  // its encoded size and the reader's bound, in bytes
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("%s frame of %d bytes: %v (%d)", e.Kind, e.Size, ErrFrameTooLarge, e.Max)
}

func (e *FrameTooLargeError) Is(target error) bool { return target == ErrFrameTooLarge }

// frameBufKeep is the largest frame buffer kept for reuse; a rare large
// frame (a job with a big module map) does not pin its memory afterwards.
const frameBufKeep = 64 << 10

// Writer writes frames to one stream, reusing its encode buffer.
// Callers serialize their calls.
type Writer struct {
	w   io.Writer
	buf bytes.Buffer
}

// NewWriter is a Writer of frames to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write encodes m as one frame and writes it with a single Write. It
// refuses a message larger than max instead of sending something the
// reader would reject.
func (fw *Writer) Write(m *Message, max int) error {
	b := &fw.buf
	defer func() {
		if b.Cap() > frameBufKeep {
			*b = bytes.Buffer{}
		}
	}()
	b.Reset()
	b.Write(make([]byte, frameHeaderSize))
	if err := json.NewEncoder(b).Encode(m); err != nil {
		return fmt.Errorf("encode %s frame: %w", m.Kind, err)
	}
	frame := b.Bytes()
	frame = frame[:len(frame)-1] // Encode's newline
	n := len(frame) - frameHeaderSize
	if n > max {
		return &FrameTooLargeError{Kind: m.Kind, Size: n, Max: max}
	}
	binary.BigEndian.PutUint32(frame, uint32(n))
	_, err := fw.w.Write(frame)
	return err
}

// Reader reads frames from one stream, reusing its body buffer:
// decoding copies every string out of it.
type Reader struct {
	r    io.Reader
	body []byte
}

// NewReader is a Reader of frames from r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Read decodes one frame of at most max bytes. io.EOF means the stream
// ended cleanly between frames; any other error means the stream is
// unusable and its writer must be treated as broken.
func (fr *Reader) Read(max int) (*Message, error) {
	var hdr [frameHeaderSize]byte
	if _, err := io.ReadFull(fr.r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("truncated frame header: %w", err)
		}
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 {
		return nil, ErrFrameEmpty
	}
	if uint64(n) > uint64(max) {
		return nil, fmt.Errorf("frame of %d bytes: %w (%d)", n, ErrFrameTooLarge, max)
	}
	if uint64(n) > uint64(cap(fr.body)) {
		fr.body = make([]byte, n)
	}
	body := fr.body[:n]
	if n > frameBufKeep {
		fr.body = nil
	}
	if _, err := io.ReadFull(fr.r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("truncated frame body: %w", err)
	}
	m := new(Message)
	if err := json.Unmarshal(body, m); err != nil {
		return nil, fmt.Errorf("malformed frame: %w", err)
	}
	if m.Kind == "" {
		return nil, errors.New("malformed frame: no kind")
	}
	m.Size = int(n)
	return m, nil
}
