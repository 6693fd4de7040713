package protocol

import (
	"errors"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// Declared failures.
//
// A declared failure is the executor turning something down on purpose: a
// bound enforced, a surface declared absent, a request it cannot run. Its
// reader is the model whose code just ran, so its text follows one grammar:
// the first sentence names what failed and why, the sentence after it says
// what remains possible. Each class below composes its own text in its
// constructor; the texts the contract quotes are reproduced word for word.
//
// A declared failure travels as text: inside the result envelope's error,
// or as the message of the error the sandbox throws where the program
// touched the capability. Five of them (QueueOverflowError,
// QueueTimeoutError, TenantLimitError, ResponseTooLargeError,
// HandlesClosedError) are faults the calling application meets on a thrown
// error; they implement Coded.

// The two pinned texts of the dispatch grammar.
const (
	// CompletedText is the envelope error of every tool call that arrives
	// after its execution finished, wherever it was made.
	CompletedText = "Execution has already completed."
	// OutsideEnvelopeText is what the generated proxy throws when a
	// dispatch answer is not an envelope object.
	OutsideEnvelopeText = "The dispatch answered outside the result envelope."
)

// ConsoleCaptureMessage is the text of the one warn line that takes the
// place of the rest of a run's logging once its captured console reaches
// ConsoleCaptureLimit. The run itself goes on.
const ConsoleCaptureMessage = "Console output stopped at this run's 65536-byte capture bound, so the rest of its logging is dropped. The run goes on, and its result still returns."

// listOrNone renders a list of names for a text: joined with ", ", or
// "(none)" when there are none.
func listOrNone(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

// ExecutionTimeoutError: the run outlived its bound on the run clock.
//
//	Execution timed out at its <timeout> ms bound. Do less work per run and return the part that is already finished.
type ExecutionTimeoutError struct {
	TimeoutMs int64 // the bound the run was held to
}

// NewExecutionTimeoutError composes the timeout text for a bound of
// timeoutMs milliseconds.
func NewExecutionTimeoutError(timeoutMs int64) *ExecutionTimeoutError {
	return &ExecutionTimeoutError{TimeoutMs: timeoutMs}
}

func (e *ExecutionTimeoutError) Error() string {
	return "Execution timed out at its " + strconv.FormatInt(e.TimeoutMs, 10) +
		" ms bound. Do less work per run and return the part that is already finished."
}

// Matches reports whether text is a timeout text; see
// MatchesExecutionTimeout. It reads no field of e, so a nil
// *ExecutionTimeoutError works.
func (*ExecutionTimeoutError) Matches(text string) bool { return MatchesExecutionTimeout(text) }

var timeoutSentence = regexp.MustCompile(`^Execution timed out at its (0|[1-9][0-9]*) ms bound\.(\s|$)`)

// MatchesExecutionTimeout reports whether text opens with the whole first
// sentence of the timeout text, "Execution timed out at its <n> ms bound.",
// for some whole number n, followed by the end of the text or white space.
// Adapters recognise a timeout by it. A text that merely starts with the
// words "Execution timed out" does not match.
func MatchesExecutionTimeout(text string) bool { return timeoutSentence.MatchString(text) }

// MemoryLimitError: the run exhausted its memory limit.
//
//	Execution ran out of memory at its <limit> MB limit. Work through the data in smaller pieces and keep only what you return.
type MemoryLimitError struct {
	LimitMB int
}

// NewMemoryLimitError composes the memory text for a limit of limitMB MB.
func NewMemoryLimitError(limitMB int) *MemoryLimitError {
	return &MemoryLimitError{LimitMB: limitMB}
}

var memorySentence = regexp.MustCompile(`^Execution ran out of memory at its (0|[1-9][0-9]*) MB limit\.(\s|$)`)

// MatchesMemoryLimit reports whether text opens with the whole first
// sentence of the memory text, "Execution ran out of memory at its <n> MB
// limit.", as MatchesExecutionTimeout does for the timeout text.
func MatchesMemoryLimit(text string) bool { return memorySentence.MatchString(text) }

func (e *MemoryLimitError) Error() string {
	return "Execution ran out of memory at its " + strconv.Itoa(e.LimitMB) +
		" MB limit. Work through the data in smaller pieces and keep only what you return."
}

// The texts of the two failures that name nothing of the run.
const (
	outboundDisabledText   = "Outbound fetch is disabled for this execution. Anything this run needs from outside has to arrive through a tool call."
	cacheStorageAbsentText = "Cache storage is absent from this runtime because nothing survives an execution. Return what should persist in the result and take it back as an input on the next call."
)

// OutboundDisabledError: fetch was called in a run whose outbound setting
// is null (OutboundDisabled). The sandbox raises it as a TypeError.
//
//	Outbound fetch is disabled for this execution. Anything this run needs from outside has to arrive through a tool call.
type OutboundDisabledError struct{}

// NewOutboundDisabledError composes the outbound text.
func NewOutboundDisabledError() *OutboundDisabledError { return &OutboundDisabledError{} }

func (*OutboundDisabledError) Error() string { return outboundDisabledText }

// ModuleNotFoundError: the program imported a name the module map does not
// declare. A dynamic import() rejects with it; a static import fails the run
// before it starts.
//
//	Module "<name>" is not in the module map. Import one of the names it declares: <declared>.
type ModuleNotFoundError struct {
	Name     string
	Declared []string // sorted
}

// NewModuleNotFoundError composes the text for name, listing the declared
// names sorted and joined with ", " ("(none)" for an empty map).
func NewModuleNotFoundError(name string, declared []string) *ModuleNotFoundError {
	d := append([]string(nil), declared...)
	sort.Strings(d)
	return &ModuleNotFoundError{Name: name, Declared: d}
}

func (e *ModuleNotFoundError) Error() string {
	return `Module "` + e.Name + `" is not in the module map. Import one of the names it declares: ` +
		listOrNone(e.Declared) + "."
}

// ModuleKeyCollisionError: two names of a module map are the same name
// after NormalizeModuleName.
//
//	Module names "<a>" and "<b>" both name the module "<key>", so the module map is ambiguous. Keep one of them, or rename the others so the names differ once a leading "./" is removed.
type ModuleKeyCollisionError struct {
	Key       string   // the normalized name they share
	Colliding []string // the names as given, sorted
}

// NewModuleKeyCollisionError composes the text for the names colliding on
// the normalized key.
func NewModuleKeyCollisionError(key string, colliding []string) *ModuleKeyCollisionError {
	c := append([]string(nil), colliding...)
	sort.Strings(c)
	return &ModuleKeyCollisionError{Key: key, Colliding: c}
}

func (e *ModuleKeyCollisionError) Error() string {
	distinct := make([]string, 0, len(e.Colliding))
	for i, n := range e.Colliding {
		if i == 0 || n != e.Colliding[i-1] {
			distinct = append(distinct, `"`+n+`"`)
		}
	}
	if len(distinct) < 2 {
		return `Module name "` + e.Key + `" appears more than once, so the module map is ambiguous. Keep one entry under that name.`
	}
	both := "both"
	if len(distinct) > 2 {
		both = "all"
	}
	return "Module names " + joinAnd(distinct) + " " + both + ` name the module "` + e.Key +
		`", so the module map is ambiguous. Keep one of them, or rename the others so the names differ once a leading "./" is removed.`
}

// joinAnd joins "a", "b" and "c" as `a, b and c`.
func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// UnsupportedModuleKindError: a module-map entry is neither a source string
// nor an object with exactly one of the five kinds.
//
//	Module "<name>" has the unsupported kind "<kind>". Give each module as a source string or as an object with exactly one of js, cjs, text, json or data.
type UnsupportedModuleKindError struct {
	Name string
	// Kind is what the entry gave instead: the unknown kind key, several
	// keys joined with "+", or the JSON type of a value that is neither a
	// string nor an object ("number", "array", "null", "{}" for an empty
	// object).
	Kind string
}

// NewUnsupportedModuleKindError composes the text for the entry name whose
// kind is kind.
func NewUnsupportedModuleKindError(name string, kind string) *UnsupportedModuleKindError {
	return &UnsupportedModuleKindError{Name: name, Kind: kind}
}

func (e *UnsupportedModuleKindError) Error() string {
	return `Module "` + e.Name + `" has the unsupported kind "` + e.Kind +
		`". Give each module as a source string or as an object with exactly one of js, cjs, text, json or data.`
}

// PayloadPart names a part of what a run sends outward; each is bounded by
// PayloadLimit where it is built.
type PayloadPart string

// The four bounded parts.
const (
	PartRunAnswer       PayloadPart = "run's answer"     // the result, or the thrown message
	PartToolCall        PayloadPart = "tool call"        // provider, tool and arguments together
	PartOutboundRequest PayloadPart = "outbound request" // URL, headers and body
	PartHandleAnswer    PayloadPart = "handle answer"    // status text, headers and body
)

// advice is the second sentence of PayloadTooLargeError per part.
func (p PayloadPart) advice() string {
	switch p {
	case PartRunAnswer:
		return "Return a smaller value, and fetch the rest in a later run."
	case PartToolCall:
		return "Pass smaller arguments, or split the call into several smaller ones."
	case PartOutboundRequest:
		return "Send a smaller body, or split it across several requests."
	case PartHandleAnswer:
		return "Answer with a smaller response, or split it across several requests."
	}
	return "Send less in one part."
}

// PayloadTooLargeError: a part a run sends outward went past its bound.
//
//	The <part> is <size> bytes, past the <limit>-byte bound on one part a run sends. <what to do for that part>
type PayloadTooLargeError struct {
	Part  PayloadPart
	Size  int // bytes the part costs on the wire
	Limit int // the bound it passed
}

// NewPayloadTooLargeError composes the text naming the part, its size and
// the bound.
func NewPayloadTooLargeError(part PayloadPart, size, limit int) *PayloadTooLargeError {
	return &PayloadTooLargeError{Part: part, Size: size, Limit: limit}
}

func (e *PayloadTooLargeError) Error() string {
	return "The " + string(e.Part) + " is " + strconv.Itoa(e.Size) + " bytes, past the " +
		strconv.Itoa(e.Limit) + "-byte bound on one part a run sends. " + e.Part.advice()
}

var payloadSentence = regexp.MustCompile(`^The (` + regexp.QuoteMeta(string(PartRunAnswer)) + `|` +
	regexp.QuoteMeta(string(PartToolCall)) + `|` + regexp.QuoteMeta(string(PartOutboundRequest)) + `|` +
	regexp.QuoteMeta(string(PartHandleAnswer)) + `) is (0|[1-9][0-9]*) bytes, past the (0|[1-9][0-9]*)-byte bound on one part a run sends\.(\s|$)`)

// MatchesPayloadTooLarge reports whether text opens with the whole first
// sentence of PayloadTooLargeError's text for one of the four parts, as
// MatchesExecutionTimeout does for the timeout text.
func MatchesPayloadTooLarge(text string) bool { return payloadSentence.MatchString(text) }

// CompressionAbsentError: CompressionStream or DecompressionStream was
// constructed. The sandbox raises it as a NotSupportedError DOMException.
//
//	<name> is absent from this runtime by design. The host applies content coding on the wire, so work with uncompressed bytes.
type CompressionAbsentError struct {
	Name string // "CompressionStream" or "DecompressionStream"
}

// NewCompressionAbsentError composes the text for the constructor name.
func NewCompressionAbsentError(name string) *CompressionAbsentError {
	return &CompressionAbsentError{Name: name}
}

func (e *CompressionAbsentError) Error() string {
	return e.Name + " is absent from this runtime by design. The host applies content coding on the wire, so work with uncompressed bytes."
}

// BufferGrowthAbsentError: ArrayBuffer.prototype.resize or
// SharedArrayBuffer.prototype.grow was called.
//
//	<name> is absent from this runtime because a buffer that grows after it is created is allocated outside the memory limit this execution is metered against. Ask for the length you need when you create the buffer.
type BufferGrowthAbsentError struct {
	Name string // e.g. "ArrayBuffer.prototype.resize"
}

// NewBufferGrowthAbsentError composes the text for the operation name.
func NewBufferGrowthAbsentError(name string) *BufferGrowthAbsentError {
	return &BufferGrowthAbsentError{Name: name}
}

func (e *BufferGrowthAbsentError) Error() string {
	return e.Name + " is absent from this runtime because a buffer that grows after it is created is allocated outside the memory limit this execution is metered against. Ask for the length you need when you create the buffer."
}

// CacheStorageAbsentError: a member of caches was used.
//
//	Cache storage is absent from this runtime because nothing survives an execution. Return what should persist in the result and take it back as an input on the next call.
type CacheStorageAbsentError struct{}

// NewCacheStorageAbsentError composes the persistence text.
func NewCacheStorageAbsentError() *CacheStorageAbsentError { return &CacheStorageAbsentError{} }

func (*CacheStorageAbsentError) Error() string { return cacheStorageAbsentText }

// HandleNotFoundError: InvokeHandle named a handle outside the granted
// list of a retained execution.
//
//	Execution "<executionId>" has no handle named "<handleName>". The granted handles are: <granted>.
//
// The id and the handle name are echoed as Echo bounds them.
type HandleNotFoundError struct {
	ExecutionID string
	Handle      string
	Granted     []string // in the order granted
}

// NewHandleNotFoundError composes the text; granted is listed in the order
// given, joined with ", " ("(none)" when empty).
func NewHandleNotFoundError(executionID, handle string, granted []string) *HandleNotFoundError {
	return &HandleNotFoundError{ExecutionID: executionID, Handle: handle, Granted: append([]string(nil), granted...)}
}

func (e *HandleNotFoundError) Error() string {
	return `Execution "` + Echo(e.ExecutionID) + `" has no handle named "` + Echo(e.Handle) +
		`". The granted handles are: ` + listOrNone(e.Granted) + "."
}

// HandlesClosedError: InvokeHandle or CloseHandles named an execution whose
// handles are gone. It carries CodeHandlesClosed.
//
//	Execution "<executionId>" holds no handles: they were closed, expired at the idle bound, or never granted. Execute again with retainHandles to get a fresh executionId.
//
// The id is echoed as Echo bounds it.
type HandlesClosedError struct {
	ExecutionID string
}

// NewHandlesClosedError composes the text for executionID.
func NewHandlesClosedError(executionID string) *HandlesClosedError {
	return &HandlesClosedError{ExecutionID: executionID}
}

const (
	handlesClosedPrefix = `Execution "`
	handlesClosedSuffix = `" holds no handles: they were closed, expired at the idle bound, or never granted. Execute again with retainHandles to get a fresh executionId.`
)

func (e *HandlesClosedError) Error() string {
	return handlesClosedPrefix + Echo(e.ExecutionID) + handlesClosedSuffix
}

// The bounds of Echo: a caller's text up to maxEchoed bytes is echoed
// whole; a longer one by its first echoedHead bytes.
const (
	maxEchoed  = 256
	echoedHead = 64
)

// Echo is how a text echoes a string the caller sent (an executionId, a
// handle name): whole up to 256 bytes, else its first 64 bytes (never
// splitting a UTF-8 sequence), "…" and its length, as in
//
//	x2.AAAA…AAAA… (500000 bytes)
//
// so that a caller who sends 500 KB does not get it back. Echoing an echo
// changes nothing, so a text read back from the wire composes again alike.
func Echo(s string) string {
	if len(s) <= maxEchoed {
		return s
	}
	n := echoedHead
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// FaultCode is CodeHandlesClosed.
func (*HandlesClosedError) FaultCode() Code { return CodeHandlesClosed }

// QueueOverflowError: execute was turned away because the pool's queue is
// at its bound. It carries CodeQueueOverflow, which is retryable, and says
// how long to wait.
//
//	The executor's queue is full at its bound of <bound> waiting executions, so this one was turned away before it ran. Try it again in <retryAfter> ms.
type QueueOverflowError struct {
	Bound      int           // how many executions may wait
	RetryAfter time.Duration // how long the caller should wait, in whole milliseconds
}

// NewQueueOverflowError composes the text for a queue of bound places and
// a wait of retryAfter (rounded up to whole milliseconds, at least one).
func NewQueueOverflowError(bound int, retryAfter time.Duration) *QueueOverflowError {
	return &QueueOverflowError{Bound: bound, RetryAfter: wholeMillis(retryAfter)}
}

const (
	queueOverflowPrefix = "The executor's queue is full at its bound of "
	queueOverflowMiddle = " waiting executions, so this one was turned away before it ran."
)

func (e *QueueOverflowError) Error() string {
	return queueOverflowPrefix + strconv.Itoa(e.Bound) + queueOverflowMiddle + retrySentence(e.RetryAfter)
}

// FaultCode is CodeQueueOverflow.
func (*QueueOverflowError) FaultCode() Code { return CodeQueueOverflow }

// RetryAfterHint is how long the caller should wait before trying again.
func (e *QueueOverflowError) RetryAfterHint() time.Duration { return e.RetryAfter }

// QueueTimeoutError: execute waited for room on the executor for as long
// as the executor lets an execution wait, and was turned away. It carries
// CodeQueueOverflow, which is retryable, and says how long to wait.
//
//	This execution waited its bound of <waited> ms for room on the executor, so it was turned away before it ran. Try it again in <retryAfter> ms.
type QueueTimeoutError struct {
	Waited     time.Duration // the executor's bound on waiting, in whole milliseconds
	RetryAfter time.Duration // how long the caller should wait, in whole milliseconds
}

// NewQueueTimeoutError composes the text for a wait bound of waited and a
// retry after retryAfter (both rounded up to whole milliseconds).
func NewQueueTimeoutError(waited, retryAfter time.Duration) *QueueTimeoutError {
	return &QueueTimeoutError{Waited: wholeMillis(waited), RetryAfter: wholeMillis(retryAfter)}
}

const (
	queueTimeoutPrefix = "This execution waited its bound of "
	queueTimeoutMiddle = " ms for room on the executor, so it was turned away before it ran."
)

func (e *QueueTimeoutError) Error() string {
	return queueTimeoutPrefix + strconv.FormatInt(e.Waited.Milliseconds(), 10) + queueTimeoutMiddle + retrySentence(e.RetryAfter)
}

// FaultCode is CodeQueueOverflow.
func (*QueueTimeoutError) FaultCode() Code { return CodeQueueOverflow }

// RetryAfterHint is how long the caller should wait before trying again.
func (e *QueueTimeoutError) RetryAfterHint() time.Duration { return e.RetryAfter }

// TenantLimitError: execute was turned away because the calling tenant is
// at one of its bounds: a rate, a concurrency cap or a budget over a window.
// It carries CodeQueueOverflow, which is retryable, and says how long to
// wait. Limit names the bound in words, as "8 executions in flight".
//
//	Tenant "<tenant>" is at its bound of <limit>, so this execution was turned away before it started. Try it again in <retryAfter> ms.
type TenantLimitError struct {
	Tenant     string
	Limit      string        // the bound in words
	RetryAfter time.Duration // how long the caller should wait, in whole milliseconds
}

// NewTenantLimitError composes the text for tenant at limit, with a retry
// after retryAfter (rounded up to whole milliseconds, at least one).
func NewTenantLimitError(tenant, limit string, retryAfter time.Duration) *TenantLimitError {
	return &TenantLimitError{Tenant: tenant, Limit: limit, RetryAfter: wholeMillis(retryAfter)}
}

const (
	tenantLimitPrefix = `Tenant "`
	tenantLimitMiddle = `" is at its bound of `
	tenantLimitSuffix = ", so this execution was turned away before it started."
)

// The bounds a TenantLimitError names, in the words its text uses.

// RateBound is a bound on executions started per second.
func RateBound(perSecond float64) string {
	return countOf(jsvalue.FormatNumber(perSecond), perSecond == 1, "execution started per second", "executions started per second")
}

// InFlightBound is a bound on executions in flight at once.
func InFlightBound(n int) string {
	return countOf(strconv.Itoa(n), n == 1, "execution in flight", "executions in flight")
}

// ExecutionBudget is a budget of n executions per window.
func ExecutionBudget(n int, window time.Duration) string {
	return "a budget of " + countOf(strconv.Itoa(n), n == 1, "execution", "executions") + " per " + window.String()
}

// RunClockBudget is a budget of run-clock time per window.
func RunClockBudget(runClock, window time.Duration) string {
	return "a budget of " + runClock.String() + " of run-clock time per " + window.String()
}

func countOf(n string, one bool, singular, plural string) string {
	if one {
		return n + " " + singular
	}
	return n + " " + plural
}

func (e *TenantLimitError) Error() string {
	return tenantLimitPrefix + e.Tenant + tenantLimitMiddle + e.Limit + tenantLimitSuffix + retrySentence(e.RetryAfter)
}

// FaultCode is CodeQueueOverflow.
func (*TenantLimitError) FaultCode() Code { return CodeQueueOverflow }

// RetryAfterHint is how long the caller should wait before trying again.
func (e *TenantLimitError) RetryAfterHint() time.Duration { return e.RetryAfter }

// RetryHinter is implemented by the faults that say how long to wait before
// trying again: the queue and tenant-bound refusals.
type RetryHinter interface {
	RetryAfterHint() time.Duration
}

// RetryAfterProp is the own property that carries a fault's retry hint on
// the wire, in milliseconds, beside its code.
const RetryAfterProp = "retryAfterMs"

// RetryAfterOf returns how long err says to wait before trying again: the
// hint of a RetryHinter anywhere in its chain, else the retryAfterMs
// property a fault carried across the wire. ok is false when it says
// nothing.
func RetryAfterOf(err error) (d time.Duration, ok bool) {
	var h RetryHinter
	if errors.As(err, &h) {
		return h.RetryAfterHint(), true
	}
	var f *Fault
	if errors.As(err, &f) {
		if ms, isNum := f.Props[RetryAfterProp].(float64); isNum && ms >= 0 && ms <= float64(math.MaxInt64/int64(time.Millisecond)) {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	return 0, false
}

const (
	retryPrefix = " Try it again in "
	retrySuffix = " ms."
)

// retrySentence is the second sentence of the queue and tenant-bound
// refusals: what remains possible, and when.
func retrySentence(d time.Duration) string {
	return retryPrefix + strconv.FormatInt(d.Milliseconds(), 10) + retrySuffix
}

// wholeMillis rounds d up to whole milliseconds, at least one: a hint of
// zero would invite a retry storm.
func wholeMillis(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return time.Millisecond
	}
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return d
}

// ResponseTooLargeError: the server measured the result envelope, or a
// handle invocation's response, above its response limit. It carries
// CodeResponseTooLarge.
//
//	The response is <size> bytes, past the server's response limit of <limit> bytes, so it was not delivered. Return less in one result or response, and fetch the rest in another call.
type ResponseTooLargeError struct {
	Size  int // bytes measured
	Limit int // the server's response limit
}

// NewResponseTooLargeError composes the text for a response of size bytes
// against a limit of limit bytes.
func NewResponseTooLargeError(size, limit int) *ResponseTooLargeError {
	return &ResponseTooLargeError{Size: size, Limit: limit}
}

const (
	responseTooLargePrefix = "The response is "
	responseTooLargeMiddle = " bytes, past the server's response limit of "
	responseTooLargeSuffix = " bytes, so it was not delivered. Return less in one result or response, and fetch the rest in another call."
)

func (e *ResponseTooLargeError) Error() string {
	return responseTooLargePrefix + strconv.Itoa(e.Size) + responseTooLargeMiddle +
		strconv.Itoa(e.Limit) + responseTooLargeSuffix
}

// FaultCode is CodeResponseTooLarge.
func (*ResponseTooLargeError) FaultCode() Code { return CodeResponseTooLarge }

// ToolNotFoundError: a tool call named a tool nobody implements, or the
// request carried no dispatch at all. Its text is pinned by the dispatch
// grammar, which keeps its own shape: `Tool "<tool>" not found`, no period.
//
//	Tool "<tool>" not found
type ToolNotFoundError struct {
	Tool string
}

// NewToolNotFoundError composes the pinned text for tool.
func NewToolNotFoundError(tool string) *ToolNotFoundError { return &ToolNotFoundError{Tool: tool} }

func (e *ToolNotFoundError) Error() string { return `Tool "` + e.Tool + `" not found` }
