package sandbox

import (
	"reflect"
	"testing"

	"github.com/supolka/codemode-gateway/protocol"
)

func TestModuleKinds(t *testing.T) {
	mods := protocol.ModuleMap{
		"other":   {Source: "export default function shout(s) { return s.toUpperCase() + '!' }"},
		"./greet": {Kind: protocol.KindJS, Source: "import shout from 'other'\nexport const greet = (n) => 'hello ' + n\nexport default (n) => shout(greet(n))\nexport * from 'extra'"},
		"extra":   {Source: "export const extra = 'x'; export const count = () => ++state.n; const state = { n: 0 }"},
		"legacy":  {Kind: protocol.KindCJS, Source: "const o = require('other'); module.exports = { twice: (s) => s + s, shout: o.default }"},
		"readme":  {Kind: protocol.KindText, Source: "# hi"},
		"config":  {Kind: protocol.KindJSON, Source: `{"port": 8080, "tags": ["a"]}`},
		"blob":    {Kind: protocol.KindData, Data: []byte{1, 2, 255}},
	}
	j := job(`import loud, { greet, extra } from 'greet'
import * as ns from './extra'
import legacy from 'legacy'
import { twice } from 'legacy'
import readme from 'readme'
import config from 'config'
import blob from 'blob'
async () => {
  ns.count(); ns.count()
  const again = await import('extra')
  return [loud('ada'), greet('bo'), extra, again.count(), legacy.shout('z'), twice('ab'), readme, config.port, config.tags,
    blob instanceof ArrayBuffer, Array.from(new Uint8Array(blob))]
}`)
	j.Modules = mods
	got := result(t, runJob(t, j, nil))
	want := []any{"HELLO ADA!", "hello bo", "x", 3.0, "Z!", "abab", "# hi", 8080.0, []any{"a"}, true, []any{1.0, 2.0, 255.0}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
}

func TestModulesImportEachOtherInCycles(t *testing.T) {
	j := job("import { a } from 'a'\nasync () => a()")
	j.Modules = protocol.ModuleMap{
		"a": {Source: "import { b } from 'b'; export const a = () => 'a' + b(); export const x = 1"},
		"b": {Source: "import { x } from 'a'; export const b = () => 'b' + x"},
	}
	if got := result(t, runJob(t, j, nil)); got != "ab1" {
		t.Fatalf("got %#v", got)
	}
}

func TestModuleNotFoundStatic(t *testing.T) {
	declared := []string{"greeter"}
	j := job("import { greet } from 'greeter'; console.log('lifted')\nimport x from 'missing'\nasync () => { console.log('ran'); return 1 }")
	j.Modules = greeter
	r := runJob(t, j, nil)
	wantError(t, r, protocol.NewModuleNotFoundError("missing", declared).Error())
	if len(r.Logs) != 0 {
		t.Fatalf("code ran before the import failed: %#v", r.Logs)
	}
	// Inside another module, too.
	j = job("import { greet } from 'greeter'\nasync () => 1")
	j.Modules = protocol.ModuleMap{"greeter": {Source: "import 'gone'; export const greet = 1"}}
	wantError(t, runJob(t, j, nil), protocol.NewModuleNotFoundError("gone", []string{"greeter"}).Error())
}

func TestModuleNotFoundDynamicIsCatchable(t *testing.T) {
	j := job("async () => { try { await import('missing') } catch (e) { return [e instanceof Error, e.message] } }")
	j.Modules = greeter
	got := result(t, runJob(t, j, nil))
	want := []any{true, protocol.NewModuleNotFoundError("missing", []string{"greeter"}).Error()}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
	}
	// With no map at all.
	got = result(t, runJob(t, job("async () => import('x').then(() => 'loaded', (e) => e.message)"), nil))
	if got != protocol.NewModuleNotFoundError("x", nil).Error() {
		t.Fatalf("got %#v", got)
	}
}

func TestModuleMapFailures(t *testing.T) {
	j := job("async () => 1")
	j.Modules = protocol.ModuleMap{"./a": {Source: ""}, "a": {Source: ""}}
	_, want := protocol.NormalizeModuleMap(j.Modules)
	if want == nil {
		t.Fatal("NormalizeModuleMap accepted a collision")
	}
	wantError(t, runJob(t, j, nil), want.Error())

	j.Modules = protocol.ModuleMap{"a": {Kind: "wasm", Source: ""}}
	wantError(t, runJob(t, j, nil), protocol.NewUnsupportedModuleKindError("a", "wasm").Error())

	// A module with a syntax error names the module and the place.
	j = job("import { a } from 'bad'\nasync () => a")
	j.Modules = protocol.ModuleMap{"bad": {Source: "export const a = ;"}}
	r := runJob(t, j, nil)
	if !r.HasError || r.Error != `Unexpected token ';' [bad:1:18]` {
		t.Fatalf("error %q", r.Error)
	}
	// Invalid JSON fails at import, in the envelope.
	j = job("import c from 'c'\nasync () => c")
	j.Modules = protocol.ModuleMap{"c": {Kind: protocol.KindJSON, Source: "{nope"}}
	if r := runJob(t, j, nil); !r.HasError {
		t.Fatalf("invalid JSON module imported: %+v", r)
	}
}
