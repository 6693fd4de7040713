package sandbox

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/supolka/codemode-gateway/protocol"
)

func TestConsoleCapture(t *testing.T) {
	r := runJob(t, job(`async () => {
    console.log('plain', 1, -0, true, null, undefined, 10n, Symbol('s'))
    console.warn({ a: 1, b: 'x', 'c-d': [1, 2, { e: null }] })
    console.error(new Error('boom').message, [], {}, [1, [2, [3, [4]]]])
    console.log()
    console.log(function named() {}, () => {}, class K {})
    console.log(new Map([['k', 1]]), new Set([1]), new Uint8Array([1, 2]), new ArrayBuffer(3))
    const c = { n: 1 }; c.self = c
    console.log(c, Object.create(null), new (class Point { constructor() { this.x = 1 } })())
    console.log(new Date(0), /re/g, 'a\nb')
    console.info('quiet'); console.debug('quiet'); console.trace('quiet'); console.table([1]); console.assert(false, 'quiet')
    console.time('t'); console.timeEnd('t'); console.group('g'); console.groupEnd(); console.count(); console.dir({})
    return 'done'
  }`), nil)
	if got := result(t, r); got != "done" {
		t.Fatalf("result %#v", got)
	}
	want := []protocol.LogLine{
		{Level: "log", Text: "plain 1 -0 true null undefined 10n Symbol(s)"},
		{Level: "warn", Text: "{ a: 1, b: 'x', 'c-d': [ 1, 2, { e: null } ] }"},
		{Level: "error", Text: "boom [] {} [ 1, [ 2, [ 3, [Array] ] ] ]"},
		{Level: "log", Text: ""},
		{Level: "log", Text: "[Function: named] [Function (anonymous)] [class K]"},
		{Level: "log", Text: "Map(1) { 'k' => 1 } Set(1) { 1 } Uint8Array(2) [ 1, 2 ] ArrayBuffer { byteLength: 3 }"},
		{Level: "log", Text: "{ n: 1, self: [Circular] } [Object: null prototype] {} Point { x: 1 }"},
		{Level: "log", Text: "1970-01-01T00:00:00.000Z /re/g a\nb"},
	}
	if !reflect.DeepEqual(r.Logs, want) {
		for i := range max(len(r.Logs), len(want)) {
			var g, w protocol.LogLine
			if i < len(r.Logs) {
				g = r.Logs[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				t.Errorf("line %d = %#v, want %#v", i, g, w)
			}
		}
	}
}

func TestConsoleNamespace(t *testing.T) {
	got := result(t, runJob(t, job(`async () => {
    const names = ['assert', 'clear', 'count', 'countReset', 'debug', 'dir', 'dirxml', 'error', 'group',
      'groupCollapsed', 'groupEnd', 'info', 'log', 'table', 'time', 'timeEnd', 'timeLog', 'trace', 'warn']
    return [names.filter((n) => typeof console[n] !== 'function'), typeof console.Console, typeof console.context, typeof console.createTask]
  }`), nil))
	want := []any{[]any{}, "undefined", "undefined", "undefined"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}

// The capture bound: lines are charged their wire size; the line that meets
// the bound is dropped whole and one warn line replaces the rest; the run
// keeps its result.
func TestConsoleCaptureBound(t *testing.T) {
	j := job(`async () => {
    for (let i = 0; i < 5000; i++) console.log('')
    return 'kept'
  }`)
	j.TimeoutMs = 60000
	r := runJob(t, j, nil)
	if got := result(t, r); got != "kept" {
		t.Fatalf("result %#v", got)
	}
	empty := protocol.LogLineWireSize(protocol.LogLine{Level: "log"})
	fit := (protocol.ConsoleCaptureLimit - 1) / empty
	if len(r.Logs) != fit+1 {
		t.Fatalf("%d lines, want %d that fit and the capture message", len(r.Logs), fit)
	}
	last := r.Logs[len(r.Logs)-1]
	if last != (protocol.LogLine{Level: protocol.LogLevelWarn, Text: protocol.ConsoleCaptureMessage}) {
		t.Fatalf("last line %#v", last)
	}
	total := 0
	for _, l := range r.Logs[:len(r.Logs)-1] {
		total += protocol.LogLineWireSize(l)
	}
	if total >= protocol.ConsoleCaptureLimit {
		t.Fatalf("captured %d bytes, bound %d", total, protocol.ConsoleCaptureLimit)
	}

	// A line that lands exactly on the bound meets it and is dropped whole;
	// one byte shorter stays below it and is kept.
	empty = protocol.LogLineWireSize(protocol.LogLine{Level: "log"})
	exact := protocol.ConsoleCaptureLimit - empty
	r = runJob(t, job(`async () => { console.log('x'.repeat(`+strconv.Itoa(exact)+`)); return 1 }`), nil)
	result(t, r)
	if want := []protocol.LogLine{{Level: "warn", Text: protocol.ConsoleCaptureMessage}}; !reflect.DeepEqual(r.Logs, want) {
		t.Fatalf("a line on the bound: %d lines", len(r.Logs))
	}
	r = runJob(t, job(`async () => { console.log('x'.repeat(`+strconv.Itoa(exact-1)+`)); return 1 }`), nil)
	result(t, r)
	if len(r.Logs) != 1 || r.Logs[0].Text != strings.Repeat("x", exact-1) {
		t.Fatalf("a line one byte under the bound: %d lines", len(r.Logs))
	}

	// One line bigger than the bound is dropped whole.
	r = runJob(t, job(`async () => { console.log('a'); console.log('x'.repeat(70000)); console.log('b'); return 1 }`), nil)
	result(t, r)
	want := []protocol.LogLine{{Level: "log", Text: "a"}, {Level: "warn", Text: protocol.ConsoleCaptureMessage}}
	if !reflect.DeepEqual(r.Logs, want) {
		t.Fatalf("logs %#v", r.Logs)
	}
}

func TestLogsKeptOnFailure(t *testing.T) {
	r := runJob(t, job(`async () => { console.log('before'); throw new Error('after') }`), nil)
	wantError(t, r, "after")
	if !reflect.DeepEqual(r.Logs, []protocol.LogLine{{Level: "log", Text: "before"}}) {
		t.Fatalf("logs %#v", r.Logs)
	}
}
