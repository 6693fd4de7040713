package webplatform

import "testing"

func TestHeaders(t *testing.T) {
	runCases(t, disabled, []programCase{
		{"case-insensitive get, combined values", `const h = new Headers(); h.append('Accept', 'a'); h.append('accept', 'b'); return [h.get('ACCEPT'), h.has('aCcEpT'), h.get('missing')]`,
			`["a, b",true,null]`},
		{"iteration is sorted, lowercased and combined", `const h = new Headers([['X-B', '1'], ['x-a', '2'], ['X-B', '3']]); return [...h]`,
			`[["x-a","2"],["x-b","1, 3"]]`},
		{"set-cookie is never combined", `const h = new Headers(); h.append('Set-Cookie', 'a=1'); h.append('set-cookie', 'b=2'); h.append('x', 'y');
			return [h.getSetCookie(), [...h.keys()], h.get('set-cookie')]`, `[["a=1","b=2"],["set-cookie","set-cookie","x"],"a=1, b=2"]`},
		{"set replaces the first and removes the rest", `const h = new Headers([['a', '1'], ['b', '2'], ['A', '3']]); h.set('a', '9'); return [...h]`, `[["a","9"],["b","2"]]`},
		{"delete", `const h = new Headers({A: '1', b: '2'}); h.delete('a'); return [...h]`, `[["b","2"]]`},
		{"values are trimmed of HTTP whitespace", `const h = new Headers({a: ' \t x y \n'}); return h.get('a')`, `"x y"`},
		{"invalid name", `new Headers({'bad name': 'x'})`, rejected("TypeError", `Failed to execute 'append' on 'Headers': Invalid name: "bad name"`)},
		{"invalid value", `new Headers().set('a', 'x\ny')`, rejected("TypeError", "Failed to execute 'set' on 'Headers': Invalid value")},
		{"non-Latin1 value", `new Headers().set('a', '€')`, rejected("TypeError", "Failed to execute 'set' on 'Headers': Invalid value")},
		{"bad pair", `new Headers([['a', 'b', 'c']])`, rejected("TypeError", "Failed to construct 'Headers': Each header pair must be an iterable [name, value] tuple.")},
		{"null init", `new Headers(null)`, rejected("TypeError", "Failed to construct 'Headers': The provided value is not of type '(record<ByteString, ByteString> or sequence<sequence<ByteString>>)'.")},
		{"forEach and entries/values", `const h = new Headers({b: '2', a: '1'}); const out = []; h.forEach((v, k, o) => out.push(k + '=' + v + (o === h))); return [out, [...h.values()], [...h.entries()].length]`,
			`[["a=1true","b=2true"],["1","2"],2]`},
		{"copy from Headers", `const a = new Headers({x: '1'}); const b = new Headers(a); b.set('x', '2'); return [a.get('x'), b.get('x')]`, `["1","2"]`},
		{"toStringTag", `return [String(new Headers()), Object.prototype.toString.call(new Headers().entries())]`, `["[object Headers]","[object Headers Iterator]"]`},
	})
}

