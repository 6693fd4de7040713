package webplatform

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dop251/goja"
)

const derivePrelude = `const hex = (b) => [...new Uint8Array(b)].map(x => x.toString(16).padStart(2, '0')).join('');
	const unhex = (s) => new Uint8Array((s.match(/../g) || []).map(h => parseInt(h, 16)));
	const bytes = (s) => new TextEncoder().encode(s);
	const s = crypto.subtle;
	const pbkdf2 = async (hash, password, salt, iterations, bits) => hex(await s.deriveBits({name: 'PBKDF2', hash, salt, iterations},
		await s.importKey('raw', password, 'PBKDF2', false, ['deriveBits']), bits));
	const hkdf = async (hash, ikm, salt, info, bits) => hex(await s.deriveBits({name: 'HKDF', hash, salt, info},
		await s.importKey('raw', ikm, 'HKDF', false, ['deriveBits']), bits));
`

// Known answers: RFC 6070 for PBKDF2-HMAC-SHA1 (all but the case of 2^24
// iterations, which takes seconds) and RFC 5869 appendix A.1 to A.3 for
// HKDF-SHA-256.
func TestDeriveKnownAnswers(t *testing.T) {
	runCases(t, disabled, []programCase{
		{"PBKDF2-HMAC-SHA1 (RFC 6070)", derivePrelude + `return [
			await pbkdf2('SHA-1', bytes('password'), bytes('salt'), 1, 160),
			await pbkdf2('SHA-1', bytes('password'), bytes('salt'), 2, 160),
			await pbkdf2('SHA-1', bytes('password'), bytes('salt'), 4096, 160),
			await pbkdf2('sha-1', bytes('passwordPASSWORDpassword'), bytes('saltSALTsaltSALTsaltSALTsaltSALTsalt'), 4096, 200),
			await pbkdf2({name: 'SHA-1'}, bytes('pass\0word'), bytes('sa\0lt'), 4096, 128)]`,
			`["0c60c80f961f0e71f3a9b524af6012062fe037a6","ea6c014dc72d6f8ccd1ed92ace1d41f0d8de8957","4b007901b765489abead49d926f721d065a429c1",` +
				`"3d2eec4fe41c849b80c8d83662c0e44a8b291a964cf2f07038","56fa6aa75548099dcc37d7f03425e0c3"]`},
		{"HKDF-SHA-256 (RFC 5869)", derivePrelude + `const range = (a, b) => Uint8Array.from({length: b - a + 1}, (_, i) => a + i);
			return [
			await hkdf('SHA-256', new Uint8Array(22).fill(0x0b), range(0x00, 0x0c), range(0xf0, 0xf9), 42 * 8),
			await hkdf('SHA-256', range(0x00, 0x4f), range(0x60, 0xaf), range(0xb0, 0xff), 82 * 8),
			await hkdf('SHA-256', new Uint8Array(22).fill(0x0b), new Uint8Array(0), new Uint8Array(0), 42 * 8)]`,
			`["3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865",` +
				`"b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71cc30c58179ec3e87c14c01d5c1f3434f1d87",` +
				`"8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"]`},
	})
}

// pbkdf2Key is written out to be interruptible; crypto/pbkdf2 is the
// reference it must agree with.
func TestPBKDF2AgreesWithTheStandardLibrary(t *testing.T) {
	for _, h := range []func() hash.Hash{sha1.New, sha256.New, sha512.New384, sha512.New} {
		for _, c := range []struct{ iterations, n int }{{1, 1}, {2, 64}, {4097, 100}, {3, 129}} {
			want, err := pbkdf2.Key(h, "pass", []byte("salty"), c.iterations, c.n)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pbkdf2Key(context.Background(), h, []byte("pass"), []byte("salty"), c.iterations, c.n)
			if err != nil || hex.EncodeToString(got) != hex.EncodeToString(want) {
				t.Errorf("%d iterations, %d bytes: got %x, %v; want %x", c.iterations, c.n, got, err, want)
			}
		}
	}
}

// deriveCase is one derivation computed in the sandbox and by node's own
// crypto module.
type deriveCase struct {
	alg, hash          string
	secret, salt, info string // hex
	iterations, bits   int
	keyType            string // deriveKey's derivedKeyType as JS, or "" for deriveBits
}

