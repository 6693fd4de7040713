package webplatform

import "testing"

// Known answers: FIPS 180 test vectors for "abc", RFC 4231 test case 2 for
// HMAC-SHA-256, and the NIST GCM test case 3 key with an empty message.
func TestCrypto(t *testing.T) {
	hex := `const hex = (b) => [...new Uint8Array(b)].map(x => x.toString(16).padStart(2, '0')).join('');
		const bytes = (s) => new TextEncoder().encode(s);
		const unhex = (s) => new Uint8Array(s.match(/../g).map(h => parseInt(h, 16)));`
	runCases(t, disabled, []programCase{
		{"digests of abc", hex + `return [
			hex(await crypto.subtle.digest('SHA-1', bytes('abc'))),
			hex(await crypto.subtle.digest({name: 'sha-256'}, bytes('abc'))),
			(await crypto.subtle.digest('SHA-384', bytes('abc'))).byteLength,
			hex(await crypto.subtle.digest('SHA-512', bytes('abc'))).slice(0, 16)]`,
			`["a9993e364706816aba3e25717850c26c9cd0d89d","ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",48,"ddaf35a193617aba"]`},
		{"data is read in place from any BufferSource", hex + `const whole = new Uint8Array([0, 97, 98, 99, 0]);
			const key = await crypto.subtle.importKey('raw', bytes('Jefe'), {name: 'HMAC', hash: 'SHA-256'}, false, ['sign', 'verify']);
			const sig = await crypto.subtle.sign('HMAC', key, new DataView(whole.buffer, 1, 3));
			const aes = await crypto.subtle.importKey('raw', new Uint8Array(16), 'AES-GCM', false, ['encrypt', 'decrypt']);
			const iv = new Uint8Array(12);
			const ct = await crypto.subtle.encrypt({name: 'AES-GCM', iv}, aes, whole.subarray(1, 4));
			const padded = new Uint8Array(ct.byteLength + 2); padded.set(new Uint8Array(ct), 1);
			return [hex(await crypto.subtle.digest('SHA-1', whole.subarray(1, 4))), hex(await crypto.subtle.digest('SHA-1', bytes('abc').buffer)),
				hex(await crypto.subtle.digest('SHA-1', new DataView(whole.buffer, 1, 3))),
				hex(sig) === hex(await crypto.subtle.sign('HMAC', key, bytes('abc'))), await crypto.subtle.verify('HMAC', key, sig, new Uint16Array(whole.slice(1, 3).buffer)),
				await crypto.subtle.verify('HMAC', key, sig, whole.subarray(1, 4)),
				new TextDecoder().decode(await crypto.subtle.decrypt({name: 'AES-GCM', iv}, aes, padded.subarray(1, ct.byteLength + 1)))]`,
			`["a9993e364706816aba3e25717850c26c9cd0d89d","a9993e364706816aba3e25717850c26c9cd0d89d","a9993e364706816aba3e25717850c26c9cd0d89d",true,false,true,"abc"]`},
		{"an object posing as an ArrayBuffer is no BufferSource", `await crypto.subtle.digest('SHA-256', Object.create(ArrayBuffer.prototype))`,
			rejected("TypeError", "digest: expected an ArrayBuffer, a TypedArray or a DataView.")},
		{"an array is no BufferSource", `await crypto.subtle.digest('SHA-256', [1, 2, 3])`,
			rejected("TypeError", "digest: expected an ArrayBuffer, a TypedArray or a DataView.")},
		{"unknown digest rejects NotSupportedError", `await crypto.subtle.digest('MD5', new Uint8Array(1))`,
			rejected("NotSupportedError", "Unrecognized or unsupported algorithm name: MD5. This runtime's crypto.subtle supports SHA-1, SHA-256, SHA-384, SHA-512 (digest), HMAC, ECDSA P-256 and Ed25519 (sign, verify), AES-GCM (encrypt, decrypt), and PBKDF2 and HKDF (deriveBits, deriveKey).")},
		{"HMAC sign and verify (RFC 4231 case 2)", hex + `const key = await crypto.subtle.importKey('raw', bytes('Jefe'), {name: 'HMAC', hash: 'SHA-256'}, true, ['sign', 'verify']);
			const sig = await crypto.subtle.sign('HMAC', key, bytes('what do ya want for nothing?'));
			const ok = await crypto.subtle.verify('HMAC', key, sig, bytes('what do ya want for nothing?'));
			const bad = await crypto.subtle.verify('HMAC', key, sig, bytes('something else'));
			return [hex(sig), ok, bad, key.type, key.algorithm.name, key.algorithm.hash.name, key.algorithm.length, key.usages, key instanceof CryptoKey]`,
			`["5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",true,false,"secret","HMAC","SHA-256",32,["sign","verify"],true]`},
		{"key usage is enforced", `const key = await crypto.subtle.importKey('raw', new Uint8Array(8), {name: 'HMAC', hash: 'SHA-1'}, false, ['verify']);
			await crypto.subtle.sign('HMAC', key, new Uint8Array(1))`, rejected("InvalidAccessError", "The key does not allow 'sign'.")},
		{"non-extractable keys do not export", `const key = await crypto.subtle.importKey('raw', new Uint8Array(8), {name: 'HMAC', hash: 'SHA-1'}, false, ['sign']);
			await crypto.subtle.exportKey('raw', key)`, rejected("InvalidAccessError", "The key is not extractable.")},
		{"jwk round trip", `const key = await crypto.subtle.importKey('raw', new Uint8Array([251, 255, 1]), {name: 'HMAC', hash: 'SHA-256'}, true, ['sign']);
			const jwk = await crypto.subtle.exportKey('jwk', key); const again = await crypto.subtle.importKey('jwk', jwk, {name: 'HMAC', hash: 'SHA-256'}, true, ['sign']);
			return [jwk.kty, jwk.k, jwk.alg, [...new Uint8Array(await crypto.subtle.exportKey('raw', again))]]`, `["oct","-_8B","HS256",[251,255,1]]`},
		{"generateKey HMAC default length", `const k = await crypto.subtle.generateKey({name: 'HMAC', hash: 'SHA-512'}, true, ['sign']); return [k.algorithm.length, (await crypto.subtle.exportKey('raw', k)).byteLength]`, `[1024,128]`},
		{"AES-GCM known answer and round trip", hex + `const key = await crypto.subtle.importKey('raw', unhex('feffe9928665731c6d6a8f9467308308'), 'AES-GCM', false, ['encrypt', 'decrypt']);
			const iv = unhex('cafebabefacedbaddecaf888');
			const empty = await crypto.subtle.encrypt({name: 'AES-GCM', iv}, key, new Uint8Array(0));
			const ct = await crypto.subtle.encrypt({name: 'AES-GCM', iv, additionalData: bytes('aad')}, key, bytes('secret'));
			const pt = await crypto.subtle.decrypt({name: 'AES-GCM', iv, additionalData: bytes('aad')}, key, ct);
			return [hex(empty), ct.byteLength, new TextDecoder().decode(pt)]`,
			`["3247184b3c4f69a44dbcd22887bbb418",22,"secret"]`},
		{"AES-GCM tampering fails with OperationError", `const key = await crypto.subtle.generateKey({name: 'AES-GCM', length: 256}, false, ['encrypt', 'decrypt']);
			const iv = crypto.getRandomValues(new Uint8Array(12)); const ct = new Uint8Array(await crypto.subtle.encrypt({name: 'AES-GCM', iv}, key, new Uint8Array([1, 2, 3])));
			ct[0] ^= 1; await crypto.subtle.decrypt({name: 'AES-GCM', iv}, key, ct)`, rejected("OperationError", "The operation failed for an operation-specific reason")},
		{"unsupported algorithms reject NotSupportedError", `const out = [];
			for (const p of [crypto.subtle.generateKey({name: 'ECDSA', namedCurve: 'P-384'}, true, ['sign']), crypto.subtle.generateKey({name: 'RSA-PSS'}, true, ['sign']), crypto.subtle.deriveBits({name: 'ECDH'}, null, 8), crypto.subtle.sign('RSASSA-PKCS1-v1_5', null, new Uint8Array(1))]) {
				try { await p } catch (e) { out.push(e.name) } }
			return out`, `["NotSupportedError","NotSupportedError","NotSupportedError","NotSupportedError"]`},
		{"getRandomValues fills integer arrays and returns them", `const a = new Uint32Array(64); const r = crypto.getRandomValues(a); return [r === a, a.some(x => x !== 0)]`, `[true,true]`},
		{"getRandomValues quota", `crypto.getRandomValues(new Uint8Array(65537))`,
			rejected("QuotaExceededError", "Failed to execute 'getRandomValues' on 'Crypto': The ArrayBufferView's byte length (65537) exceeds the number of bytes of entropy available via this API (65536).")},
		{"getRandomValues accepts exactly 65536 bytes", `return crypto.getRandomValues(new Uint8Array(65536)).length`, `65536`},
		{"getRandomValues refuses floats", `crypto.getRandomValues(new Float64Array(1))`,
			rejected("TypeMismatchError", "Failed to execute 'getRandomValues' on 'Crypto': The provided ArrayBufferView is not an integer array type.")},
		{"randomUUID is a v4 UUID", `const ids = new Set(); for (let i = 0; i < 50; i++) ids.add(crypto.randomUUID());
			return [ids.size, [...ids].every(u => /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(u))]`, `[50,true]`},
	})
}

