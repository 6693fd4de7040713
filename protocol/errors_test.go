package protocol

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Each test below pins one declared failure's text. The literals in the
// tests of quoted classes are the contract's texts (docs/protocol.md) with
// the placeholders filled in.

func TestExecutionTimeoutErrorText(t *testing.T) {
	got := NewExecutionTimeoutError(30000).Error()
	want := "Execution timed out at its 30000 ms bound. Do less work per run and return the part that is already finished."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestExecutionTimeoutMatches(t *testing.T) {
	for text, want := range map[string]bool{
		NewExecutionTimeoutError(30000).Error():                   true,
		NewExecutionTimeoutError(0).Error():                       true,
		NewExecutionTimeoutError(MaxSupportedTimeout).Error():     true,
		"Execution timed out at its 5 ms bound.":                  true,
		"Execution timed out at its 5 ms bound.\nmore":            true,
		"Execution timed out":                                     false,
		"Execution timed out.":                                    false,
		"Execution timed out at its 5 ms bound":                   false,
		"Execution timed out at its 5 ms bound.More":              false,
		"Execution timed out at its -5 ms bound.":                 false,
		"Execution timed out at its 05 ms bound.":                 false,
		"Execution timed out at its 5.5 ms bound.":                false,
		"Execution timed out waiting for the database.":           false,
		" Execution timed out at its 5 ms bound.":                 false,
		"Error: Execution timed out at its 5 ms bound.":           false,
		"Execution ran out of memory at its 128 MB limit. Work …": false,
	} {
		if got := MatchesExecutionTimeout(text); got != want {
			t.Errorf("MatchesExecutionTimeout(%q) = %v, want %v", text, got, want)
		}
		if got := (*ExecutionTimeoutError)(nil).Matches(text); got != want {
			t.Errorf("Matches(%q) = %v, want %v", text, got, want)
		}
	}
}

func TestMemoryLimitErrorText(t *testing.T) {
	got := NewMemoryLimitError(128).Error()
	want := "Execution ran out of memory at its 128 MB limit. Work through the data in smaller pieces and keep only what you return."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestOutboundDisabledErrorText(t *testing.T) {
	got := NewOutboundDisabledError().Error()
	want := "Outbound fetch is disabled for this execution. Anything this run needs from outside has to arrive through a tool call."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestModuleNotFoundErrorText(t *testing.T) {
	got := NewModuleNotFoundError("lodash", []string{"util", "greeter"}).Error()
	want := `Module "lodash" is not in the module map. Import one of the names it declares: greeter, util.`
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	got = NewModuleNotFoundError("lodash", nil).Error()
	want = `Module "lodash" is not in the module map. Import one of the names it declares: (none).`
	if got != want {
		t.Errorf("empty map: got %q\nwant %q", got, want)
	}
}

func TestModuleKeyCollisionErrorText(t *testing.T) {
	got := NewModuleKeyCollisionError("greeter", []string{"greeter", "./greeter"}).Error()
	want := `Module names "./greeter" and "greeter" both name the module "greeter", so the module map is ambiguous. Keep one of them, or rename the others so the names differ once a leading "./" is removed.`
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	got = NewModuleKeyCollisionError("greeter", []string{"greeter", "greeter"}).Error()
	want = `Module name "greeter" appears more than once, so the module map is ambiguous. Keep one entry under that name.`
	if got != want {
		t.Errorf("repeated: got %q\nwant %q", got, want)
	}
}

func TestUnsupportedModuleKindErrorText(t *testing.T) {
	got := NewUnsupportedModuleKindError("styles", "css").Error()
	want := `Module "styles" has the unsupported kind "css". Give each module as a source string or as an object with exactly one of js, cjs, text, json or data.`
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestInvalidProviderNameErrorText(t *testing.T) {
	got := NewInvalidProviderNameError("1store").Error()
	want := `Provider name "1store" cannot be declared, because a provider name is made of ASCII letters, digits, _ and $ and does not start with a digit. Rename the provider to a name of that form.`
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestKeywordProviderNameErrorText(t *testing.T) {
	got := NewKeywordProviderNameError("class").Error()
	want := `Provider name "class" cannot be declared, because it is an ECMAScript reserved word in strict code. Rename the provider to a name that is not a reserved word.`
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestReservedProviderNameErrorText(t *testing.T) {
	got := NewReservedProviderNameError("__dispatch").Error()
	want := `Provider name "__dispatch" is reserved by the sandbox scope for the entry scope's dispatch and codec, so a provider cannot shadow it. Rename the provider to a name the scope does not reserve.`
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	got = NewReservedProviderNameError("setTimeout").Error()
	want = `Provider name "setTimeout" is reserved by the sandbox scope for a timer, so a provider cannot shadow it. Rename the provider to a name the scope does not reserve.`
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestDuplicateProviderNameErrorText(t *testing.T) {
	got := NewDuplicateProviderNameError("store").Error()
	want := `Provider name "store" is declared more than once, so the entry module cannot declare it. Merge the tools into one descriptor, or rename one of the providers.`
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestPayloadTooLargeErrorText(t *testing.T) {
	for part, want := range map[PayloadPart]string{
		PartRunAnswer:       "The run's answer is 200000 bytes, past the 131072-byte bound on one part a run sends. Return a smaller value, and fetch the rest in a later run.",
		PartToolCall:        "The tool call is 200000 bytes, past the 131072-byte bound on one part a run sends. Pass smaller arguments, or split the call into several smaller ones.",
		PartOutboundRequest: "The outbound request is 200000 bytes, past the 131072-byte bound on one part a run sends. Send a smaller body, or split it across several requests.",
		PartHandleAnswer:    "The handle answer is 200000 bytes, past the 131072-byte bound on one part a run sends. Answer with a smaller response, or split it across several requests.",
	} {
		if got := NewPayloadTooLargeError(part, 200000, PayloadLimit).Error(); got != want {
			t.Errorf("%s:\ngot  %q\nwant %q", part, got, want)
		}
	}
}

func TestCompressionAbsentErrorText(t *testing.T) {
	got := NewCompressionAbsentError("CompressionStream").Error()
	want := "CompressionStream is absent from this runtime by design. The host applies content coding on the wire, so work with uncompressed bytes."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestBufferGrowthAbsentErrorText(t *testing.T) {
	got := NewBufferGrowthAbsentError("ArrayBuffer.prototype.resize").Error()
	want := "ArrayBuffer.prototype.resize is absent from this runtime because a buffer that grows after it is created is allocated outside the memory limit this execution is metered against. Ask for the length you need when you create the buffer."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestCacheStorageAbsentErrorText(t *testing.T) {
	got := NewCacheStorageAbsentError().Error()
	want := "Cache storage is absent from this runtime because nothing survives an execution. Return what should persist in the result and take it back as an input on the next call."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestHandleNotFoundErrorText(t *testing.T) {
	got := NewHandleNotFoundError("ex-1", "scheduled", []string{"fetch"}).Error()
	want := `Execution "ex-1" has no handle named "scheduled". The granted handles are: fetch.`
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestHandlesClosedErrorText(t *testing.T) {
	err := NewHandlesClosedError("ex-1")
	want := `Execution "ex-1" holds no handles: they were closed, expired at the idle bound, or never granted. Execute again with retainHandles to get a fresh executionId.`
	if err.Error() != want {
		t.Errorf("got  %q\nwant %q", err.Error(), want)
	}
	if CodeOf(err) != CodeHandlesClosed {
		t.Errorf("code %q", CodeOf(err))
	}
}

// A long id (or handle name) is echoed by its first 64 bytes and its
// length; an id of a normal length whole; a cut never splits a character;
// and a text read back from the wire rehydrates to the same text.
func TestLongIDsAreEchoedBounded(t *testing.T) {
	long := "x2." + strings.Repeat("A", 500<<10)
	head := long[:64]
	normal := "x2." + strings.Repeat("b", 150)
	const closed = `" holds no handles: they were closed, expired at the idle bound, or never granted. Execute again with retainHandles to get a fresh executionId.`
	for _, c := range []struct{ got, want string }{
		{NewHandlesClosedError(long).Error(), `Execution "` + head + `… (512003 bytes)` + closed},
		{NewHandlesClosedError(normal).Error(), `Execution "` + normal + closed},
		{NewHandlesClosedError(strings.Repeat("c", 256)).Error(), `Execution "` + strings.Repeat("c", 256) + closed},
		{NewHandlesClosedError(strings.Repeat("c", 257)).Error(), `Execution "` + strings.Repeat("c", 64) + `… (257 bytes)` + closed},
		{NewHandleNotFoundError(long, strings.Repeat("h", 1000), []string{"fetch"}).Error(),
			`Execution "` + head + `… (512003 bytes)" has no handle named "` + strings.Repeat("h", 64) + `… (1000 bytes)". The granted handles are: fetch.`},
		{NewHandleNotFoundError(normal, "scheduled", []string{"fetch"}).Error(),
			`Execution "` + normal + `" has no handle named "scheduled". The granted handles are: fetch.`},
		{Echo(strings.Repeat("a", 63) + "é" + strings.Repeat("a", 300)), strings.Repeat("a", 63) + `… (365 bytes)`},
	} {
		if c.got != c.want {
			t.Errorf("got  %q\nwant %q", c.got, c.want)
		}
	}
	text := NewHandlesClosedError(long).Error()
	if back := Rehydrate(text, CodeHandlesClosed, nil); back.Error() != text || errors.Unwrap(back) == nil || errors.Unwrap(back).Error() != text {
		t.Errorf("rehydrated %q, want the same text with its HandlesClosedError", back)
	}
}

func TestQueueOverflowErrorText(t *testing.T) {
	err := NewQueueOverflowError(64, 250*time.Millisecond)
	want := "The executor's queue is full at its bound of 64 waiting executions, so this one was turned away before it ran. Try it again in 250 ms."
	if err.Error() != want {
		t.Errorf("got  %q\nwant %q", err.Error(), want)
	}
	if CodeOf(err) != CodeQueueOverflow || !CodeOf(err).Retryable() {
		t.Errorf("code %q", CodeOf(err))
	}
	if d, ok := RetryAfterOf(err); !ok || d != 250*time.Millisecond {
		t.Errorf("RetryAfterOf = %v, %v", d, ok)
	}
}

func TestQueueTimeoutErrorText(t *testing.T) {
	err := NewQueueTimeoutError(10*time.Second, 1500*time.Microsecond)
	want := "This execution waited its bound of 10000 ms for room on the executor, so it was turned away before it ran. Try it again in 2 ms."
	if err.Error() != want {
		t.Errorf("got  %q\nwant %q", err.Error(), want)
	}
	if CodeOf(err) != CodeQueueOverflow || !CodeOf(err).Retryable() {
		t.Errorf("code %q", CodeOf(err))
	}
	if d, ok := RetryAfterOf(fmt.Errorf("wrapped: %w", err)); !ok || d != 2*time.Millisecond {
		t.Errorf("RetryAfterOf = %v, %v", d, ok)
	}
}

func TestTenantLimitErrorText(t *testing.T) {
	err := NewTenantLimitError("acme", "8 executions in flight", 0)
	want := `Tenant "acme" is at its bound of 8 executions in flight, so this execution was turned away before it started. Try it again in 1 ms.`
	if err.Error() != want {
		t.Errorf("got  %q\nwant %q", err.Error(), want)
	}
	if CodeOf(err) != CodeQueueOverflow || !CodeOf(err).Retryable() {
		t.Errorf("code %q", CodeOf(err))
	}
	if d, ok := RetryAfterOf(err); !ok || d != time.Millisecond {
		t.Errorf("RetryAfterOf = %v, %v (a hint is never zero)", d, ok)
	}
}

func TestRetryAfterOfSaysNothingForOtherErrors(t *testing.T) {
	for _, err := range []error{nil, errors.New("x"), NewFault(CodeWorkerCrashed, "crashed"), NewHandlesClosedError("e")} {
		if d, ok := RetryAfterOf(err); ok {
			t.Errorf("%v: RetryAfterOf = %v", err, d)
		}
	}
	// A fault that crossed the wire with the property says it.
	f := &Fault{Code: CodeQueueOverflow, Message: "busy", Props: map[string]any{RetryAfterProp: 40.0}}
	if d, ok := RetryAfterOf(f); !ok || d != 40*time.Millisecond {
		t.Errorf("from the property: %v, %v", d, ok)
	}
	for _, bad := range []any{-1.0, "40", 1e300} {
		f.Props[RetryAfterProp] = bad
		if d, ok := RetryAfterOf(f); ok {
			t.Errorf("property %v read as %v", bad, d)
		}
	}
}

func TestResponseTooLargeErrorText(t *testing.T) {
	err := NewResponseTooLargeError(2000000, 1048576)
	want := "The response is 2000000 bytes, past the server's response limit of 1048576 bytes, so it was not delivered. Return less in one result or response, and fetch the rest in another call."
	if err.Error() != want {
		t.Errorf("got  %q\nwant %q", err.Error(), want)
	}
	if CodeOf(err) != CodeResponseTooLarge || CodeOf(err).Retryable() {
		t.Errorf("code %q", CodeOf(err))
	}
}

func TestToolNotFoundErrorText(t *testing.T) {
	got := NewToolNotFoundError("deleteOrders").Error()
	want := `Tool "deleteOrders" not found`
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestCompletedText(t *testing.T) {
	if want := "Execution has already completed."; CompletedText != want {
		t.Errorf("got %q, want %q", CompletedText, want)
	}
}

func TestOutsideEnvelopeText(t *testing.T) {
	if want := "The dispatch answered outside the result envelope."; OutsideEnvelopeText != want {
		t.Errorf("got %q, want %q", OutsideEnvelopeText, want)
	}
	if ErrOutsideEnvelope.Error() != OutsideEnvelopeText {
		t.Errorf("ErrOutsideEnvelope reads %q", ErrOutsideEnvelope)
	}
}

func TestConsoleCaptureMessage(t *testing.T) {
	want := "Console output stopped at this run's 65536-byte capture bound, so the rest of its logging is dropped. The run goes on, and its result still returns."
	if ConsoleCaptureMessage != want {
		t.Errorf("got  %q\nwant %q", ConsoleCaptureMessage, want)
	}
	if !strings.Contains(ConsoleCaptureMessage, " "+strconv.Itoa(ConsoleCaptureLimit)+"-byte ") {
		t.Error("the message does not name ConsoleCaptureLimit")
	}
}

// TestDeclaredFailureGrammar checks the shape every unquoted text shares:
// exactly two sentences, the second saying what remains possible.
func TestDeclaredFailureGrammar(t *testing.T) {
	for _, err := range []error{
		NewModuleKeyCollisionError("a", []string{"a", "./a"}),
		NewUnsupportedModuleKindError("a", "css"),
		NewInvalidProviderNameError("1a"),
		NewKeywordProviderNameError("let"),
		NewReservedProviderNameError("console"),
		NewDuplicateProviderNameError("a"),
		NewPayloadTooLargeError(PartToolCall, 2, 1),
		NewQueueOverflowError(1, time.Second),
		NewQueueTimeoutError(time.Second, time.Second),
		NewTenantLimitError("t", "1 execution in flight", time.Second),
		NewResponseTooLargeError(2, 1),
		&InvalidTimeoutError{Millis: -1},
		NewSourceTooLargeError("program", 2, 1),
		NewSourceNestingError("program", 1, 1),
		NewHostCallBacklogError(1),
		NewHostAnswerTooLargeError(),
		NewNotAResponseError(),
		NewNetworkErrorResponseError(),
		NewDeliveryTooLargeError(DeliveryExecution, 2, 1),
		NewDeliveryTooLargeError(DeliveryHandleRequest, 2, 1),
		NewDrainingError(),
		NewExecutorDrainingError(),
		NewNoExecutorError(),
		NewHandlesUnreachableError(),
		errors.New(ConsoleCaptureMessage),
	} {
		text := err.Error()
		if n := strings.Count(text, ". "); n != 1 || !strings.HasSuffix(text, ".") {
			t.Errorf("%T: not two sentences: %q", err, text)
		}
	}
}

func TestMatchesMemoryLimit(t *testing.T) {
	for text, want := range map[string]bool{
		NewMemoryLimitError(128).Error():                        true,
		"Execution ran out of memory at its 64 MB limit.":       true,
		"Execution ran out of memory at its 64 MB limit":        false,
		"Execution ran out of memory.":                          false,
		"Execution ran out of memory at its 064 MB limit. More": false,
		NewExecutionTimeoutError(5).Error():                     false,
	} {
		if got := MatchesMemoryLimit(text); got != want {
			t.Errorf("MatchesMemoryLimit(%q) = %v, want %v", text, got, want)
		}
	}
}

func TestMatchesPayloadTooLarge(t *testing.T) {
	for text, want := range map[string]bool{
		NewPayloadTooLargeError(PartRunAnswer, 200000, PayloadLimit).Error():       true,
		NewPayloadTooLargeError(PartToolCall, 2, 1).Error():                        true,
		NewPayloadTooLargeError(PartOutboundRequest, 2, 1).Error():                 true,
		NewPayloadTooLargeError(PartHandleAnswer, 2, 1).Error():                    true,
		"The tool call is 2 bytes, past the 1-byte bound on one part a run sends.": true,
		"The tool call is 2 bytes, past the 1-byte bound":                          false,
		"The cake is 2 bytes, past the 1-byte bound on one part a run sends.":      false,
		NewMemoryLimitError(128).Error():                                           false,
	} {
		if got := MatchesPayloadTooLarge(text); got != want {
			t.Errorf("MatchesPayloadTooLarge(%q) = %v, want %v", text, got, want)
		}
	}
}

func TestHostCallBacklogErrorText(t *testing.T) {
	const want = "Too many host calls in flight: at most 4160 may wait at once. Await some before starting more."
	if got := NewHostCallBacklogError(4160).Error(); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