func TestDeriveMatchesNode(t *testing.T) {
	var cases []deriveCase
	for _, h := range []string{"SHA-256", "SHA-384", "SHA-512"} {
		cases = append(cases,
			deriveCase{alg: "PBKDF2", hash: h, secret: "70617373776f7264", salt: "73616c74", iterations: 1, bits: 8},
			deriveCase{alg: "PBKDF2", hash: h, secret: "", salt: "", iterations: 1000, bits: 256},
			deriveCase{alg: "PBKDF2", hash: h, secret: strings.Repeat("ab", 200), salt: strings.Repeat("01", 33), iterations: 7, bits: 1000 * 8},
			deriveCase{alg: "HKDF", hash: h, secret: "0b0b0b", salt: "", info: "", bits: 8},
			deriveCase{alg: "HKDF", hash: h, secret: strings.Repeat("cd", 150), salt: strings.Repeat("02", 200), info: "696e666f", bits: 255 * 8 * hashLen(h)},
			deriveCase{alg: "PBKDF2", hash: h, secret: "6b6579", salt: "00", iterations: 3, bits: 256, keyType: `{name: 'AES-GCM', length: 256}`},
			deriveCase{alg: "HKDF", hash: h, secret: "6b6579", salt: "00", info: "01", bits: 128, keyType: `{name: 'AES-GCM', length: 128}`},
			deriveCase{alg: "HKDF", hash: h, secret: "6b6579", salt: "00", info: "01", bits: hashBlockBits(h), keyType: `{name: 'HMAC', hash: '` + h + `'}`},
			deriveCase{alg: "PBKDF2", hash: h, secret: "6b6579", salt: "00", iterations: 2, bits: 136, keyType: `{name: 'HMAC', hash: 'SHA-1', length: 136}`},
		)
	}

	var program, script strings.Builder
	program.WriteString(derivePrelude + "const out = [];\n")
	script.WriteString("const c = require('node:crypto'); const out = [];\n")
	for _, c := range cases {
		params := fmt.Sprintf("{name: '%s', hash: '%s', salt: unhex('%s'), info: unhex('%s'), iterations: %d}", c.alg, c.hash, c.salt, c.info, c.iterations)
		if c.keyType == "" {
			fmt.Fprintf(&program, "out.push(hex(await s.deriveBits(%s, await s.importKey('raw', unhex('%s'), '%s', false, ['deriveBits']), %d)));\n",
				params, c.secret, c.alg, c.bits)
		} else {
			fmt.Fprintf(&program, "out.push(hex(await s.exportKey('raw', await s.deriveKey(%s, await s.importKey('raw', unhex('%s'), '%s', false, ['deriveKey']), %s, true, ['sign', 'encrypt'].slice(%s.name === 'HMAC' ? 0 : 1, %s.name === 'HMAC' ? 1 : 2)))));\n",
				params, c.secret, c.alg, c.keyType, c.keyType, c.keyType)
		}
		nodeHash := strings.ToLower(strings.ReplaceAll(c.hash, "-", ""))
		if c.alg == "PBKDF2" {
			fmt.Fprintf(&script, "out.push(c.pbkdf2Sync(Buffer.from('%s', 'hex'), Buffer.from('%s', 'hex'), %d, %d, '%s').toString('hex'));\n",
				c.secret, c.salt, c.iterations, c.bits/8, nodeHash)
		} else {
			fmt.Fprintf(&script, "out.push(Buffer.from(c.hkdfSync('%s', Buffer.from('%s', 'hex'), Buffer.from('%s', 'hex'), Buffer.from('%s', 'hex'), %d)).toString('hex'));\n",
				nodeHash, c.secret, c.salt, c.info, c.bits/8)
		}
	}
	program.WriteString("return out")
	script.WriteString("console.log(JSON.stringify(out))")

	nodeOut, err := exec.Command("node", "-e", script.String()).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var want []string
	if err := json.Unmarshal(nodeOut, &want); err != nil || len(want) != len(cases) {
		t.Fatalf("node answered %q: %v", nodeOut, err)
	}
	got, _ := runProgram(t, disabled, program.String())
	var ours []string
	if err := json.Unmarshal([]byte(got.value), &ours); err != nil || len(ours) != len(cases) {
		t.Fatalf("the sandbox answered %s: %v", got, err)
	}
	for i, c := range cases {
		if ours[i] != want[i] {
			t.Errorf("%+v:\n got %s\nwant %s", c, ours[i], want[i])
		}
	}
}