func TestDOMExceptionEventsAbort(t *testing.T) {
	runCases(t, disabled, []programCase{
		{"DOMException", `const e = new DOMException('m', 'AbortError'); return [e.name, e.message, e.code, e instanceof Error, String(e), DOMException.ABORT_ERR, new DOMException().name, Object.keys(e).length]`,
			`["AbortError","m",20,true,"AbortError: m",20,"Error",0]`},
		{"DOMException options form", `const e = new DOMException('m', {name: 'DataError', cause: 1}); return [e.name, e.cause, e.code]`, `["DataError",1,0]`},
		{"EventTarget", `const t = new EventTarget(); const got = []; const f = (e) => got.push(e.type + (e.target === t));
			t.addEventListener('x', f); t.addEventListener('x', f); t.addEventListener('x', () => got.push('once'), {once: true});
			t.dispatchEvent(new Event('x')); t.dispatchEvent(new Event('x')); t.removeEventListener('x', f); t.dispatchEvent(new Event('x')); return got`,
			`["xtrue","once","xtrue"]`},
		{"AbortController", `const c = new AbortController(); const got = []; c.signal.addEventListener('abort', () => got.push('listener')); c.signal.onabort = () => got.push('onabort');
			c.abort(); c.abort('again'); return [c.signal.aborted, c.signal.reason.name, c.signal.reason instanceof DOMException, got]`,
			`[true,"AbortError",true,["onabort","listener"]]`},
		{"abort with a reason, throwIfAborted", `const c = new AbortController(); c.abort('why'); try { c.signal.throwIfAborted() } catch (e) { return e }`, `"why"`},
		{"AbortSignal is not constructible", `new AbortSignal()`, rejected("TypeError", "Illegal constructor")},
		{"AbortSignal.abort", `const s = AbortSignal.abort(); return [s.aborted, s.reason.name]`, `[true,"AbortError"]`},
		{"AbortSignal.timeout fires a TimeoutError", `const s = AbortSignal.timeout(10); await new Promise(r => s.addEventListener('abort', r)); return [s.aborted, s.reason.name, s.reason.code]`,
			`[true,"TimeoutError",23]`},
		{"AbortSignal.timeout range", `AbortSignal.timeout(-1)`, rejected("TypeError", "Failed to execute 'timeout' on 'AbortSignal': Value is outside the 'unsigned long long' value range.")},
		{"AbortSignal.any", `const a = new AbortController(), b = new AbortController(); const s = AbortSignal.any([a.signal, b.signal]); b.abort('b'); return [s.aborted, s.reason, AbortSignal.any([AbortSignal.abort('pre')]).reason]`,
			`[true,"b","pre"]`},
	})
}