func TestRequestResponse(t *testing.T) {
	runCases(t, disabled, []programCase{
		{"Response basics", `const r = new Response('hi', {status: 201, statusText: 'Created', headers: {'X-A': '1'}});
			return [r.status, r.ok, r.statusText, r.headers.get('x-a'), r.headers.get('content-type'), r.bodyUsed, await r.text(), r.bodyUsed, r.type]`,
			`[201,true,"Created","1","text/plain;charset=UTF-8",false,"hi",true,"default"]`},
		{"defaults", `const r = new Response(); return [r.status, r.ok, r.statusText, r.body, await r.text()]`, `[200,true,"",null,""]`},
		{"body read twice rejects", `const r = new Response('x'); await r.text(); await r.text()`, rejected("TypeError", "Body is unusable: Body has already been read")},
		{"json, arrayBuffer, bytes", `const a = await new Response('{"a":[1]}').json(); const b = await new Response('ab').arrayBuffer(); const c = await new Response(new Uint8Array([1, 2])).bytes();
			return [a, b instanceof ArrayBuffer, b.byteLength, c instanceof Uint8Array, [...c]]`, `[{"a":[1]},true,2,true,[1,2]]`},
		{"json with bad text rejects SyntaxError", `try { await new Response('{').json() } catch (e) { return e instanceof SyntaxError }`, `true`},
		{"Response.json", `const r = Response.json({a: 1}, {status: 202}); return [r.status, r.headers.get('content-type'), await r.text()]`, `[202,"application/json","{\"a\":1}"]`},
		{"Response.json refuses undefined", `Response.json(undefined)`, rejected("TypeError", "Failed to execute 'json' on 'Response': The data is not JSON serializable")},
		{"status range", `new Response('', {status: 600})`, rejected("RangeError", "Failed to construct 'Response': The status provided (600) is outside the range [200, 599].")},
		{"null body status with body", `new Response('x', {status: 204})`, rejected("TypeError", "Failed to construct 'Response': Response with null body status (204) cannot have body")},
		{"clone reads independently", `const r = new Response('abc'); const c = r.clone(); return [await r.text(), await c.text(), c.status]`, `["abc","abc",200]`},
		{"clone of used body throws", `const r = new Response('abc'); await r.text(); r.clone()`, rejected("TypeError", "Failed to execute 'clone': Response body is already used")},
		{"Response.error and redirect", `const e = Response.error(); const r = Response.redirect('https://x/y', 301);
			return [e.type, e.status, r.status, r.headers.get('location')]`, `["error",0,301,"https://x/y"]`},
		{"redirect status check", `Response.redirect('https://x/', 200)`, rejected("RangeError", "Failed to execute 'redirect' on 'Response': Invalid status code 200")},
		{"body stream reads once", `const r = new Response('hey'); const rd = r.body.getReader(); const a = await rd.read(); const b = await rd.read();
			return [new TextDecoder().decode(a.value), a.done, b.done, r.bodyUsed, r.body.locked]`, `["hey",false,true,true,true]`},
		{"body iterates asynchronously as esbuild's for-await lowering looks it up", `const r = new Response('abc');
			const it = r.body[Symbol.for('Symbol.asyncIterator')](); const chunks = [];
			for (let x = await it.next(); !x.done; x = await it.next()) chunks.push(new TextDecoder().decode(x.value));
			return [chunks, r.bodyUsed, r.body.locked]`, `[["abc"],true,false]`},
		{"locked body cannot be read by text()", `const r = new Response('x'); r.body.getReader(); await r.text()`, rejected("TypeError", "Body is unusable: Body has already been read")},
		{"body from URLSearchParams and Blob", `const a = new Response(new URLSearchParams({q: 'a b'})); const b = new Response(new Blob(['x'], {type: 'text/x'}));
			return [a.headers.get('content-type'), await a.text(), b.headers.get('content-type'), await b.text()]`,
			`["application/x-www-form-urlencoded;charset=UTF-8","q=a+b","text/x","x"]`},
		{"Request basics", `const r = new Request('https://x.example/a?b', {method: 'post', body: 'payload', headers: {'X-Y': 'z'}});
			return [r.method, r.url, r.headers.get('x-y'), r.headers.get('content-type'), await r.text(), r.redirect, r.signal.aborted]`,
			`["POST","https://x.example/a?b","z","text/plain;charset=UTF-8","payload","follow",false]`},
		{"custom method keeps its case", `return new Request('https://x/', {method: 'patch'}).method + new Request('https://x/', {method: 'Query'}).method`, `"patchQuery"`},
		{"forbidden method", `new Request('https://x/', {method: 'CONNECT'})`, rejected("TypeError", "Failed to construct 'Request': 'CONNECT' HTTP method is unsupported.")},
		{"GET with body", `new Request('https://x/', {body: 'x'})`, rejected("TypeError", "Failed to construct 'Request': Request with GET/HEAD method cannot have body.")},
		{"relative URL", `new Request('/a')`, rejected("TypeError", "Failed to construct 'Request': Invalid URL: /a")},
		{"credentials in URL", `new Request('https://u:p@x/')`, rejected("TypeError", "Failed to construct 'Request': Request cannot be constructed from a URL that includes credentials: https://u:p@x/")},
		{"Request from Request takes the body", `const a = new Request('https://x/', {method: 'PUT', body: 'b'}); const b = new Request(a); return [a.bodyUsed, b.method, await b.text()]`, `[true,"PUT","b"]`},
		{"Request.signal follows the given signal", `const c = new AbortController(); const r = new Request('https://x/', {signal: c.signal});
			const before = r.signal.aborted; c.abort('stop'); return [before, r.signal.aborted, r.signal.reason, r.signal !== c.signal, new Request(r).signal.aborted]`,
			`[false,true,"stop",true,true]`},
		{"Request signal must be an AbortSignal", `new Request('https://x/', {signal: {}})`, rejected("TypeError", "Failed to construct 'Request': member signal is not of type AbortSignal.")},
		{"Request clone", `const a = new Request('https://x/', {method: 'PUT', body: 'b'}); const c = a.clone(); return [await a.text(), await c.text(), c.url]`, `["b","b","https://x/"]`},
	})
}