func hashLen(name string) int {
	return map[string]int{"SHA-1": 20, "SHA-256": 32, "SHA-384": 48, "SHA-512": 64}[name]
}

func hashBlockBits(name string) int {
	return map[string]int{"SHA-1": 512, "SHA-256": 512, "SHA-384": 1024, "SHA-512": 1024}[name]
}

// The errors of PBKDF2 and HKDF, each with its Web Crypto name.
func TestDeriveErrors(t *testing.T) {
	pre := derivePrelude + `const pk = await s.importKey('raw', bytes('pw'), 'PBKDF2', false, ['deriveBits', 'deriveKey']);
		const hk = await s.importKey('raw', bytes('pw'), 'HKDF', false, ['deriveBits', 'deriveKey']);
		const p = (extra) => ({name: 'PBKDF2', hash: 'SHA-256', salt: new Uint8Array(4), iterations: 1, ...extra});
		const h = (extra) => ({name: 'HKDF', hash: 'SHA-256', salt: new Uint8Array(4), info: new Uint8Array(0), ...extra});
`
	notBuffer := func(what string) string {
		return rejected("TypeError", what+": expected an ArrayBuffer, a TypedArray or a DataView.")
	}
	runCases(t, disabled, []programCase{
		{"imported keys", pre + `return [pk.type, pk.extractable, pk.algorithm, pk.usages, hk.algorithm,
			(await s.importKey('raw', new Uint8Array(0), 'pbkdf2', false, ['deriveKey'])).usages]`,
			`["secret",false,{"name":"PBKDF2"},["deriveBits","deriveKey"],{"name":"HKDF"},["deriveKey"]]`},
		{"an extractable PBKDF2 key", pre + `await s.importKey('raw', bytes('pw'), 'PBKDF2', true, ['deriveBits'])`,
			rejected("SyntaxError", "PBKDF2 keys cannot be extractable.")},
		{"an extractable HKDF key", pre + `await s.importKey('raw', bytes('pw'), {name: 'HKDF'}, 1, ['deriveBits'])`,
			rejected("SyntaxError", "HKDF keys cannot be extractable.")},
		{"a jwk PBKDF2 key", pre + `await s.importKey('jwk', {kty: 'oct', k: 'cHc'}, 'PBKDF2', false, ['deriveBits'])`,
			rejected("NotSupportedError", "PBKDF2 keys import from raw only, not jwk.")},
		{"an HKDF key that signs", pre + `await s.importKey('raw', bytes('pw'), 'HKDF', false, ['deriveBits', 'sign'])`,
			rejected("SyntaxError", "Cannot create a key with the usage 'sign'.")},
		{"an HKDF key without usages", pre + `await s.importKey('raw', bytes('pw'), 'HKDF', false, [])`,
			rejected("SyntaxError", "A secret key needs at least one usage.")},
		{"a derivation key does not export", pre + `await s.exportKey('raw', pk)`,
			rejected("InvalidAccessError", "The key is not extractable.")},
		{"no PBKDF2 key generation", pre + `await s.generateKey('PBKDF2', false, ['deriveBits'])`,
			rejected("NotSupportedError", "generateKey does not support PBKDF2.")},
		{"a null length", pre + `await s.deriveBits(p(), pk, null)`,
			rejected("OperationError", "deriveBits needs a length, a multiple of 8 bits.")},
		{"no length", pre + `await s.deriveBits(h(), hk)`,
			rejected("OperationError", "deriveBits needs a length, a multiple of 8 bits.")},
		{"a length of 12 bits", pre + `await s.deriveBits(h(), hk, 12)`,
			rejected("OperationError", "The length must be a multiple of 8 bits, not 12.")},
		{"a negative length wraps as Web IDL's unsigned long", pre + `await s.deriveBits(p(), pk, -4)`,
			rejected("OperationError", "The length must be a multiple of 8 bits, not 4294967292.")},
		{"zero length is empty", pre + `return [(await s.deriveBits(p(), pk, 0)).byteLength, (await s.deriveBits(h(), hk, 0)).byteLength]`, `[0,0]`},
		{"zero iterations", pre + `await s.deriveBits(p({iterations: 0}), pk, 256)`,
			rejected("OperationError", "PBKDF2 needs at least one iteration.")},
		{"negative iterations", pre + `await s.deriveBits(p({iterations: -1}), pk, 256)`,
			rejected("TypeError", "PBKDF2 iterations must be an integer from 0 to 4294967295.")},
		{"no iterations", pre + `await s.deriveBits(p({iterations: undefined}), pk, 256)`,
			rejected("TypeError", "PBKDF2: the iterations member is required.")},
		{"no salt", pre + `await s.deriveBits(p({salt: undefined}), pk, 256)`, notBuffer("PBKDF2 salt")},
		{"no info", pre + `await s.deriveBits(h({info: undefined}), hk, 256)`, notBuffer("HKDF info")},
		{"no hash", pre + `await s.deriveBits(h({hash: undefined}), hk, 256)`,
			rejected("TypeError", "HKDF: the hash member is required.")},
		{"an unknown hash", pre + `await s.deriveBits(p({hash: 'MD5'}), pk, 256)`,
			rejected("NotSupportedError", "Unrecognized or unsupported algorithm name: MD5. This runtime's crypto.subtle supports SHA-1, SHA-256, SHA-384, SHA-512 (digest), HMAC, ECDSA P-256 and Ed25519 (sign, verify), AES-GCM (encrypt, decrypt), and PBKDF2 and HKDF (deriveBits, deriveKey).")},
		{"a hash that is no hash", pre + `await s.deriveBits(p({hash: 'HMAC'}), pk, 256)`,
			rejected("NotSupportedError", "HMAC is not a hash algorithm.")},
		{"HKDF past 255 hash lengths", pre + `await s.deriveBits(h(), hk, 255 * 256 + 8)`,
			rejected("OperationError", "HKDF with SHA-256 derives at most 65280 bits.")},
		{"HKDF at 255 hash lengths", pre + `return (await s.deriveBits(h({hash: 'SHA-512'}), hk, 255 * 512)).byteLength`, `16320`},
		{"PBKDF2 past its bound", pre + fmt.Sprintf(`await s.deriveBits(p(), pk, %d)`, MaxPBKDF2Bytes*8+8),
			rejected("OperationError", fmt.Sprintf("This runtime derives at most %d bits with PBKDF2.", MaxPBKDF2Bytes*8))},
		{"PBKDF2 at its bound", pre + fmt.Sprintf(`return (await s.deriveBits(p(), pk, %d)).byteLength`, MaxPBKDF2Bytes*8), fmt.Sprint(MaxPBKDF2Bytes)},
		{"a key of the other algorithm", pre + `await s.deriveBits(p(), hk, 256)`,
			rejected("InvalidAccessError", "The key is for HKDF, not PBKDF2.")},
		{"a key without deriveBits", pre + `await s.deriveBits(h(), await s.importKey('raw', bytes('pw'), 'HKDF', false, ['deriveKey']), 256)`,
			rejected("InvalidAccessError", "The key does not allow 'deriveBits'.")},
		{"a key without deriveKey", pre + `await s.deriveKey(p(), await s.importKey('raw', bytes('pw'), 'PBKDF2', false, ['deriveBits']), {name: 'AES-GCM', length: 128}, false, ['encrypt'])`,
			rejected("InvalidAccessError", "The key does not allow 'deriveKey'.")},
		{"an HMAC key cannot derive", pre + `await s.deriveBits(p(), await s.importKey('raw', bytes('k'), {name: 'HMAC', hash: 'SHA-1'}, false, ['sign']), 256)`,
			rejected("InvalidAccessError", "The key is for HMAC, not PBKDF2.")},
		{"not a key", pre + `await s.deriveBits(p(), {}, 256)`, rejected("TypeError", "The key is not a CryptoKey.")},
		{"deriveBits of another algorithm", pre + `await s.deriveBits({name: 'AES-GCM'}, pk, 256)`,
			rejected("NotSupportedError", "deriveBits does not support AES-GCM.")},
		{"deriveKey to AES-GCM and HMAC", pre + `const a = await s.deriveKey(h(), hk, {name: 'AES-GCM', length: 192}, true, ['encrypt']);
			const m = await s.deriveKey(p(), pk, {name: 'HMAC', hash: 'SHA-384'}, false, ['sign']);
			const n = await s.deriveKey(p(), pk, {name: 'HMAC', hash: 'SHA-1', length: 64}, false, ['verify']);
			return [a.algorithm, a.usages, a.extractable, m.algorithm, m.usages, m.extractable, n.algorithm]`,
			`[{"name":"AES-GCM","length":192},["encrypt"],true,{"name":"HMAC","hash":{"name":"SHA-384"},"length":1024},["sign"],false,{"name":"HMAC","hash":{"name":"SHA-1"},"length":64}]`},
		{"deriveKey to a bad AES length", pre + `await s.deriveKey(h(), hk, {name: 'AES-GCM', length: 100}, true, ['encrypt'])`,
			rejected("OperationError", "AES key length must be 128, 192 or 256 bits.")},
		{"deriveKey to AES without a length", pre + `await s.deriveKey(h(), hk, {name: 'AES-GCM'}, true, ['encrypt'])`,
			rejected("TypeError", "AES-GCM: the length member is required.")},
		{"deriveKey to HMAC of length zero", pre + `await s.deriveKey(h(), hk, {name: 'HMAC', hash: 'SHA-256', length: 0}, true, ['sign'])`,
			rejected("TypeError", "HMAC: the length of a derived key cannot be zero.")},
		{"deriveKey to HMAC without a hash", pre + `await s.deriveKey(h(), hk, {name: 'HMAC'}, true, ['sign'])`,
			rejected("TypeError", "HMAC: the hash member is required.")},
		{"deriveKey to HMAC without usages", pre + `await s.deriveKey(h(), hk, {name: 'HMAC', hash: 'SHA-256'}, true, [])`,
			rejected("SyntaxError", "A secret key needs at least one usage.")},
		{"deriveKey to HMAC that encrypts", pre + `await s.deriveKey(h(), hk, {name: 'HMAC', hash: 'SHA-256'}, true, ['encrypt'])`,
			rejected("SyntaxError", "Cannot create a key with the usage 'encrypt'.")},
		{"deriveKey to ECDSA", pre + `await s.deriveKey(h(), hk, {name: 'ECDSA', namedCurve: 'P-256'}, true, ['sign'])`,
			rejected("NotSupportedError", "deriveKey does not make ECDSA keys.")},
		{"deriveKey to PBKDF2 has no length", pre + `await s.deriveKey(p(), pk, 'PBKDF2', false, ['deriveBits'])`,
			rejected("OperationError", "deriveBits needs a length, a multiple of 8 bits.")},
		{"wrapKey stays unsupported", pre + `await s.wrapKey('raw', pk, pk, 'AES-KW')`,
			rejected("NotSupportedError", "crypto.subtle.wrapKey is not supported by this runtime.")},
	})
}