// Known answers: RFC 8032 section 7.1 test 1 for Ed25519, RFC 6979
// appendix A.2.5 (P-256, SHA-256, "sample") for ECDSA verification.
func TestCryptoAsymmetric(t *testing.T) {
	pre := `const hex = (b) => [...new Uint8Array(b)].map(x => x.toString(16).padStart(2, '0')).join('');
		const unhex = (s) => new Uint8Array(s.match(/../g).map(h => parseInt(h, 16)));
		const bytes = (s) => new TextEncoder().encode(s);
		const s = crypto.subtle;`
	runCases(t, disabled, []programCase{
		{"Ed25519 RFC 8032 test 1", pre + `
			const priv = await s.importKey('pkcs8', unhex('302e020100300506032b657004220420' + '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60'), 'Ed25519', true, ['sign']);
			const sig = await s.sign('Ed25519', priv, new Uint8Array(0));
			const pub = await s.importKey('raw', unhex('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a'), {name: 'Ed25519'}, true, ['verify']);
			const jwk = await s.exportKey('jwk', priv);
			return [hex(sig), await s.verify('Ed25519', pub, sig, new Uint8Array(0)), await s.verify('Ed25519', pub, sig, new Uint8Array(1)), priv.type, pub.type, jwk.kty, jwk.crv, jwk.x]`,
			`["e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",true,false,"private","public","OKP","Ed25519","11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"]`},
		{"ECDSA P-256 RFC 6979 signature verifies", pre + `
			const pub = await s.importKey('raw', unhex('04' + '60fed4ba255a9d31c961eb74c6356d68c049b8923b61fa6ce669622e60f29fb6' + '7903fe1008b8bc99a41ae9e95628bc64f2f1b20c2d7e9f5177a3c294d4462299'), {name: 'ECDSA', namedCurve: 'P-256'}, true, ['verify']);
			const sig = unhex('efd48b2aacb6a8fd1140dd9cd45e81d69d2c877b56aaf991c34d0ea84eaf3716' + 'f7cb1c942d657c41d436c7a1b6e29f65f3e900dbb9aff4064dc4ab2f843acda8');
			return [await s.verify({name: 'ECDSA', hash: 'SHA-256'}, pub, sig, bytes('sample')), await s.verify({name: 'ECDSA', hash: 'SHA-256'}, pub, sig, bytes('sampl3')), pub.algorithm.namedCurve]`,
			`[true,false,"P-256"]`},
		{"ECDSA generate, sign, verify, export and import", pre + `
			const {publicKey, privateKey} = await s.generateKey({name: 'ECDSA', namedCurve: 'P-256'}, true, ['sign', 'verify']);
			const alg = {name: 'ECDSA', hash: 'SHA-384'};
			const sig = await s.sign(alg, privateKey, bytes('m'));
			const jwk = await s.exportKey('jwk', publicKey);
			const again = await s.importKey('jwk', jwk, {name: 'ECDSA', namedCurve: 'P-256'}, true, ['verify']);
			const pkcs8 = await s.exportKey('pkcs8', privateKey);
			const priv2 = await s.importKey('pkcs8', pkcs8, {name: 'ECDSA', namedCurve: 'P-256'}, false, ['sign']);
			const spki = await s.exportKey('spki', publicKey);
			const pub3 = await s.importKey('spki', spki, {name: 'ECDSA', namedCurve: 'P-256'}, true, ['verify']);
			const sig2 = await s.sign(alg, priv2, bytes('n'));
			return [sig.byteLength, await s.verify(alg, again, sig, bytes('m')), await s.verify(alg, pub3, sig2, bytes('n')), await s.verify(alg, pub3, sig2, bytes('m')),
				publicKey.usages, privateKey.usages, publicKey.extractable, jwk.kty, jwk.crv, 'd' in jwk]`,
			`[64,true,true,false,["verify"],["sign"],true,"EC","P-256",false]`},
		{"private JWK with a mismatched public part is a DataError", pre + `
			const a = await s.exportKey('jwk', (await s.generateKey({name: 'ECDSA', namedCurve: 'P-256'}, true, ['sign'])).privateKey);
			const b = await s.exportKey('jwk', (await s.generateKey({name: 'ECDSA', namedCurve: 'P-256'}, true, ['sign'])).privateKey);
			await s.importKey('jwk', {...a, d: b.d}, {name: 'ECDSA', namedCurve: 'P-256'}, true, ['sign'])`,
			rejected("DataError", "The JWK is not a valid key for this algorithm.")},
		{"a public key cannot sign", pre + `
			const {publicKey} = await s.generateKey('Ed25519', true, ['sign', 'verify']);
			await s.sign('Ed25519', publicKey, new Uint8Array(1))`, rejected("InvalidAccessError", "The key does not allow 'sign'.")},
		{"a key pair needs a private usage", pre + `await s.generateKey('Ed25519', true, ['verify'])`, rejected("SyntaxError", "A private key needs at least one usage.")},
		{"a raw key of the wrong length", pre + `await s.importKey('raw', new Uint8Array(31), 'Ed25519', true, ['verify'])`,
			rejected("DataError", "The raw public key is not a valid key for this algorithm.")},
		{"a point off the curve", pre + `await s.importKey('raw', new Uint8Array(65).fill(4, 0, 1), {name: 'ECDSA', namedCurve: 'P-256'}, true, ['verify'])`,
			rejected("DataError", "The raw public key is not a valid key for this algorithm.")},
		{"an Ed25519 SPKI is not an ECDSA key", pre + `
			const {publicKey} = await s.generateKey('Ed25519', true, ['sign', 'verify']);
			await s.importKey('spki', await s.exportKey('spki', publicKey), {name: 'ECDSA', namedCurve: 'P-256'}, true, ['verify'])`,
			rejected("DataError", "The SubjectPublicKeyInfo is not a valid key for this algorithm.")},
	})
}
