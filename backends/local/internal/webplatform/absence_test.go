package webplatform

import (
	"testing"

	"github.com/supolka/codemode-gateway/protocol"
)

// The contract's example of declared absences, word for word.
func TestContractTypeofExample(t *testing.T) {
	got, _ := runProgram(t, disabled, `return [typeof caches, typeof CompressionStream, typeof WebSocket]`)
	if want := `["object","function","undefined"]`; got.String() != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestDeclaredAbsences(t *testing.T) {
	notSupported := func(text string) string { return rejected("NotSupportedError", text) }
	runCases(t, disabled, []programCase{
		{"CompressionStream throws on construction", `new CompressionStream('gzip')`,
			notSupported(protocol.NewCompressionAbsentError("CompressionStream").Error())},
		{"DecompressionStream throws on construction", `new DecompressionStream('gzip')`,
			notSupported(protocol.NewCompressionAbsentError("DecompressionStream").Error())},
		{"the thrown value is a DOMException with code 9", `try { new CompressionStream('gzip') } catch (e) { return [e instanceof DOMException, e instanceof Error, e.code, e.name] }`,
			`[true,true,9,"NotSupportedError"]`},
		{"ArrayBuffer.prototype.resize throws synchronously", `new ArrayBuffer(8).resize(16)`,
			notSupported(protocol.NewBufferGrowthAbsentError("ArrayBuffer.prototype.resize").Error())},
		{"resize is a function on the prototype", `return [typeof ArrayBuffer.prototype.resize, Object.keys(ArrayBuffer.prototype).includes('resize')]`,
			`["function",false]`},
		{"SharedArrayBuffer.prototype.grow throws synchronously", `SharedArrayBuffer.prototype.grow.call({}, 16)`,
			notSupported(protocol.NewBufferGrowthAbsentError("SharedArrayBuffer.prototype.grow").Error())},
		{"a SharedArrayBuffer's grow throws the growth text", `new SharedArrayBuffer(8, { maxByteLength: 16 }).grow(16)`,
			notSupported(protocol.NewBufferGrowthAbsentError("SharedArrayBuffer.prototype.grow").Error())},
		{"grow is a function on the prototype", `return [typeof SharedArrayBuffer.prototype.grow, Object.keys(SharedArrayBuffer.prototype).includes('grow')]`,
			`["function",false]`},
		{"SharedArrayBuffer constructs: no absence of its own", `const sab = new SharedArrayBuffer(8);
			const u8 = new Uint8Array(sab); u8[1] = 7; new DataView(sab).setUint8(2, 9);
			return [sab.byteLength, u8[1], new Uint8Array(sab)[2], sab instanceof SharedArrayBuffer, sab instanceof ArrayBuffer,
				Object.prototype.toString.call(sab), sab.growable, sab.maxByteLength]`,
			`[8,7,9,true,false,"[object SharedArrayBuffer]",false,8]`},
		{"a growable SharedArrayBuffer reads its maximum", `const sab = new SharedArrayBuffer(4, { maxByteLength: 32 }); return [sab.byteLength, sab.growable, sab.maxByteLength]`,
			`[4,true,32]`},
		{"slice is a SharedArrayBuffer of the bytes", `const sab = new SharedArrayBuffer(4); new Uint8Array(sab).set([1, 2, 3, 4]);
			const part = sab.slice(1, 3); return [part instanceof SharedArrayBuffer, Array.from(new Uint8Array(part)), part.byteLength]`,
			`[true,[2,3],2]`},
		{"a length past maxByteLength is a RangeError", `try { new SharedArrayBuffer(8, { maxByteLength: 4 }) } catch (e) { return e instanceof RangeError }`, `true`},
		{"SharedArrayBuffer needs new", `try { SharedArrayBuffer(8) } catch (e) { return e instanceof TypeError }`, `true`},
		{"members check their receiver", `try { Object.getOwnPropertyDescriptor(SharedArrayBuffer.prototype, 'byteLength').get.call(new ArrayBuffer(8)) } catch (e) { return e instanceof TypeError }`, `true`},
		{"caches members reject, none throws synchronously", `
			const out = [];
			for (const m of ['open', 'has', 'delete', 'keys', 'match']) {
				const p = caches[m]('x');
				try { await p; out.push('resolved') } catch (e) { out.push(e instanceof DOMException && e.name === 'NotSupportedError' && e.message === ` + "`" + `${'` + protocol.NewCacheStorageAbsentError().Error() + `'}` + "`" + `) }
			}
			return out`, `[true,true,true,true,true]`},
		{"no CacheStorage interface object", `return [typeof CacheStorage, typeof caches.open]`, `["undefined","function"]`},
		{"nothing else is declared", `return [typeof WebSocket, typeof ReadableStream, typeof XMLHttpRequest, typeof localStorage]`,
			`["undefined","undefined","undefined","undefined"]`},
	})
}

func TestGlobalsArePublished(t *testing.T) {
	runCases(t, disabled, []programCase{
		{"every global has its type", `return ['DOMException', 'Event', 'EventTarget', 'AbortController', 'AbortSignal', 'TextEncoder', 'TextDecoder', 'atob', 'btoa',
			'URL', 'URLSearchParams', 'Headers', 'Request', 'Response', 'fetch', 'Blob', 'File', 'FormData', 'structuredClone',
			'Crypto', 'SubtleCrypto', 'CryptoKey', 'CompressionStream', 'DecompressionStream', 'SharedArrayBuffer'].filter(n => typeof globalThis[n] !== 'function').concat([typeof crypto, typeof caches])`,
			`["object","object"]`},
		{"after first touch a global is a plain data property", `URL; const d = Object.getOwnPropertyDescriptor(globalThis, 'URLSearchParams');
			return [typeof d.value, d.writable, d.enumerable, d.configurable, 'get' in d]`, `["function",true,false,true,false]`},
		{"a program may replace a global before touching it", `globalThis.fetch = 1; Request; return [fetch, typeof Request]`, `[1,"function"]`},
		{"a program may delete a global", `delete globalThis.URL; URLSearchParams; return typeof URL`, `"undefined"`},
		{"operations and attributes are enumerable, interface objects are not", `const before = Object.keys(globalThis).sort(); fetch; atob; URL; crypto; structuredClone;
			return [before, Object.keys(globalThis).sort()]`,
			`[["atob","btoa","caches","clearTimeout","crypto","fetch","setTimeout","structuredClone"],["atob","btoa","caches","clearTimeout","crypto","fetch","setTimeout","structuredClone"]]`},
	})
}