// A PBKDF2 of 2^32-1 iterations runs off the loop as guest work charged to
// the run, and ends when the run's context does.
func TestPBKDF2StopsWithTheRun(t *testing.T) {
	l := newTestLoop()
	defer l.close()
	l.vm = goja.New()
	if _, err := Install(l.vm, l, disabled); err != nil {
		t.Fatal(err)
	}
	v, err := l.vm.RunString(`(async () => {
		const key = await crypto.subtle.importKey('raw', new Uint8Array(8), 'PBKDF2', false, ['deriveBits']);
		const params = {name: 'PBKDF2', hash: 'SHA-512', salt: new Uint8Array(8), iterations: 4294967295};
		crypto.subtle.deriveBits(params, key, 512);
		crypto.subtle.deriveBits(params, key, 512);
	})()`)
	if err != nil {
		t.Fatal(err)
	}
	if p := v.Export().(*goja.Promise); p.State() != goja.PromiseStateFulfilled {
		t.Fatalf("the program did not settle: %v", p.Result())
	}
	// Both derivations were asked; one at a time runs.
	if l.guest != 1 || l.offLoopRan.Load() > 1 {
		t.Fatalf("guest work open: %d, derivations started: %d; want 1 and at most 1", l.guest, l.offLoopRan.Load())
	}
	deadline := time.Now().Add(10 * time.Second)
	for l.offLoopRan.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the derivation did not start")
		}
		time.Sleep(time.Millisecond)
	}
	l.cancel()
	for l.offLoopRan.Load() != 1 || l.offLoop.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the derivation did not stop with the run: started %d, running %d", l.offLoopRan.Load(), l.offLoop.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