func TestBlobFormData(t *testing.T) {
	runCases(t, disabled, []programCase{
		{"Blob parts", `const b = new Blob(['ab', new Uint8Array([99]), new Blob(['d'])], {type: 'Text/Plain'}); return [b.size, b.type, await b.text()]`, `[4,"text/plain","abcd"]`},
		{"slice", `const b = new Blob(['abcdef']); return [await b.slice(1, 3).text(), await b.slice(-2).text(), b.slice(4, 2).size]`, `["bc","ef",0]`},
		{"arrayBuffer and bytes", `const b = new Blob(['hi']); return [(await b.arrayBuffer()).byteLength, [...await b.bytes()]]`, `[2,[104,105]]`},
		{"File", `const f = new File(['x'], 'a.txt', {type: 'text/plain', lastModified: 5}); return [f.name, f.lastModified, f.size, f instanceof Blob]`, `["a.txt",5,1,true]`},
		{"FormData", `const f = new FormData(); f.append('a', '1'); f.append('a', '2'); f.set('b', new Blob(['x']), 'b.bin');
			return [f.getAll('a'), f.get('b').name, f.has('c'), [...f.keys()]]`, `[["1","2"],"b.bin",false,["a","a","b"]]`},
		{"FormData body is multipart", `const f = new FormData(); f.append('k', 'v'); const r = new Response(f); const t = await r.text();
			const ct = r.headers.get('content-type'); const boundary = ct.split('boundary=')[1];
			return [ct.startsWith('multipart/form-data; boundary='), t === '--' + boundary + '\r\nContent-Disposition: form-data; name="k"\r\n\r\nv\r\n--' + boundary + '--\r\n']`, `[true,true]`},
		{"formData() reads urlencoded", `const f = await new Response(new URLSearchParams('a=1&b=2')).formData(); return [f.get('a'), f.get('b')]`, `["1","2"]`},
	})
}

func TestStructuredClone(t *testing.T) {
	runCases(t, disabled, []programCase{
		{"plain data is copied", `const v = {a: [1, 'x', null, true, {b: 2}]}; const c = structuredClone(v); c.a[4].b = 3; return [v, c, c !== v]`,
			`[{"a":[1,"x",null,true,{"b":2}]},{"a":[1,"x",null,true,{"b":3}]},true]`},
		{"Date, Map, Set, RegExp", `const c = structuredClone({d: new Date(5), m: new Map([[1, {x: 1}]]), s: new Set(['a']), r: /a+/gi});
			return [c.d instanceof Date, c.d.getTime(), c.m.get(1).x, c.s.has('a'), c.r.source, c.r.flags]`, `[true,5,1,true,"a+","gi"]`},
		{"typed arrays share one cloned buffer", `const buf = new ArrayBuffer(4); const v = {a: new Uint8Array(buf, 1, 2), b: new Uint16Array(buf, 0, 2)}; v.a[0] = 7;
			const c = structuredClone(v); c.a[0] = 9; return [c.a.buffer === c.b.buffer, c.a.buffer !== buf, new Uint8Array(buf)[1], c.a.byteOffset, c.a.length, c.b.length]`,
			`[true,true,7,1,2,2]`},
		{"cycles", `const v = {name: 'root'}; v.self = v; v.list = [v]; const c = structuredClone(v); return [c.self === c, c.list[0] === c, c !== v]`, `[true,true,true]`},
		{"class instances become plain objects", `class P { constructor() { this.x = 1 } m() {} } const c = structuredClone(new P()); return [Object.getPrototypeOf(c) === Object.prototype, c.x]`, `[true,1]`},
		{"errors", `const c = structuredClone(new RangeError('bad')); return [c instanceof RangeError, c.message]`, `[true,"bad"]`},
		{"functions throw DataCloneError", `try { structuredClone({f() {}}) } catch (e) { return [e instanceof DOMException, e.name, e.code] }`, `[true,"DataCloneError",25]`},
		{"symbols throw DataCloneError", `try { structuredClone(Symbol('s')) } catch (e) { return e.name }`, `"DataCloneError"`},
		{"promises throw DataCloneError", `try { structuredClone(Promise.resolve()) } catch (e) { return e.name }`, `"DataCloneError"`},
		{"primitives", `return [structuredClone(1), structuredClone('s'), structuredClone(null), structuredClone(undefined) === undefined, typeof structuredClone(1n)]`, `[1,"s",null,true,"bigint"]`},
	})
}
