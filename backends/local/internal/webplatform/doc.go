// Package webplatform gives a sandbox's goja runtime the web platform that
// programs written for Workers and browsers expect: fetch and its classes,
// URL, encoding, abort, structuredClone, crypto, and the contract's declared
// absences. Parsing, codecs, cryptography and the network run in Go; the
// classes themselves are JavaScript (platform.js, embedded) over a handful
// of Go natives that only that glue can reach. No Go struct, map or pointer
// is ever handed to the guest.
//
// # Installing
//
// Install(vm, loop, cfg) returns a *Platform and defines the globals in a
// fresh runtime, on the
// loop goroutine, after the runtime's timers exist (AbortSignal.timeout
// keeps the setTimeout it finds then) and before guest code runs. Loop is
// the run's event loop: Post runs a function on the loop goroutine, HostWait
// brackets a wait on the caller's outbound function (the run clock stops
// while it is the only work in flight), GuestWork brackets the guest's own
// work done off the loop (a native request: the clock runs while it is in
// flight, host waits open or not), Context is the run's context and
// Stop ends the run with an uncatchable error. Config carries the run's
// outbound mode, the stub function and the operator's NativeOptions.
//
// Globals other than the declared absences are published lazily: each is an
// accessor on the global object until the first touch of a name in its group,
// which builds the group and turns its names into ordinary writable,
// configurable data properties, enumerable as Web IDL makes them (the
// operations fetch, atob, btoa and structuredClone and the attributes crypto
// and caches are; interface objects such as URL are not). A run that uses none of them pays only for the accessors. A
// name the program assigns or deletes before touching it stays as the
// program left it. The intrinsics the glue relies on are captured when the
// first group is built, so a program that replaces a builtin before that
// breaks only its own use of the platform.
//
// # Globals
//
//   - fetch(input, init): method, URL, headers (in order, names as given) and
//     body bytes go out as protocol.OutboundRequest. Request init honours
//     method (normalized; CONNECT, TRACE, TRACK refused), headers, body,
//     redirect ("follow", "error", "manual") and signal; cache, mode,
//     credentials and the like are accepted and ignored. The response's
//     headers are immutable; type is "basic".
//   - Headers: case-insensitive, insertion-ordered, validated names (tokens)
//     and values (trimmed; no NUL, CR, LF, nothing above U+00FF); iteration
//     sorts and combines as the Fetch Standard says, set-cookie never
//     combined; getSetCookie.
//   - Request, Response: the Body mixin (text, json, arrayBuffer, bytes,
//     blob, formData for urlencoded bodies), bodyUsed, clone, Response.json,
//     Response.error, Response.redirect, status range and null-body checks.
//     body is a minimal ReadableStream: getReader().read() gives the whole
//     body as one Uint8Array chunk, then done; cancel and releaseLock work.
//     ReadableStream is not a global and cannot be constructed.
//   - Blob (parts, size, type, slice, text, arrayBuffer, bytes, stream),
//     File, FormData (string and Blob entries; as a body it is encoded as
//     multipart/form-data; there are no HTML forms).
//   - URL, URLSearchParams: the URL Standard's parser (the
//     github.com/nlnwa/whatwg-url library, held to the web-platform-tests
//     data in url_wpt_test.go), with setters and a live searchParams;
//     URL.canParse and URL.parse. A URL with an authority longer than 2048
//     bytes, longer than 2 MiB, or with a path whose slashes times bytes pass
//     4 Mi is refused as invalid (maxAuthorityBytes, maxURLBytes,
//     maxPathCost): the library's cost grows with their square.
//   - AbortController, AbortSignal (abort, timeout on the run's timers, any,
//     throwIfAborted, onabort), Event and EventTarget (minimal: no
//     propagation path; a listener's exception goes to console.error).
//   - DOMException with names, legacy codes and constants.
//   - TextEncoder (encode, encodeInto); TextDecoder for utf-8, utf-16le and
//     windows-1252 (which the standard's "latin1", "ascii" and
//     "iso-8859-1" labels name), with fatal, ignoreBOM and stream and the
//     Encoding Standard's replacement rules. Other labels throw RangeError.
//   - atob and btoa with the forgiving-base64 rules and
//     InvalidCharacterError.
//   - structuredClone: primitives, wrappers, Date, RegExp, ArrayBuffer and
//     views (sharing one cloned buffer), Map, Set, arrays, plain objects,
//     errors, Blob, cycles. Functions, symbols, promises, weak collections
//     and platform objects throw DataCloneError. A transfer list is refused
//     with DataCloneError. Nesting is bounded by the runtime's call-stack
//     limit.
//   - crypto.getRandomValues (integer typed arrays, at most 65536 bytes,
//     else TypeMismatchError or QuotaExceededError), crypto.randomUUID, and
//     crypto.subtle: digest (SHA-1, SHA-256, SHA-384, SHA-512); HMAC
//     importKey/exportKey (raw, jwk), generateKey, sign, verify; AES-GCM
//     importKey/exportKey (raw, jwk), generateKey, encrypt, decrypt (tags of
//     96 to 128 bits; a tag under 128 bits needs a 12-byte iv); ECDSA on
//     P-256 (signatures as r||s, any SHA hash) and Ed25519: generateKey,
//     sign, verify, importKey (raw and spki public keys, pkcs8 private keys,
//     jwk for both), exportKey (the same formats); PBKDF2 and HKDF:
//     importKey (raw, never extractable), deriveBits, deriveKey to HMAC and
//     AES-GCM keys. Anything else, such as RSA, other curves, wrapKey and
//     unwrapKey, rejects with NotSupportedError. The work runs on the loop
//     goroutine, so it spends the run's bound, except PBKDF2, whose
//     iteration count is the guest's: it runs off the loop, one derivation
//     at a time, inside GuestWork and OffLoop, and stops when the run's
//     context ends (derive.go). Data is read where it is, not copied.
//
// # Outbound modes
//
// protocol.OutboundStub sends each request to Config.Stub inside HostWait,
// so the run clock stops; its answer is rebuilt as a Response (a status
// outside 200 to 599 rejects). protocol.OutboundDisabled, an empty or
// unknown mode, and stub without a function reject every fetch with a
// TypeError carrying OutboundDisabledError's text. protocol.OutboundNative
// uses Go's HTTP client inside GuestWork, so the clock runs, also beside an
// open tool call; with
// NativeOptions.Vetoed (the operator's veto) there is no network at all and
// fetch rejects as in the disabled mode. Every request is
// measured with protocol.OutboundRequestWireSize before it leaves, in every
// mode, and one past protocol.PayloadLimit rejects with
// PayloadTooLargeError's text. At most MaxConcurrentFetches requests of one
// run are in flight; the rest wait their turn in order. An AbortSignal
// cancels the request's context (and closes its host wait) and the fetch
// rejects with the signal's reason. The run's end cancels whatever is open;
// answers that arrive later are dropped.
//
// # Native requests
//
// Every address the client dials is checked after DNS resolution by the
// dialer's Control hook, on the first hop and on every redirect, so neither
// DNS rebinding nor a redirect reaches a denied range. DefaultDeny covers
// loopback, unspecified, private (RFC 1918, fc00::/7), shared, link-local
// (169.254.169.254 among them), multicast, broadcast, reserved and
// documentation ranges, and the IPv6 forms that embed an IPv4 address;
// IPv4-mapped addresses are checked as IPv4. NativeOptions.Deny adds ranges,
// NativeOptions.Allow carves exceptions. The environment's proxy settings
// are ignored, since the check must see the real peer. Redirects follow up
// to MaxRedirects (http and https only); the body is capped at
// MaxResponseBytes after content decoding; each request is bounded by
// RequestTimeout under the run's own context. Errors reach the program as
// TypeErrors with a sentence of their own, never Go's error text.
//
// # Retained handles
//
// Platform.Request builds the Request a retained fetch handler receives from
// a protocol.OutboundRequest, and Platform.Response reads the handler's
// settled answer back as a protocol.OutboundResponse, refusing anything but
// a Response (and Response.error(), a body already read, or an answer past
// PayloadLimit as HandleAnswerWireSize measures it), each with a text of its
// own. Both run on the loop goroutine.
//
// # Declared absences
//
// As the contract declares, each failing with a DOMException named
// NotSupportedError carrying the protocol package's text: CompressionStream
// and DecompressionStream exist and throw on construction;
// ArrayBuffer.prototype.resize and SharedArrayBuffer.prototype.grow exist and
// throw when called; caches is an object with open, has, delete, keys and
// match (no CacheStorage interface object), each rejecting with
// CacheStorageAbsentError's text. goja has no SharedArrayBuffer, so the
// platform gives one for grow to live on, and the rest of it works: a run
// has no second thread, so a shared buffer is an ArrayBuffer's memory under
// SharedArrayBuffer.prototype. WebSocket, and every
// name not listed here, is simply undefined.
package webplatform
