// The web platform's JavaScript side. It runs once in every fresh runtime,
// before guest code, and defines the globals listed in the package docs.
// `host` holds the Go natives of this runtime; it is a parameter of this
// function only, so nothing guest code can reach holds it.
//
// Intrinsics are captured up front, so a program that replaces a builtin
// (Promise.prototype.then, Uint8Array) cannot change how these work.
(function (host) {
  'use strict';
  const g = globalThis;
  const ObjectCtor = Object;
  // native(op, …) is the one Go function behind the glue (see natives in
  // install.go): one function object per runtime instead of one per op.
  const native = host.native;
  const defineProperty = Object.defineProperty;
  // What the guest-visible names need at install time is defined below,
  // under "declared absences" and "publish". Everything else (the shared
  // helpers and each section) is built on first touch of one of its globals:
  // a program that uses none of them does not pay for building them.
  // Captured now so a program that replaces them does not reach inside.
  const texts = host.texts;
  const setTimeoutRef = typeof g.setTimeout === 'function' ? g.setTimeout : undefined;
  const clearTimeoutRef = typeof g.clearTimeout === 'function' ? g.clearTimeout : undefined;
  const consoleError = g.console && typeof g.console.error === 'function' ? g.console.error : undefined;

  let built;
  const core = () => built || (built = build());
  function build() {
    const promiseResolve = (v) => PromiseCtor.resolve(v);
    const promiseReject = (e) => PromiseCtor.reject(e);
    const then = (p, f, r) => promiseThen.call(p, f, r);
    const TypeErrorCtor = TypeError;
    const StringCtor = String;
    const getOwnDesc = Object.getOwnPropertyDescriptor;
    const functionCall = Function.prototype.call;
    // call is fn.call(self, …) through the captured Function.prototype.call.
    // Written out per arity: rest and spread are slow in goja, and this is
    // on every hot path.
    function call(fn, self, a, b, c) {
      switch (arguments.length) {
        case 2: return functionCall.call(fn, self);
        case 3: return functionCall.call(fn, self, a);
        case 4: return functionCall.call(fn, self, a, b);
        default: return functionCall.call(fn, self, a, b, c);
      }
    }
    // The intrinsics below live on prototypes goja builds on first touch;
    // they are captured when the first section loads, so a run that uses
    // none of the platform does not pay for building them.
    let getPrototypeOf, freeze, PromiseCtor, promiseThen, RangeErrorCtor, ErrorCtor, jsonParse, jsonStringify, SymbolIterator, SymbolToStringTag, arrayFrom, isArray, reflectOwnKeys, stringReplace, stringToLower, stringToUpper, arrayPush, arraySort, arrayJoin, arraySplice;
    let INTERNAL;
    let ArrayBufferCtor, U8, isView, DataViewCtor, MapCtor, SetCtor, WeakMapCtor, typedArrayProto, taBuffer, taByteOffset, taByteLength, taTag, dvBuffer, dvByteOffset, dvByteLength, abByteLength, abSlice, u8Set, u8Slice, mapGet, mapSet, mapHas, weakGet, weakSet, weakHas, mapEntries, setValues, mapAdd, setAdd, dateGetTime, DateCtor, RegExpCtor, regexpTest;
    let intrinsicsReady = false;
    const initIntrinsics = () => {
      if (intrinsicsReady) return;
      getPrototypeOf = Object.getPrototypeOf;
      freeze = Object.freeze;
      PromiseCtor = Promise;
      promiseThen = Promise.prototype.then;
      RangeErrorCtor = RangeError;
      ErrorCtor = Error;
      jsonParse = JSON.parse;
      jsonStringify = JSON.stringify;
      SymbolIterator = Symbol.iterator;
      SymbolToStringTag = Symbol.toStringTag;
      arrayFrom = Array.from;
      isArray = Array.isArray;
      reflectOwnKeys = Reflect.ownKeys;
      stringReplace = String.prototype.replace;
      stringToLower = String.prototype.toLowerCase;
      stringToUpper = String.prototype.toUpperCase;
      arrayPush = Array.prototype.push;
      arraySort = Array.prototype.sort;
      arrayJoin = Array.prototype.join;
      arraySplice = Array.prototype.splice;
      // Guards the constructors the platform makes itself.
      INTERNAL = Symbol('internal');
      ArrayBufferCtor = ArrayBuffer;
      U8 = Uint8Array;
      isView = ArrayBuffer.isView;
      DataViewCtor = DataView;
      MapCtor = Map;
      SetCtor = Set;
      WeakMapCtor = WeakMap;
      typedArrayProto = getPrototypeOf(U8.prototype);
      taBuffer = getOwnDesc(typedArrayProto, 'buffer').get;
      taByteOffset = getOwnDesc(typedArrayProto, 'byteOffset').get;
      taByteLength = getOwnDesc(typedArrayProto, 'byteLength').get;
      taTag = getOwnDesc(typedArrayProto, SymbolToStringTag).get;
      dvBuffer = getOwnDesc(DataViewCtor.prototype, 'buffer').get;
      dvByteOffset = getOwnDesc(DataViewCtor.prototype, 'byteOffset').get;
      dvByteLength = getOwnDesc(DataViewCtor.prototype, 'byteLength').get;
      abByteLength = getOwnDesc(ArrayBufferCtor.prototype, 'byteLength').get;
      abSlice = ArrayBufferCtor.prototype.slice;
      u8Set = U8.prototype.set;
      u8Slice = U8.prototype.slice;
      mapGet = MapCtor.prototype.get;
      mapSet = MapCtor.prototype.set;
      mapHas = MapCtor.prototype.has;
      weakGet = WeakMapCtor.prototype.get;
      weakSet = WeakMapCtor.prototype.set;
      weakHas = WeakMapCtor.prototype.has;
      mapEntries = MapCtor.prototype.entries;
      setValues = SetCtor.prototype.values;
      mapAdd = MapCtor.prototype.set;
      setAdd = SetCtor.prototype.add;
      dateGetTime = Date.prototype.getTime;
      DateCtor = Date;
      RegExpCtor = RegExp;
      regexpTest = RegExp.prototype.test;
      // Last: a throw above (a builtin the program took away) leaves the
      // capture to be tried again.
      intrinsicsReady = true;
    };
    // section makes a lazily evaluated part of the platform.
    // section makes a lazily evaluated part of the platform: load() builds
    // it once, peek() tells whether it was built.
    const section = (f) => {
      let v;
      const load = () => { if (v === undefined) { initIntrinsics(); v = f(); } return v; };
      load.peek = () => v;
      return load;
    };
    const report = (e) => { if (consoleError) { try { call(consoleError, g.console, e); } catch { } } };

    const lower = (s) => call(stringToLower, s);
    const upper = (s) => call(stringToUpper, s);
    const test = (re, s) => call(regexpTest, re, s);
    const push = (a, v) => call(arrayPush, a, v);

    const setTag = (ctor, tag) =>
      defineProperty(ctor.prototype, SymbolToStringTag, { value: tag, configurable: true });
    // defineMembers copies the methods and accessors of an object literal
    // onto a prototype, in the literal's order. A literal names its accessors
    // ("get href") as a class body would, and lets a table generate members.
    const defineMembers = (proto, members, enumerable) => {
      for (const k of reflectOwnKeys(members)) {
        const d = getOwnDesc(members, k);
        d.enumerable = enumerable;
        defineProperty(proto, k, d);
      }
    };
    const requireArgs = (n, got, what) => {
      if (got < n) throw new TypeErrorCtor(`Failed to execute '${what}': ${n} argument${n > 1 ? 's' : ''} required, but only ${got} present.`);
    };

    // ---- byte helpers ----

    // Asked of Go: probing with the byteLength getter throws a TypeError
    // whose message goja builds by stringifying v, element by element for
    // a typed array or an array (seconds for 32 MB, and not interruptible).
    const isArrayBuffer = (v) => typeof v === 'object' && v !== null && native('isArrayBuffer', v);
    const viewKind = (v) => {
      if (typeof v !== 'object' || v === null || !isView(v)) return undefined;
      return call(taTag, v) === undefined ? 'DataView' : call(taTag, v);
    };
    // viewRange is [buffer, byteOffset, byteLength] of a view.
    const viewRange = (v) => viewKind(v) === 'DataView'
      ? [call(dvBuffer, v), call(dvByteOffset, v), call(dvByteLength, v)]
      : [call(taBuffer, v), call(taByteOffset, v), call(taByteLength, v)];
    // copyBytes returns a fresh Uint8Array with the bytes of a BufferSource,
    // or undefined when v is not one.
    const copyBytes = (v) => {
      if (isArrayBuffer(v)) return new U8(call(abSlice, v, 0));
      if (viewKind(v) !== undefined) {
        const [buf, off, len] = viewRange(v);
        return new U8(call(abSlice, buf, off, off + len));
      }
      return undefined;
    };
    const notBufferSource = (what) => new TypeErrorCtor(`${what}: expected an ArrayBuffer, a TypedArray or a DataView.`);
    const bufferSource = (v, what) => {
      const b = copyBytes(v);
      if (b === undefined) throw notBufferSource(what);
      return b;
    };
    // sourceRange is [buffer, byteOffset, byteLength] of a BufferSource, for
    // a native that reads the bytes where they are: one that is done before
    // guest code runs again, so nothing can change them under it.
    const sourceRange = (v, what) => {
      if (viewKind(v) !== undefined) return viewRange(v);
      if (isArrayBuffer(v)) return [v, 0, call(abByteLength, v)];
      throw notBufferSource(what);
    };
    // abOf is a standalone ArrayBuffer holding the bytes of a Uint8Array.
    const abOf = (u8) => {
      const off = call(taByteOffset, u8), len = call(taByteLength, u8);
      return call(abSlice, call(taBuffer, u8), off, off + len);
    };
    const concatBytes = (chunks) => {
      let n = 0;
      for (const c of chunks) n += call(taByteLength, c);
      const out = new U8(n);
      let at = 0;
      for (const c of chunks) { call(u8Set, out, c, at); at += call(taByteLength, c); }
      return out;
    };
    const utf8Encode = (s) => new U8(native('utf8Encode', StringCtor(s)));
    const utf8Decode = (u8) => native('utf8Decode', abOf(u8), false, false)[0];

    function parsePairs(s) {
      const flat = native('formParse', s);
      const out = [];
      for (let i = 0; i + 1 < flat.length; i += 2) push(out, [flat[i], flat[i + 1]]);
      return out;
    }

    // listIterator iterates a list that may change under it (the standards'
    // iterators are live), mapping each item.
    let iteratorProtos;
    function listIterator(getList, map, tag) {
      iteratorProtos ??= new MapCtor();
      let proto = call(mapGet, iteratorProtos, tag);
      if (!proto) {
        proto = ObjectCtor.create(getPrototypeOf(getPrototypeOf([][SymbolIterator]())), {
          [SymbolToStringTag]: { value: tag, configurable: true },
        });
        call(mapSet, iteratorProtos, tag, proto);
      }
      let i = 0;
      const it = ObjectCtor.create(proto);
      defineProperty(it, 'next', {
        value: function next() {
          const list = getList();
          if (i >= list.length) return { value: undefined, done: true };
          return { value: map(list[i++]), done: false };
        },
        configurable: true, writable: true,
      });
      return it;
    }

    const dom = section(() => {
      // ---- DOMException ----

      const legacyCodes = {
        IndexSizeError: 1, HierarchyRequestError: 3, WrongDocumentError: 4, InvalidCharacterError: 5,
        NoModificationAllowedError: 7, NotFoundError: 8, NotSupportedError: 9, InUseAttributeError: 10,
        InvalidStateError: 11, SyntaxError: 12, InvalidModificationError: 13, NamespaceError: 14,
        InvalidAccessError: 15, TypeMismatchError: 17, SecurityError: 18, NetworkError: 19, AbortError: 20,
        URLMismatchError: 21, QuotaExceededError: 22, TimeoutError: 23, InvalidNodeTypeError: 24, DataCloneError: 25,
      };
      const legacyConstants = [
        ['INDEX_SIZE_ERR', 1], ['DOMSTRING_SIZE_ERR', 2], ['HIERARCHY_REQUEST_ERR', 3], ['WRONG_DOCUMENT_ERR', 4],
        ['INVALID_CHARACTER_ERR', 5], ['NO_DATA_ALLOWED_ERR', 6], ['NO_MODIFICATION_ALLOWED_ERR', 7],
        ['NOT_FOUND_ERR', 8], ['NOT_SUPPORTED_ERR', 9], ['INUSE_ATTRIBUTE_ERR', 10], ['INVALID_STATE_ERR', 11],
        ['SYNTAX_ERR', 12], ['INVALID_MODIFICATION_ERR', 13], ['NAMESPACE_ERR', 14], ['INVALID_ACCESS_ERR', 15],
        ['VALIDATION_ERR', 16], ['TYPE_MISMATCH_ERR', 17], ['SECURITY_ERR', 18], ['NETWORK_ERR', 19],
        ['ABORT_ERR', 20], ['URL_MISMATCH_ERR', 21], ['QUOTA_EXCEEDED_ERR', 22], ['TIMEOUT_ERR', 23],
        ['INVALID_NODE_TYPE_ERR', 24], ['DATA_CLONE_ERR', 25],
      ];
      class DOMException extends ErrorCtor {
        #name; #message;
        constructor(message = '', options = 'Error') {
          super();
          this.#message = StringCtor(message);
          if (typeof options === 'object' && options !== null) {
            this.#name = options.name === undefined ? 'Error' : StringCtor(options.name);
            if ('cause' in options) defineProperty(this, 'cause', { value: options.cause, writable: true, configurable: true });
          } else {
            this.#name = StringCtor(options);
          }
        }
        get name() { return this.#name; }
        get message() { return this.#message; }
        get code() { return legacyCodes[this.#name] || 0; }
      }
      for (const [k, v] of legacyConstants) {
        defineProperty(DOMException, k, { value: v, enumerable: true });
        defineProperty(DOMException.prototype, k, { value: v, enumerable: true });
      }
      const domError = (message, name) => new DOMException(message, name);

      // ---- Event, EventTarget ----

      let eventInternals;
      class Event {
        #type; #bubbles; #cancelable; #defaultPrevented = false; #target = null; #stop = false; #timeStamp;
        constructor(type, init = undefined) {
          requireArgs(1, arguments.length, 'Event');
          this.#type = StringCtor(type);
          this.#bubbles = !!(init && init.bubbles);
          this.#cancelable = !!(init && init.cancelable);
          this.#timeStamp = DateCtor.now();
        }
        get type() { return this.#type; }
        get target() { return this.#target; }
        get currentTarget() { return this.#target; }
        get srcElement() { return this.#target; }
        get bubbles() { return this.#bubbles; }
        get cancelable() { return this.#cancelable; }
        get defaultPrevented() { return this.#defaultPrevented; }
        get timeStamp() { return this.#timeStamp; }
        get isTrusted() { return false; }
        get eventPhase() { return this.#target === null ? 0 : 2; }
        composedPath() { return this.#target === null ? [] : [this.#target]; }
        preventDefault() { if (this.#cancelable) this.#defaultPrevented = true; }
        stopPropagation() { }
        stopImmediatePropagation() { this.#stop = true; }
        static {
          eventInternals = { setTarget: (e, t) => { e.#target = t; }, stopped: (e) => e.#stop };
        }
      }
      setTag(Event, 'Event');

      class EventTarget {
        #listeners = new MapCtor();
        addEventListener(type, listener, options = undefined) {
          requireArgs(2, arguments.length, 'addEventListener');
          if (listener === null || listener === undefined) return;
          type = StringCtor(type);
          const once = typeof options === 'object' && options !== null && !!options.once;
          const signal = typeof options === 'object' && options !== null ? options.signal : undefined;
          if (signal !== undefined && signal.aborted) return;
          let list = call(mapGet, this.#listeners, type);
          if (!list) { list = []; call(mapSet, this.#listeners, type, list); }
          for (const l of list) if (l.listener === listener) return;
          const entry = { listener, once, removed: false };
          push(list, entry);
          if (signal !== undefined) {
            signal.addEventListener('abort', () => this.removeEventListener(type, listener));
          }
        }
        removeEventListener(type, listener) {
          requireArgs(2, arguments.length, 'removeEventListener');
          const list = call(mapGet, this.#listeners, StringCtor(type));
          if (!list) return;
          for (let i = 0; i < list.length; i++) {
            if (list[i].listener === listener) { list[i].removed = true; call(arraySplice, list, i, 1); return; }
          }
        }
        dispatchEvent(event) {
          requireArgs(1, arguments.length, 'dispatchEvent');
          if (!(event instanceof Event)) throw new TypeErrorCtor("Failed to execute 'dispatchEvent': parameter 1 is not of type 'Event'.");
          eventInternals.setTarget(event, this);
          const list = call(mapGet, this.#listeners, event.type);
          if (list) {
            for (const entry of [...list]) {
              if (entry.removed) continue;
              if (entry.once) this.removeEventListener(event.type, entry.listener);
              try {
                const l = entry.listener;
                if (typeof l === 'function') call(l, this, event);
                else if (l && typeof l.handleEvent === 'function') l.handleEvent(event);
              } catch (e) {
                // A listener's exception is reported, never thrown to the
                // dispatcher, as the DOM Standard says.
                report(e);
              }
              if (eventInternals.stopped(event)) break;
            }
          }
          return !event.defaultPrevented;
        }
      }
      setTag(EventTarget, 'EventTarget');

      // ---- AbortController, AbortSignal ----

      let signalAbort, signalAddAlgorithm;
      class AbortSignal extends EventTarget {
        #aborted = false; #reason = undefined; #onabort = null; #algorithms = [];
        constructor(token) {
          if (token !== INTERNAL) throw new TypeErrorCtor('Illegal constructor');
          super();
        }
        get aborted() { return this.#aborted; }
        get reason() { return this.#reason; }
        get onabort() { return this.#onabort; }
        set onabort(v) { this.#onabort = typeof v === 'function' || (typeof v === 'object' && v !== null) ? v : null; }
        throwIfAborted() { if (this.#aborted) throw this.#reason; }
        static abort(reason = undefined) {
          const s = new AbortSignal(INTERNAL);
          s.#aborted = true;
          s.#reason = reason === undefined ? domError('This operation was aborted', 'AbortError') : reason;
          return s;
        }
        static timeout(ms) {
          requireArgs(1, arguments.length, 'AbortSignal.timeout');
          const n = +ms;
          if (!(n >= 0) || n === Infinity || n > Number.MAX_SAFE_INTEGER) {
            throw new TypeErrorCtor("Failed to execute 'timeout' on 'AbortSignal': Value is outside the 'unsigned long long' value range.");
          }
          if (setTimeoutRef === undefined) throw domError('AbortSignal.timeout needs timers, which this runtime lacks.', 'NotSupportedError');
          const s = new AbortSignal(INTERNAL);
          call(setTimeoutRef, g, () => signalAbort(s, domError('The operation was aborted due to timeout', 'TimeoutError')), n);
          return s;
        }
        static any(signals) {
          requireArgs(1, arguments.length, 'AbortSignal.any');
          const list = [...signals];
          for (const x of list) if (!(x instanceof AbortSignal)) throw new TypeErrorCtor("Failed to execute 'any' on 'AbortSignal': parameter 1 is not a sequence of 'AbortSignal'.");
          const s = new AbortSignal(INTERNAL);
          for (const x of list) if (x.#aborted) { s.#aborted = true; s.#reason = x.#reason; return s; }
          for (const x of list) push(x.#algorithms, () => signalAbort(s, x.#reason));
          return s;
        }
        static {
          signalAbort = (s, reason) => {
            if (s.#aborted) return;
            s.#aborted = true;
            s.#reason = reason === undefined ? domError('This operation was aborted', 'AbortError') : reason;
            const algorithms = s.#algorithms;
            s.#algorithms = [];
            for (const a of algorithms) { try { a(); } catch (e) { report(e); } }
            const ev = new Event('abort');
            const h = s.#onabort;
            if (h !== null) {
              try { if (typeof h === 'function') call(h, s, ev); else if (typeof h.handleEvent === 'function') h.handleEvent(ev); } catch (e) { report(e); }
            }
            s.dispatchEvent(ev);
          };
          signalAddAlgorithm = (s, fn) => { if (!s.#aborted) push(s.#algorithms, fn); };
        }
      }
      setTag(AbortSignal, 'AbortSignal');

      class AbortController {
        #signal = new AbortSignal(INTERNAL);
        get signal() { return this.#signal; }
        abort(reason = undefined) { signalAbort(this.#signal, reason); }
      }
      setTag(AbortController, 'AbortController');
      return { DOMException, domError, Event, EventTarget, AbortSignal, AbortController, signalAbort, signalAddAlgorithm };
    });

    const encoding = section(() => {
      const { domError } = dom();
      // ---- TextEncoder, TextDecoder ----

      class TextEncoder {
        get encoding() { return 'utf-8'; }
        encode(input = '') { return utf8Encode(input); }
        encodeInto(source, destination) {
          requireArgs(2, arguments.length, 'encodeInto');
          if (viewKind(destination) !== 'Uint8Array') throw new TypeErrorCtor("Failed to execute 'encodeInto' on 'TextEncoder': parameter 2 is not of type 'Uint8Array'.");
          const [buf, off, len] = viewRange(destination);
          const [read, written] = native('utf8EncodeInto', StringCtor(source), buf, off, len);
          return { read, written };
        }
      }
      setTag(TextEncoder, 'TextEncoder');

      // The Encoding Standard's labels of the three encodings this runtime
      // decodes.
      const labels = {
        'utf-8': ['unicode-1-1-utf-8', 'unicode11utf8', 'unicode20utf8', 'utf-8', 'utf8', 'x-unicode20utf8'],
        'utf-16le': ['csunicode', 'iso-10646-ucs-2', 'ucs-2', 'unicode', 'unicodefeff', 'utf-16', 'utf-16le'],
        'windows-1252': ['ansi_x3.4-1968', 'ascii', 'cp1252', 'cp819', 'csisolatin1', 'ibm819', 'iso-8859-1', 'iso-ir-100',
          'iso8859-1', 'iso88591', 'iso_8859-1', 'iso_8859-1:1987', 'l1', 'latin1', 'us-ascii', 'windows-1252', 'x-cp1252'],
      };
      class TextDecoder {
        #encoding; #fatal; #ignoreBOM; #pending = new U8(0); #bomDone = false;
        constructor(label = 'utf-8', options = undefined) {
          const l = lower(call(stringReplace, StringCtor(label), /^[\t\n\f\r ]+|[\t\n\f\r ]+$/g, ''));
          this.#encoding = undefined;
          for (const name of ['utf-8', 'utf-16le', 'windows-1252']) if (labels[name].includes(l)) this.#encoding = name;
          if (this.#encoding === undefined) {
            throw new RangeErrorCtor(`Failed to construct 'TextDecoder': The encoding label provided ('${StringCtor(label)}') is not supported by this runtime, which decodes utf-8, utf-16le and windows-1252.`);
          }
          this.#fatal = !!(options && options.fatal);
          this.#ignoreBOM = !!(options && options.ignoreBOM);
        }
        get encoding() { return this.#encoding; }
        get fatal() { return this.#fatal; }
        get ignoreBOM() { return this.#ignoreBOM; }
        decode(input = undefined, options = undefined) {
          const stream = !!(options && options.stream);
          let bytes = input === undefined ? new U8(0) : bufferSource(input, "Failed to execute 'decode' on 'TextDecoder'");
          if (call(taByteLength, this.#pending) > 0) bytes = concatBytes([this.#pending, bytes]);
          const r = native('utf8Decode', abOf(bytes), this.#fatal, stream, this.#encoding);
          if (r === null) {
            this.#pending = new U8(0);
            this.#bomDone = false;
            throw new TypeErrorCtor(`Failed to execute 'decode' on 'TextDecoder': The encoded data was not valid ${this.#encoding}.`);
          }
          let [out, consumed] = r;
          this.#pending = call(u8Slice, bytes, consumed);
          // windows-1252 has no BOM; the other two drop a leading U+FEFF.
          if (!this.#ignoreBOM && !this.#bomDone && out.length > 0) {
            if (out.charCodeAt(0) === 0xFEFF && this.#encoding !== 'windows-1252') out = out.slice(1);
            this.#bomDone = true;
          }
          if (!stream) { this.#pending = new U8(0); this.#bomDone = false; }
          return out;
        }
      }
      setTag(TextDecoder, 'TextDecoder');

      // ---- atob, btoa ----

      const notLatin1 = /[^\u0000-\u00ff]/;
      function btoa(data) {
        requireArgs(1, arguments.length, 'btoa');
        const s = StringCtor(data);
        if (test(notLatin1, s)) throw domError("Failed to execute 'btoa': The string to be encoded contains characters outside of the Latin1 range.", 'InvalidCharacterError');
        return native('btoa', s);
      }
      function atob(data) {
        requireArgs(1, arguments.length, 'atob');
        const s = StringCtor(data);
        if (test(notLatin1, s)) throw domError("Failed to execute 'atob': The string to be decoded is not correctly encoded.", 'InvalidCharacterError');
        const r = native('atob', s);
        if (r === null) throw domError("Failed to execute 'atob': The string to be decoded is not correctly encoded.", 'InvalidCharacterError');
        return r;
      }
      return { TextEncoder, TextDecoder, atob, btoa };
    });

    const url = section(() => {
      // ---- URLSearchParams, URL ----

      let searchParamsFromURL, searchParamsReplace;
      class URLSearchParams {
        #list = []; #url = null;
        constructor(init = undefined) {
          if (init === INTERNAL) return;
          if (init === undefined || init === null) return;
          if (typeof init === 'object' || typeof init === 'function') {
            if (init instanceof URLSearchParams) { this.#list = init.#list.map((p) => [p[0], p[1]]); return; }
            if (typeof init[SymbolIterator] === 'function') {
              for (const pair of init) {
                const p = [...pair];
                if (p.length !== 2) throw new TypeErrorCtor("Failed to construct 'URLSearchParams': Each query pair must be an iterable [name, value] tuple.");
                push(this.#list, [StringCtor(p[0]), StringCtor(p[1])]);
              }
              return;
            }
            for (const k of reflectOwnKeys(init)) {
              const d = getOwnDesc(init, k);
              if (typeof k === 'string' && d && d.enumerable) push(this.#list, [k, StringCtor(init[k])]);
            }
            return;
          }
          let s = StringCtor(init);
          if (s[0] === '?') s = s.slice(1);
          this.#list = parsePairs(s);
        }
        #update() {
          if (this.#url !== null) {
            const q = this.toString();
            urlSetQuery(this.#url, q === '' ? '' : '?' + q);
          }
        }
        get size() { return this.#list.length; }
        append(name, value) {
          requireArgs(2, arguments.length, 'append');
          push(this.#list, [StringCtor(name), StringCtor(value)]);
          this.#update();
        }
        delete(name, value = undefined) {
          requireArgs(1, arguments.length, 'delete');
          name = StringCtor(name);
          const v = value === undefined ? undefined : StringCtor(value);
          this.#list = this.#list.filter((p) => !(p[0] === name && (v === undefined || p[1] === v)));
          this.#update();
        }
        get(name) {
          requireArgs(1, arguments.length, 'get');
          name = StringCtor(name);
          for (const p of this.#list) if (p[0] === name) return p[1];
          return null;
        }
        getAll(name) {
          requireArgs(1, arguments.length, 'getAll');
          name = StringCtor(name);
          return this.#list.filter((p) => p[0] === name).map((p) => p[1]);
        }
        has(name, value = undefined) {
          requireArgs(1, arguments.length, 'has');
          name = StringCtor(name);
          const v = value === undefined ? undefined : StringCtor(value);
          return this.#list.some((p) => p[0] === name && (v === undefined || p[1] === v));
        }
        set(name, value) {
          requireArgs(2, arguments.length, 'set');
          name = StringCtor(name); value = StringCtor(value);
          const out = [];
          let done = false;
          for (const p of this.#list) {
            if (p[0] !== name) push(out, p);
            else if (!done) { push(out, [name, value]); done = true; }
          }
          if (!done) push(out, [name, value]);
          this.#list = out;
          this.#update();
        }
        sort() {
          // Stable sort by UTF-16 code units of the names.
          const indexed = this.#list.map((p, i) => [p, i]);
          call(arraySort, indexed, (a, b) => (a[0][0] < b[0][0] ? -1 : a[0][0] > b[0][0] ? 1 : a[1] - b[1]));
          this.#list = indexed.map((x) => x[0]);
          this.#update();
        }
        forEach(callback, thisArg = undefined) {
          requireArgs(1, arguments.length, 'forEach');
          if (typeof callback !== 'function') throw new TypeErrorCtor("Failed to execute 'forEach' on 'URLSearchParams': The callback provided as parameter 1 is not a function.");
          for (let i = 0; i < this.#list.length; i++) call(callback, thisArg, this.#list[i][1], this.#list[i][0], this);
        }
        entries() { return listIterator(() => this.#list, (p) => [p[0], p[1]], 'URLSearchParams Iterator'); }
        keys() { return listIterator(() => this.#list, (p) => p[0], 'URLSearchParams Iterator'); }
        values() { return listIterator(() => this.#list, (p) => p[1], 'URLSearchParams Iterator'); }
        toString() {
          const flat = [];
          for (const p of this.#list) { push(flat, p[0]); push(flat, p[1]); }
          return native('formSerialize', flat);
        }
        static {
          searchParamsFromURL = (url, query) => {
            const sp = new URLSearchParams(INTERNAL);
            sp.#url = url;
            sp.#list = parsePairs(query);
            return sp;
          };
          searchParamsReplace = (sp, query) => { sp.#list = parsePairs(query); };
        }
      }
      URLSearchParams.prototype[SymbolIterator] = URLSearchParams.prototype.entries;
      defineProperty(URLSearchParams.prototype, SymbolIterator, { enumerable: false });
      setTag(URLSearchParams, 'URLSearchParams');


      let urlSetQuery;
      // The parts native('urlParse') returns, in its order; each of these
      // has a getter and a setter on URL.prototype. href (0) and origin (10)
      // are written out in the class.
      const URL_PARTS = ['href', 'protocol', 'username', 'password', 'host', 'hostname', 'port', 'pathname', 'search', 'hash', 'origin'];
      class URL {
        #parts; #query = null;
        constructor(url, base = undefined) {
          requireArgs(1, arguments.length, 'URL');
          const input = StringCtor(url);
          const parts = base === undefined ? native('urlParse', input) : native('urlParse', input, StringCtor(base));
          if (parts === null) throw new TypeErrorCtor(`Failed to construct 'URL': Invalid URL${base === undefined ? '' : ' (or base)'}: ${input}`);
          this.#parts = parts;
        }
        static canParse(url, base = undefined) {
          requireArgs(1, arguments.length, 'URL.canParse');
          return (base === undefined ? native('urlParse', StringCtor(url)) : native('urlParse', StringCtor(url), StringCtor(base))) !== null;
        }
        static parse(url, base = undefined) {
          requireArgs(1, arguments.length, 'URL.parse');
          try { return base === undefined ? new URL(url) : new URL(url, base); } catch { return null; }
        }
        #set(field, value) {
          const parts = native('urlSet', this.#parts[0], field, StringCtor(value));
          if (parts !== null) {
            this.#parts = parts;
            if (this.#query !== null && field === 'search') searchParamsReplace(this.#query, parts[8].slice(1));
          }
        }
        // The prototype's members are defined here rather than as class
        // members, so the settable parts come from URL_PARTS; what a program
        // sees is what class members would give, in the same order (see
        // url_test.go).
        static {
          const proto = URL.prototype;
          defineMembers(proto, {
            get href() { return this.#parts[0]; },
            set href(v) {
              const parts = native('urlParse', StringCtor(v));
              if (parts === null) throw new TypeErrorCtor(`Failed to set the 'href' property on 'URL': Invalid URL: ${StringCtor(v)}`);
              this.#parts = parts;
              if (this.#query !== null) searchParamsReplace(this.#query, parts[8].slice(1));
            },
            get origin() { return this.#parts[10]; },
          }, true);
          for (let at = 1; at <= 9; at++) {
            const name = URL_PARTS[at];
            defineMembers(proto, {
              get [name]() { return this.#parts[at]; },
              set [name](v) { this.#set(name, v); },
            }, true);
          }
          defineMembers(proto, {
            get searchParams() {
              if (this.#query === null) this.#query = searchParamsFromURL(this, this.#parts[8].slice(1));
              return this.#query;
            },
            toString() { return this.#parts[0]; },
            toJSON() { return this.#parts[0]; },
          }, false);
          urlSetQuery = (u, search) => {
            const parts = native('urlSet', u.#parts[0], 'search', search);
            if (parts !== null) u.#parts = parts;
          };
        }
      }
      setTag(URL, 'URL');
      return { URL, URLSearchParams };
    });

    const fetchApi = section(() => {
      const { domError, AbortSignal, AbortController, signalAddAlgorithm } = dom();
      const { URLSearchParams } = url();
      // ---- Headers ----

      const tokenPattern = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
      const badValue = /[\0\r\n]|[^\u0000-\u00ff]/;
      const trimValue = (v) => call(stringReplace, v, /^[\t\n\r ]+|[\t\n\r ]+$/g, '');
      const checkName = (name, what) => {
        name = StringCtor(name);
        if (!test(tokenPattern, name)) throw new TypeErrorCtor(`Failed to execute '${what}' on 'Headers': Invalid name: ${jsonStringify(name)}`);
        return name;
      };
      const checkValue = (value, what) => {
        value = trimValue(StringCtor(value));
        if (test(badValue, value)) throw new TypeErrorCtor(`Failed to execute '${what}' on 'Headers': Invalid value`);
        return value;
      };

      let headersList, headersSetGuard, headersFromList;
      class Headers {
        #list = []; // [name as given, value], in order
        #guard = 'none';
        constructor(init = undefined) {
          if (init === INTERNAL) return;
          if (init === undefined) return;
          fillHeaders(this, init);
        }
        #mutable() { if (this.#guard === 'immutable') throw new TypeErrorCtor('Headers are immutable'); }
        append(name, value) {
          requireArgs(2, arguments.length, 'append');
          name = checkName(name, 'append'); value = checkValue(value, 'append');
          this.#mutable();
          push(this.#list, [name, value]);
        }
        delete(name) {
          requireArgs(1, arguments.length, 'delete');
          const n = lower(checkName(name, 'delete'));
          this.#mutable();
          this.#list = this.#list.filter((h) => lower(h[0]) !== n);
        }
        get(name) {
          requireArgs(1, arguments.length, 'get');
          const n = lower(checkName(name, 'get'));
          const values = [];
          for (const h of this.#list) if (lower(h[0]) === n) push(values, h[1]);
          return values.length === 0 ? null : call(arrayJoin, values, ', ');
        }
        getSetCookie() {
          const out = [];
          for (const h of this.#list) if (lower(h[0]) === 'set-cookie') push(out, h[1]);
          return out;
        }
        has(name) {
          requireArgs(1, arguments.length, 'has');
          const n = lower(checkName(name, 'has'));
          return this.#list.some((h) => lower(h[0]) === n);
        }
        set(name, value) {
          requireArgs(2, arguments.length, 'set');
          name = checkName(name, 'set'); value = checkValue(value, 'set');
          this.#mutable();
          const n = lower(name);
          const out = [];
          let done = false;
          for (const h of this.#list) {
            if (lower(h[0]) !== n) push(out, h);
            else if (!done) { push(out, [h[0], value]); done = true; }
          }
          if (!done) push(out, [name, value]);
          this.#list = out;
        }
        // The sort-and-combine view the standard iterates: lowercase names in
        // order, values combined with ", " except set-cookie's.
        #combined() {
          const names = [];
          const seen = new SetCtor();
          for (const h of this.#list) {
            const n = lower(h[0]);
            if (!seen.has(n)) { seen.add(n); push(names, n); }
          }
          call(arraySort, names, (a, b) => (a < b ? -1 : a > b ? 1 : 0));
          const out = [];
          for (const n of names) {
            if (n === 'set-cookie') {
              for (const h of this.#list) if (lower(h[0]) === n) push(out, [n, h[1]]);
            } else {
              push(out, [n, this.get(n)]);
            }
          }
          return out;
        }
        forEach(callback, thisArg = undefined) {
          requireArgs(1, arguments.length, 'forEach');
          if (typeof callback !== 'function') throw new TypeErrorCtor("Failed to execute 'forEach' on 'Headers': The callback provided as parameter 1 is not a function.");
          for (const [n, v] of this.#combined()) call(callback, thisArg, v, n, this);
        }
        entries() { let c; return listIterator(() => (c ??= this.#combined()), (p) => [p[0], p[1]], 'Headers Iterator'); }
        keys() { let c; return listIterator(() => (c ??= this.#combined()), (p) => p[0], 'Headers Iterator'); }
        values() { let c; return listIterator(() => (c ??= this.#combined()), (p) => p[1], 'Headers Iterator'); }
        static {
          headersList = (h) => h.#list;
          headersSetGuard = (h, guard) => { h.#guard = guard; };
          headersFromList = (list, guard) => {
            const h = new Headers(INTERNAL);
            h.#list = list;
            h.#guard = guard;
            return h;
          };
        }
      }
      Headers.prototype[SymbolIterator] = Headers.prototype.entries;
      defineProperty(Headers.prototype, SymbolIterator, { enumerable: false });
      setTag(Headers, 'Headers');
      function fillHeaders(h, init) {
        if (typeof init !== 'object' && typeof init !== 'function' || init === null) {
          throw new TypeErrorCtor("Failed to construct 'Headers': The provided value is not of type '(record<ByteString, ByteString> or sequence<sequence<ByteString>>)'.");
        }
        if (init instanceof Headers) {
          for (const [n, v] of headersList(init)) h.append(n, v);
          return;
        }
        if (typeof init[SymbolIterator] === 'function') {
          for (const pair of init) {
            const p = typeof pair === 'string' ? null : [...pair];
            if (p === null || p.length !== 2) throw new TypeErrorCtor("Failed to construct 'Headers': Each header pair must be an iterable [name, value] tuple.");
            h.append(p[0], p[1]);
          }
          return;
        }
        for (const k of reflectOwnKeys(init)) {
          const d = getOwnDesc(init, k);
          if (d && d.enumerable) {
            if (typeof k === 'symbol') throw new TypeErrorCtor("Failed to construct 'Headers': a header name cannot be a symbol.");
            h.append(k, init[k]);
          }
        }
      }

      // ---- Blob, File ----

      let blobBytes;
      class Blob {
        #bytes; #type;
        constructor(blobParts = undefined, options = undefined) {
          const chunks = [];
          if (blobParts !== undefined) {
            if (typeof blobParts !== 'object' || blobParts === null || typeof blobParts[SymbolIterator] !== 'function') {
              throw new TypeErrorCtor("Failed to construct 'Blob': The provided value cannot be converted to a sequence.");
            }
            for (const part of blobParts) {
              if (part instanceof Blob) push(chunks, part.#bytes);
              else {
                const b = copyBytes(part);
                push(chunks, b !== undefined ? b : utf8Encode(part));
              }
            }
          }
          this.#bytes = concatBytes(chunks);
          const t = options && options.type !== undefined ? StringCtor(options.type) : '';
          this.#type = /[^\u0020-\u007e]/.test(t) ? '' : lower(t);
        }
        get size() { return call(taByteLength, this.#bytes); }
        get type() { return this.#type; }
        slice(start = undefined, end = undefined, contentType = undefined) {
          const size = call(taByteLength, this.#bytes);
          const clamp = (v, d) => {
            if (v === undefined) return d;
            v = Math.trunc(+v) || 0;
            return v < 0 ? Math.max(size + v, 0) : Math.min(v, size);
          };
          const s = clamp(start, 0), e = clamp(end, size);
          const b = new Blob([], { type: contentType === undefined ? '' : contentType });
          b.#bytes = call(u8Slice, this.#bytes, s, Math.max(s, e));
          return b;
        }
        text() { return promiseResolve(utf8Decode(this.#bytes)); }
        arrayBuffer() { return promiseResolve(abOf(this.#bytes)); }
        bytes() { return promiseResolve(call(u8Slice, this.#bytes, 0)); }
        stream() { return newByteStream(call(u8Slice, this.#bytes, 0), null); }
        static { blobBytes = (b) => b.#bytes; }
      }
      setTag(Blob, 'Blob');

      class File extends Blob {
        #name; #lastModified;
        constructor(fileBits, fileName, options = undefined) {
          requireArgs(2, arguments.length, 'File');
          super(fileBits, options);
          this.#name = StringCtor(fileName);
          this.#lastModified = options && options.lastModified !== undefined ? +options.lastModified : DateCtor.now();
        }
        get name() { return this.#name; }
        get lastModified() { return this.#lastModified; }
      }
      setTag(File, 'File');

      // ---- FormData ----

      let formDataList;
      const formValue = (value, filename) => {
        if (value instanceof Blob) {
          if (!(value instanceof File) || filename !== undefined) {
            return new File([value], filename !== undefined ? StringCtor(filename) : value instanceof File ? value.name : 'blob', { type: value.type });
          }
          return value;
        }
        return StringCtor(value);
      };
      class FormData {
        #list = [];
        constructor(form = undefined) {
          if (form !== undefined) throw new TypeErrorCtor("Failed to construct 'FormData': this runtime has no HTML forms.");
        }
        append(name, value, filename = undefined) {
          requireArgs(2, arguments.length, 'append');
          push(this.#list, [StringCtor(name), formValue(value, filename)]);
        }
        delete(name) { requireArgs(1, arguments.length, 'delete'); name = StringCtor(name); this.#list = this.#list.filter((p) => p[0] !== name); }
        get(name) {
          requireArgs(1, arguments.length, 'get');
          name = StringCtor(name);
          for (const p of this.#list) if (p[0] === name) return p[1];
          return null;
        }
        getAll(name) { requireArgs(1, arguments.length, 'getAll'); name = StringCtor(name); return this.#list.filter((p) => p[0] === name).map((p) => p[1]); }
        has(name) { requireArgs(1, arguments.length, 'has'); name = StringCtor(name); return this.#list.some((p) => p[0] === name); }
        set(name, value, filename = undefined) {
          requireArgs(2, arguments.length, 'set');
          name = StringCtor(name);
          const entry = [name, formValue(value, filename)];
          const out = [];
          let done = false;
          for (const p of this.#list) {
            if (p[0] !== name) push(out, p);
            else if (!done) { push(out, entry); done = true; }
          }
          if (!done) push(out, entry);
          this.#list = out;
        }
        forEach(callback, thisArg = undefined) {
          requireArgs(1, arguments.length, 'forEach');
          for (const p of [...this.#list]) call(callback, thisArg, p[1], p[0], this);
        }
        entries() { return listIterator(() => this.#list, (p) => [p[0], p[1]], 'FormData Iterator'); }
        keys() { return listIterator(() => this.#list, (p) => p[0], 'FormData Iterator'); }
        values() { return listIterator(() => this.#list, (p) => p[1], 'FormData Iterator'); }
        static { formDataList = (f) => f.#list; }
      }
      FormData.prototype[SymbolIterator] = FormData.prototype.entries;
      defineProperty(FormData.prototype, SymbolIterator, { enumerable: false });
      setTag(FormData, 'FormData');

      // multipart/form-data per the HTML Standard's encoding algorithm.
      const escapeName = (s) => call(stringReplace, call(stringReplace, s, /\r\n|\r|\n/g, '\r\n'), /[\n\r"]/g,
        (c) => (c === '\n' ? '%0A' : c === '\r' ? '%0D' : '%22'));
      function encodeMultipart(fd) {
        const boundary = '----formdata-' + native('randomUUID');
        const chunks = [];
        for (const [name, value] of formDataList(fd)) {
          let head = `--${boundary}\r\nContent-Disposition: form-data; name="${escapeName(name)}"`;
          if (typeof value === 'string') {
            push(chunks, utf8Encode(head + '\r\n\r\n' + call(stringReplace, value, /\r\n|\r|\n/g, '\r\n') + '\r\n'));
          } else {
            head += `; filename="${escapeName(value.name)}"\r\nContent-Type: ${value.type || 'application/octet-stream'}\r\n\r\n`;
            push(chunks, utf8Encode(head));
            push(chunks, blobBytes(value));
            push(chunks, utf8Encode('\r\n'));
          }
        }
        push(chunks, utf8Encode(`--${boundary}--\r\n`));
        return [concatBytes(chunks), 'multipart/form-data; boundary=' + boundary];
      }

      // ---- a byte stream for Response.body and Blob.stream ----

      // newByteStream is the minimal ReadableStream this runtime gives: one
      // chunk holding the whole body, read through getReader().read().
      // onDisturb runs when the first read happens (the body is then used).
      const streamState = new WeakMapCtor();
      class ReadableStream {
        constructor(token) { if (token !== INTERNAL) throw new TypeErrorCtor("This runtime's ReadableStream cannot be constructed: it exists only as Response.body and Blob.stream()."); }
        get locked() { return call(weakGet, streamState, this).reader !== null; }
        getReader(options = undefined) {
          const st = call(weakGet, streamState, this);
          if (!st) throw new TypeErrorCtor('Illegal invocation');
          if (options && options.mode !== undefined) throw new RangeErrorCtor("This runtime's streams give only the default reader.");
          if (st.reader !== null) throw new TypeErrorCtor("Failed to execute 'getReader' on 'ReadableStream': ReadableStreamDefaultReader constructor can only accept readable streams that are not yet locked to a reader");
          const reader = new ReadableStreamDefaultReader(INTERNAL, this);
          st.reader = reader;
          return reader;
        }
        cancel(reason = undefined) {
          const st = call(weakGet, streamState, this);
          if (st.reader !== null) return promiseReject(new TypeErrorCtor('Cannot cancel a locked stream'));
          st.chunk = null; st.done = true;
          if (st.onDisturb) { st.onDisturb(); st.onDisturb = null; }
          return promiseResolve(undefined);
        }
      }
      setTag(ReadableStream, 'ReadableStream');
      // Async iteration (for await … of response.body). goja has no
      // Symbol.asyncIterator; esbuild, which lowers for await for goja, looks
      // the method up under Symbol.for('Symbol.asyncIterator') then.
      const asyncIteratorKey = Symbol.asyncIterator !== undefined ? Symbol.asyncIterator : Symbol.for('Symbol.asyncIterator');
      defineProperty(ReadableStream.prototype, 'values', {
        value: function values(options = undefined) {
          const reader = this.getReader();
          const preventCancel = !!(options && options.preventCancel);
          return {
            next: () => then(reader.read(), (r) => { if (r.done) reader.releaseLock(); return r; }),
            return: (value) => {
              const done = preventCancel ? promiseResolve(undefined) : reader.cancel();
              return then(done, () => { reader.releaseLock(); return { value, done: true }; });
            },
            [asyncIteratorKey]() { return this; },
          };
        },
        writable: true, configurable: true,
      });
      defineProperty(ReadableStream.prototype, asyncIteratorKey, { value: ReadableStream.prototype.values, writable: true, configurable: true });
      class ReadableStreamDefaultReader {
        #stream;
        constructor(token, stream) {
          if (token !== INTERNAL) throw new TypeErrorCtor('Illegal constructor');
          this.#stream = stream;
        }
        get closed() { return promiseResolve(undefined); }
        read() {
          if (this.#stream === null) return promiseReject(new TypeErrorCtor('This reader was released from its stream.'));
          const st = call(weakGet, streamState, this.#stream);
          if (st.onDisturb) { st.onDisturb(); st.onDisturb = null; }
          if (st.done || st.chunk === null) { st.done = true; return promiseResolve({ value: undefined, done: true }); }
          const chunk = st.chunk;
          st.chunk = null;
          st.done = call(taByteLength, chunk) === 0;
          if (st.done) return promiseResolve({ value: undefined, done: true });
          return promiseResolve({ value: chunk, done: false });
        }
        releaseLock() {
          if (this.#stream === null) return;
          call(weakGet, streamState, this.#stream).reader = null;
          this.#stream = null;
        }
        cancel(reason = undefined) {
          if (this.#stream === null) return promiseReject(new TypeErrorCtor('This reader was released from its stream.'));
          const st = call(weakGet, streamState, this.#stream);
          st.chunk = null; st.done = true;
          if (st.onDisturb) { st.onDisturb(); st.onDisturb = null; }
          return promiseResolve(undefined);
        }
      }
      setTag(ReadableStreamDefaultReader, 'ReadableStreamDefaultReader');
      function newByteStream(bytes, onDisturb) {
        const s = new ReadableStream(INTERNAL);
        call(weakSet, streamState, s, { chunk: bytes, done: false, reader: null, onDisturb });
        return s;
      }

      // ---- Body: shared by Request and Response ----

      // Each Request and Response has a body record: bytes (Uint8Array or
      // null), used, the stream once body was read, and the content type.
      const bodies = new WeakMapCtor();
      const bodyOf = (o) => {
        const b = call(weakGet, bodies, o);
        if (!b) throw new TypeErrorCtor('Illegal invocation');
        return b;
      };
      // extractBody turns a BodyInit into [bytes, content type or null].
      function extractBody(body) {
        if (typeof body === 'string') return [utf8Encode(body), 'text/plain;charset=UTF-8'];
        if (body instanceof URLSearchParams) return [utf8Encode(body.toString()), 'application/x-www-form-urlencoded;charset=UTF-8'];
        if (body instanceof Blob) return [call(u8Slice, blobBytes(body), 0), body.type === '' ? null : body.type];
        if (body instanceof FormData) return encodeMultipart(body);
        if (body instanceof ReadableStream) {
          const st = call(weakGet, streamState, body);
          if (st.reader !== null || st.onDisturb === null && st.done) throw new TypeErrorCtor('The ReadableStream body is locked or already read.');
          const bytes = st.chunk === null ? new U8(0) : st.chunk;
          st.chunk = null; st.done = true;
          if (st.onDisturb) { st.onDisturb(); st.onDisturb = null; }
          return [bytes, null];
        }
        const b = copyBytes(body);
        if (b !== undefined) return [b, null];
        return [utf8Encode(body), 'text/plain;charset=UTF-8'];
      }
      const unusable = () => new TypeErrorCtor('Body is unusable: Body has already been read');
      // consume marks the body used and gives its bytes, or rejects.
      function consume(o) {
        let b;
        try { b = bodyOf(o); } catch (e) { return promiseReject(e); }
        if (b.used || (b.stream !== null && call(weakGet, streamState, b.stream).reader !== null)) return promiseReject(unusable());
        b.used = true;
        if (b.stream !== null) {
          const st = call(weakGet, streamState, b.stream);
          st.onDisturb = null;
          const bytes = st.chunk === null ? new U8(0) : st.chunk;
          st.chunk = null; st.done = true;
          return promiseResolve(bytes);
        }
        return promiseResolve(b.bytes === null ? new U8(0) : b.bytes);
      }
      function contentTypeOf(o) {
        return headersOf(o).get('content-type');
      }
      const bodyMixin = {
        get body() {
          const b = bodyOf(this);
          if (b.bytes === null) return null;
          if (b.stream === null) {
            b.stream = newByteStream(b.used ? null : b.bytes, () => { b.used = true; });
            if (b.used) call(weakGet, streamState, b.stream).done = true;
          }
          return b.stream;
        },
        get bodyUsed() { return bodyOf(this).used; },
        arrayBuffer() { return then(consume(this), abOf); },
        bytes() { return then(consume(this), (u8) => call(u8Slice, u8, 0)); },
        text() { return then(consume(this), utf8Decode); },
        json() { return then(consume(this), (u8) => jsonParse(utf8Decode(u8))); },
        blob() {
          const type = contentTypeOf(this);
          return then(consume(this), (u8) => new Blob([u8], { type: type === null ? '' : type }));
        },
        formData() {
          const type = contentTypeOf(this) || '';
          return then(consume(this), (u8) => {
            if (!test(/^application\/x-www-form-urlencoded/i, type)) {
              throw new TypeErrorCtor('formData() reads application/x-www-form-urlencoded bodies only in this runtime.');
            }
            const fd = new FormData();
            for (const [k, v] of parsePairs(utf8Decode(u8))) fd.append(k, v);
            return fd;
          });
        },
      };
      const installBody = (proto) => defineMembers(proto, bodyMixin, true);
      const cloneBody = (from) => {
        const b = bodyOf(from);
        if (b.used || (b.stream !== null && call(weakGet, streamState, b.stream).reader !== null)) {
          throw new TypeErrorCtor("Failed to execute 'clone': Response body is already used");
        }
        return { bytes: b.bytes === null ? null : call(u8Slice, b.bytes, 0), used: false, stream: null };
      };

      // ---- Request ----

      const headersOfMap = new WeakMapCtor();
      const headersOf = (o) => call(weakGet, headersOfMap, o);
      const requestState = new WeakMapCtor();
      const forbiddenMethods = ['CONNECT', 'TRACE', 'TRACK'];
      const normalMethods = ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH'];
      class Request {
        constructor(input, init = undefined) {
          requireArgs(1, arguments.length, 'Request');
          let st;
          let inputBody = null;
          if (input instanceof Request) {
            const from = call(weakGet, requestState, input);
            st = { method: from.method, url: from.url, redirect: from.redirect, given: from.given, signal: null };
            inputBody = input;
          } else {
            const parts = native('urlParse', StringCtor(input));
            if (parts === null) throw new TypeErrorCtor(`Failed to construct 'Request': Invalid URL: ${StringCtor(input)}`);
            if (parts[2] !== '' || parts[3] !== '') throw new TypeErrorCtor(`Failed to construct 'Request': Request cannot be constructed from a URL that includes credentials: ${StringCtor(input)}`);
            st = { method: 'GET', url: parts[0], redirect: 'follow', given: null, signal: null };
          }
          init = init === undefined || init === null ? {} : init;
          if (typeof init !== 'object') throw new TypeErrorCtor("Failed to construct 'Request': The provided value is not of type 'RequestInit'.");
          if (init.method !== undefined) {
            let m = StringCtor(init.method);
            if (!test(tokenPattern, m)) throw new TypeErrorCtor(`Failed to construct 'Request': '${m}' is not a valid HTTP method.`);
            const um = upper(m);
            if (forbiddenMethods.includes(um)) throw new TypeErrorCtor(`Failed to construct 'Request': '${m}' HTTP method is unsupported.`);
            if (normalMethods.includes(um) && um !== 'PATCH') m = um;
            st.method = m;
          }
          if (init.redirect !== undefined) {
            const r = StringCtor(init.redirect);
            if (r !== 'follow' && r !== 'error' && r !== 'manual') throw new TypeErrorCtor(`Failed to construct 'Request': The provided value '${r}' is not a valid enum value of type RequestRedirect.`);
            st.redirect = r;
          }
          // The request's signal follows the given one (or the input's); it
          // is made when read, fetch follows the given signal directly.
          const given = init.signal !== undefined ? init.signal : st.given;
          if (given !== null && given !== undefined && !(given instanceof AbortSignal)) {
            throw new TypeErrorCtor("Failed to construct 'Request': member signal is not of type AbortSignal.");
          }
          st.given = given || null;
          const headers = new Headers(init.headers !== undefined ? init.headers : inputBody !== null ? headersOf(inputBody) : undefined);
          let body = null;
          if (init.body !== undefined && init.body !== null) {
            if (st.method === 'GET' || st.method === 'HEAD') throw new TypeErrorCtor("Failed to construct 'Request': Request with GET/HEAD method cannot have body.");
            const [bytes, type] = extractBody(init.body);
            body = { bytes, used: false, stream: null };
            if (type !== null && !headers.has('content-type')) headers.append('content-type', type);
          } else if (inputBody !== null) {
            const b = bodyOf(inputBody);
            if (b.bytes !== null) {
              if (b.used) throw new TypeErrorCtor("Failed to construct 'Request': Cannot construct a Request with a Request object that has already been used.");
              if (st.method === 'GET' || st.method === 'HEAD') throw new TypeErrorCtor("Failed to construct 'Request': Request with GET/HEAD method cannot have body.");
              body = { bytes: b.bytes, used: false, stream: null };
              b.used = true;
            }
          }
          call(weakSet, requestState, this, st);
          call(weakSet, headersOfMap, this, headers);
          call(weakSet, bodies, this, body || { bytes: null, used: false, stream: null });
        }
        get method() { return call(weakGet, requestState, this).method; }
        get url() { return call(weakGet, requestState, this).url; }
        get headers() { return headersOf(this); }
        get redirect() { return call(weakGet, requestState, this).redirect; }
        get signal() {
          const st = call(weakGet, requestState, this);
          if (st.signal === null) st.signal = st.given !== null ? AbortSignal.any([st.given]) : new AbortController().signal;
          return st.signal;
        }
        get destination() { return ''; }
        get referrer() { return 'about:client'; }
        get referrerPolicy() { return ''; }
        get mode() { return 'cors'; }
        get credentials() { return 'same-origin'; }
        get cache() { return 'default'; }
        get integrity() { return ''; }
        get keepalive() { return false; }
        clone() {
          const st = call(weakGet, requestState, this);
          if (!st) throw new TypeErrorCtor('Illegal invocation');
          const r = ObjectCtor.create(Request.prototype);
          call(weakSet, bodies, r, cloneBody(this));
          call(weakSet, requestState, r, { method: st.method, url: st.url, redirect: st.redirect, given: st.given, signal: null });
          call(weakSet, headersOfMap, r, new Headers(headersOf(this)));
          return r;
        }
      }
      installBody(Request.prototype);
      setTag(Request, 'Request');

      // ---- Response ----

      const responseState = new WeakMapCtor();
      const nullBodyStatus = [101, 103, 204, 205, 304];
      const redirectStatus = [301, 302, 303, 307, 308];
      const reasonPhrase = /^[\t\u0020-\u007e\u0080-\u00ff]*$/;
      function initResponse(r, init, body) {
        init = init === undefined || init === null ? {} : init;
        if (typeof init !== 'object') throw new TypeErrorCtor("Failed to construct 'Response': The provided value is not of type 'ResponseInit'.");
        const status = init.status === undefined ? 200 : +init.status;
        if (!(status >= 200 && status <= 599) || status !== Math.trunc(status)) {
          throw new RangeErrorCtor(`Failed to construct 'Response': The status provided (${init.status}) is outside the range [200, 599].`);
        }
        const statusText = init.statusText === undefined ? '' : StringCtor(init.statusText);
        if (!test(reasonPhrase, statusText)) throw new TypeErrorCtor("Failed to construct 'Response': Invalid statusText");
        const headers = new Headers(init.headers);
        let rec = { bytes: null, used: false, stream: null };
        if (body !== null) {
          if (nullBodyStatus.includes(status)) throw new TypeErrorCtor(`Failed to construct 'Response': Response with null body status (${status}) cannot have body`);
          const [bytes, type] = body;
          rec = { bytes, used: false, stream: null };
          if (type !== null && !headers.has('content-type')) headers.append('content-type', type);
        }
        call(weakSet, responseState, r, { status, statusText, type: 'default', url: '', redirected: false });
        call(weakSet, headersOfMap, r, headers);
        call(weakSet, bodies, r, rec);
      }
      class Response {
        constructor(body = null, init = undefined) {
          initResponse(this, init, body === null || body === undefined ? null : extractBody(body));
        }
        static error() {
          const r = ObjectCtor.create(Response.prototype);
          call(weakSet, responseState, r, { status: 0, statusText: '', type: 'error', url: '', redirected: false });
          call(weakSet, headersOfMap, r, headersFromList([], 'immutable'));
          call(weakSet, bodies, r, { bytes: null, used: false, stream: null });
          return r;
        }
        static redirect(url, status = 302) {
          requireArgs(1, arguments.length, 'Response.redirect');
          const parts = native('urlParse', StringCtor(url));
          if (parts === null) throw new TypeErrorCtor(`Failed to execute 'redirect' on 'Response': Invalid URL: ${StringCtor(url)}`);
          status = +status;
          if (!redirectStatus.includes(status)) throw new RangeErrorCtor(`Failed to execute 'redirect' on 'Response': Invalid status code ${status}`);
          const r = ObjectCtor.create(Response.prototype);
          call(weakSet, responseState, r, { status, statusText: '', type: 'default', url: '', redirected: false });
          call(weakSet, headersOfMap, r, headersFromList([['location', parts[0]]], 'immutable'));
          call(weakSet, bodies, r, { bytes: null, used: false, stream: null });
          return r;
        }
        static json(data, init = undefined) {
          requireArgs(1, arguments.length, 'Response.json');
          const text = jsonStringify(data);
          if (text === undefined) throw new TypeErrorCtor("Failed to execute 'json' on 'Response': The data is not JSON serializable");
          const r = ObjectCtor.create(Response.prototype);
          initResponse(r, init, [utf8Encode(text), 'application/json']);
          return r;
        }
        get type() { return call(weakGet, responseState, this).type; }
        get url() { return call(weakGet, responseState, this).url; }
        get redirected() { return call(weakGet, responseState, this).redirected; }
        get status() { return call(weakGet, responseState, this).status; }
        get ok() { const s = call(weakGet, responseState, this).status; return s >= 200 && s <= 299; }
        get statusText() { return call(weakGet, responseState, this).statusText; }
        get headers() { return headersOf(this); }
        clone() {
          const st = call(weakGet, responseState, this);
          if (!st) throw new TypeErrorCtor('Illegal invocation');
          const r = ObjectCtor.create(Response.prototype);
          call(weakSet, bodies, r, cloneBody(this));
          call(weakSet, responseState, r, { ...st });
          const h = headersOf(this);
          call(weakSet, headersOfMap, r, headersFromList(headersList(h).map((x) => [x[0], x[1]]), st.type === 'default' && !st.fetched ? 'response' : 'immutable'));
          return r;
        }
      }
      installBody(Response.prototype);
      setTag(Response, 'Response');

      // ---- fetch ----

      function fetch(input, init = undefined) {
        const argc = arguments.length;
        return new PromiseCtor((resolve, reject) => {
          requireArgs(1, argc, 'fetch');
          const request = new Request(input, init);
          const st = call(weakGet, requestState, request);
          const signal = st.given;
          if (signal !== null && signal.aborted) { reject(signal.reason); return; }
          const b = bodyOf(request);
          let body = null;
          if (b.bytes !== null) {
            if (b.used) throw unusable();
            b.used = true;
            body = abOf(b.bytes);
          }
          const flat = [];
          for (const [n, v] of headersList(headersOf(request))) { push(flat, n); push(flat, v); }
          let done = false;
          const onResponse = (status, statusText, hs, buf, url, redirected) => {
            if (done) return;
            done = true;
            try {
              const list = [];
              for (let i = 0; i + 1 < hs.length; i += 2) push(list, [hs[i], hs[i + 1]]);
              const r = ObjectCtor.create(Response.prototype);
              call(weakSet, responseState, r, { status, statusText, type: 'basic', url, redirected, fetched: true });
              call(weakSet, headersOfMap, r, headersFromList(list, 'immutable'));
              call(weakSet, bodies, r, { bytes: nullBodyStatus.includes(status) ? null : new U8(buf), used: false, stream: null });
              resolve(r);
            } catch (e) {
              // Only a program that replaced builtins gets here; it gets the
              // exception, not a fetch that never settles.
              reject(e);
            }
          };
          const onError = (message) => {
            if (done) return;
            done = true;
            reject(new TypeErrorCtor(message));
          };
          const abort = native('fetch', st.method, st.url, flat, body, st.redirect, onResponse, onError);
          if (signal !== null) signalAddAlgorithm(signal, () => {
            if (done) return;
            done = true;
            abort();
            reject(signal.reason);
          });
        });
      }
      // ---- the handle exchange: Go builds a Request, reads a Response ----

      // makeRequest builds the Request a retained fetch handler receives.
      const makeRequest = (method, url, flat, body) => {
        const list = [];
        for (let i = 0; i + 1 < flat.length; i += 2) push(list, [flat[i], flat[i + 1]]);
        const init = { method, headers: list };
        if (body !== null) init.body = new U8(body);
        return new Request(url, init);
      };
      // serializeResponse reads a handler's answer without going through
      // the program's promises: null when it is not a Response, else
      // [status, statusText, [name, value, …], ArrayBuffer].
      const serializeResponse = (r) => {
        const st = typeof r === 'object' && r !== null ? call(weakGet, responseState, r) : undefined;
        if (st === undefined) return null;
        const b = bodyOf(r);
        if (b.used || (b.stream !== null && call(weakGet, streamState, b.stream).reader !== null)) {
          throw new TypeErrorCtor('The handler answered with a Response whose body was already read.');
        }
        const flat = [];
        for (const [n, v] of headersList(headersOf(r))) { push(flat, n); push(flat, v); }
        b.used = true;
        return [st.status, st.statusText, flat, b.bytes === null ? new ArrayBufferCtor(0) : abOf(b.bytes)];
      };

      return { Headers, Request, Response, fetch, Blob, File, FormData, ReadableStream, EventTarget: dom().EventTarget, makeRequest, serializeResponse };
    });

    const cloneSection = section(() => {
      const { domError } = dom();
      // ---- structuredClone ----

      const cloneError = (what) => domError(`Failed to execute 'structuredClone': ${what} could not be cloned.`, 'DataCloneError');
      const errorCtors = { Error, EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError };
      const typedCtors = {
        Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array,
        Float32Array, Float64Array, BigInt64Array, BigUint64Array,
      };
      const isKind = (v, proto, probe) => {
        try { call(probe, v); return true; } catch { return false; }
      };
      const mapSize = getOwnDesc(MapCtor.prototype, 'size').get;
      const setSize = getOwnDesc(SetCtor.prototype, 'size').get;
      const regexpSource = getOwnDesc(RegExpCtor.prototype, 'source').get;
      const regexpFlags = getOwnDesc(RegExpCtor.prototype, 'flags').get;
      const boolValueOf = Boolean.prototype.valueOf, numValueOf = Number.prototype.valueOf;
      const strValueOf = String.prototype.valueOf, bigValueOf = BigInt.prototype.valueOf;
      function structuredClone(value, options = undefined) {
        requireArgs(1, arguments.length, 'structuredClone');
        if (options && options.transfer !== undefined && [...options.transfer].length > 0) {
          throw domError("Failed to execute 'structuredClone': transferring is not supported by this runtime; clone without a transfer list.", 'DataCloneError');
        }
        const memory = new MapCtor();
        const clone = (v) => {
          const t = typeof v;
          if (t === 'symbol') throw cloneError('Symbol()');
          if (t === 'function') throw cloneError(`${StringCtor(v.name || 'function')}`);
          if (t !== 'object' || v === null) return v;
          if (call(mapHas, memory, v)) return call(mapGet, memory, v);
          let out;
          const remember = (o) => { call(mapSet, memory, v, o); return o; };
          if (isKind(v, null, dateGetTime)) return remember(new DateCtor(call(dateGetTime, v)));
          if (isKind(v, null, regexpSource)) return remember(new RegExpCtor(call(regexpSource, v), call(regexpFlags, v)));
          if (isKind(v, null, boolValueOf)) return remember(ObjectCtor(call(boolValueOf, v)));
          if (isKind(v, null, numValueOf)) return remember(ObjectCtor(call(numValueOf, v)));
          if (isKind(v, null, strValueOf)) return remember(ObjectCtor(call(strValueOf, v)));
          if (isKind(v, null, bigValueOf)) return remember(ObjectCtor(call(bigValueOf, v)));
          if (isArrayBuffer(v)) return remember(call(abSlice, v, 0));
          const kind = viewKind(v);
          if (kind !== undefined) {
            const [buf, off, len] = viewRange(v);
            const nb = clone(buf);
            if (kind === 'DataView') return remember(new DataViewCtor(nb, off, len));
            const C = typedCtors[kind];
            return remember(new C(nb, off, len / C.BYTES_PER_ELEMENT));
          }
          if (isKind(v, null, mapSize)) {
            out = remember(new MapCtor());
            const entries = [...call(mapEntries, v)];
            for (const [k, x] of entries) call(mapAdd, out, clone(k), clone(x));
            return out;
          }
          if (isKind(v, null, setSize)) {
            out = remember(new SetCtor());
            const values = [...call(setValues, v)];
            for (const x of values) call(setAdd, out, clone(x));
            return out;
          }
          if (v instanceof ErrorCtor) {
            let name = v.name;
            const C = typeof name === 'string' && Object.hasOwn(errorCtors, name) ? errorCtors[name] : ErrorCtor;
            out = remember(new C());
            const msg = getOwnDesc(v, 'message');
            if (msg) defineProperty(out, 'message', { value: StringCtor(v.message), writable: true, configurable: true });
            if (v.stack !== undefined) defineProperty(out, 'stack', { value: StringCtor(v.stack), writable: true, configurable: true });
            if (Object.hasOwn(v, 'cause')) defineProperty(out, 'cause', { value: clone(v.cause), writable: true, configurable: true });
            return out;
          }
          if (isArray(v)) {
            out = remember(new Array(v.length));
            for (const k of ObjectCtor.keys(v)) out[k] = clone(v[k]);
            return out;
          }
          const proto = getPrototypeOf(v);
          if (proto !== ObjectCtor.prototype && proto !== null) {
            const tag = ObjectCtor.prototype.toString.call(v).slice(8, -1);
            // Platform objects exist only once their section loaded.
            const f = fetchApi.peek(), d = dom.peek();
            if (f && v instanceof f.Blob) return remember(new f.Blob([v], { type: v.type }));
            if (tag === 'Promise' || tag === 'WeakMap' || tag === 'WeakSet' || tag === 'WeakRef' || (d && v instanceof d.EventTarget) ||
                (f && (v instanceof f.Request || v instanceof f.Response || v instanceof f.Headers || v instanceof f.ReadableStream))) {
              throw cloneError(`#<${tag}>`);
            }
          }
          out = remember({});
          for (const k of ObjectCtor.keys(v)) {
            const x = clone(v[k]);
            defineProperty(out, k, { value: x, writable: true, enumerable: true, configurable: true });
          }
          return out;
        };
        return clone(value);
      }
      return { structuredClone };
    });

    const cryptoSection = section(() => {
      const { domError } = dom();
      // ---- crypto ----

      const integerArrays = ['Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array', 'BigInt64Array', 'BigUint64Array'];
      const keyState = new WeakMapCtor();
      class CryptoKey {
        constructor(token) { if (token !== INTERNAL) throw new TypeErrorCtor('Illegal constructor'); }
        get type() { return call(weakGet, keyState, this).type; }
        get extractable() { return call(weakGet, keyState, this).extractable; }
        get algorithm() { return call(weakGet, keyState, this).algorithm; }
        get usages() { return call(weakGet, keyState, this).usages; }
      }
      setTag(CryptoKey, 'CryptoKey');
      const newKey = (type, extractable, algorithm, usages, material) => {
        const k = new CryptoKey(INTERNAL);
        call(weakSet, keyState, k, { type, extractable, algorithm: freeze(algorithm), usages: freeze([...usages]), material });
        return k;
      };

      const canonicalAlgorithms = ['SHA-1', 'SHA-256', 'SHA-384', 'SHA-512', 'HMAC', 'AES-GCM', 'ECDSA', 'Ed25519', 'PBKDF2', 'HKDF'];
      const algorithmName = (alg) => {
        let name;
        if (typeof alg === 'string') name = alg;
        else if (typeof alg === 'object' && alg !== null && alg.name !== undefined) name = StringCtor(alg.name);
        else throw new TypeErrorCtor('Algorithm: the algorithm must be a string or an object with a name.');
        const u = upper(name);
        for (const c of canonicalAlgorithms) if (upper(c) === u) return c;
        throw domError(`Unrecognized or unsupported algorithm name: ${name}. This runtime's crypto.subtle supports SHA-1, SHA-256, SHA-384, SHA-512 (digest), HMAC, ECDSA P-256 and Ed25519 (sign, verify), AES-GCM (encrypt, decrypt), and PBKDF2 and HKDF (deriveBits, deriveKey).`, 'NotSupportedError');
      };
      const hashName = (h) => {
        const n = algorithmName(h);
        if (!n.startsWith('SHA-')) throw domError(`${n} is not a hash algorithm.`, 'NotSupportedError');
        return n;
      };
      const hashBlockBits = { 'SHA-1': 512, 'SHA-256': 512, 'SHA-384': 1024, 'SHA-512': 1024 };
      const b64url = (u8) => call(stringReplace, call(stringReplace, native('btoa', latin1(u8)), /=+$/, ''), /[+/]/g, (c) => (c === '+' ? '-' : '_'));
      const latin1 = (u8) => { let s = ''; for (let i = 0; i < u8.length; i++) s += StringCtor.fromCharCode(u8[i]); return s; };
      const fromB64url = (s) => {
        const t = call(stringReplace, StringCtor(s), /[-_]/g, (c) => (c === '-' ? '+' : '/'));
        const bin = native('atob', t);
        if (bin === null) throw domError('The JWK member k is not base64url.', 'DataError');
        const out = new U8(bin.length);
        for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
        return out;
      };
      const checkUsages = (usages, allowed) => {
        const list = [...usages];
        for (const u of list) if (!allowed.includes(u)) throw domError(`Cannot create a key with the usage '${u}'.`, 'SyntaxError');
        return list;
      };
      const jwkAlg = { HMAC: { 'SHA-1': 'HS1', 'SHA-256': 'HS256', 'SHA-384': 'HS384', 'SHA-512': 'HS512' } };
      const aesJwkAlg = { 128: 'A128GCM', 192: 'A192GCM', 256: 'A256GCM' };
      const keyOf = (key, usage, alg) => {
        const st = key instanceof CryptoKey ? call(weakGet, keyState, key) : undefined;
        if (!st) throw new TypeErrorCtor('The key is not a CryptoKey.');
        if (st.algorithm.name !== alg) throw domError(`The key is for ${st.algorithm.name}, not ${alg}.`, 'InvalidAccessError');
        if (!st.usages.includes(usage)) throw domError(`The key does not allow '${usage}'.`, 'InvalidAccessError');
        return st;
      };
      // async runs fn and turns a throw into a rejection, as every SubtleCrypto
      // method reports its errors.
      const settleAsync = (fn) => { try { return promiseResolve(fn()); } catch (e) { return promiseReject(e); } };

      const importKey = (format, keyData, algorithm, extractable, usages) => {
        const name = algorithmName(algorithm);
        format = StringCtor(format);
        if (name === 'HMAC') {
          const hash = hashName(algorithm.hash);
          const list = checkUsages(usages, ['sign', 'verify']);
          let bytes;
          if (format === 'raw') bytes = bufferSource(keyData, 'importKey');
          else if (format === 'jwk') {
            if (typeof keyData !== 'object' || keyData === null || keyData.kty !== 'oct') throw domError('The JWK is not an oct key.', 'DataError');
            bytes = fromB64url(keyData.k);
            if (keyData.alg !== undefined && keyData.alg !== jwkAlg.HMAC[hash]) throw domError(`The JWK alg ${keyData.alg} does not match ${hash}.`, 'DataError');
          } else throw domError(`HMAC keys import from raw or jwk, not ${format}.`, 'NotSupportedError');
          if (bytes.length === 0) throw domError('An HMAC key cannot be empty.', 'DataError');
          let length = bytes.length * 8;
          if (algorithm.length !== undefined) {
            const l = +algorithm.length;
            if (l > length || l <= length - 8) throw domError('The HMAC length does not match the key.', 'DataError');
            length = l;
          }
          if (list.length === 0) throw domError('A secret key needs at least one usage.', 'SyntaxError');
          return newKey('secret', !!extractable, { name, hash: { name: hash }, length }, list, bytes);
        }
        if (name === 'AES-GCM') {
          const list = checkUsages(usages, ['encrypt', 'decrypt', 'wrapKey', 'unwrapKey']);
          let bytes;
          if (format === 'raw') bytes = bufferSource(keyData, 'importKey');
          else if (format === 'jwk') {
            if (typeof keyData !== 'object' || keyData === null || keyData.kty !== 'oct') throw domError('The JWK is not an oct key.', 'DataError');
            bytes = fromB64url(keyData.k);
          } else throw domError(`AES-GCM keys import from raw or jwk, not ${format}.`, 'NotSupportedError');
          if (![16, 24, 32].includes(bytes.length)) throw domError('An AES key is 128, 192 or 256 bits long.', 'DataError');
          if (format === 'jwk' && keyData.alg !== undefined && keyData.alg !== aesJwkAlg[bytes.length * 8]) throw domError(`The JWK alg ${keyData.alg} does not match the key length.`, 'DataError');
          if (list.length === 0) throw domError('A secret key needs at least one usage.', 'SyntaxError');
          return newKey('secret', !!extractable, { name, length: bytes.length * 8 }, list, bytes);
        }
        if (name === 'PBKDF2' || name === 'HKDF') {
          if (format !== 'raw') throw domError(`${name} keys import from raw only, not ${format}.`, 'NotSupportedError');
          const bytes = bufferSource(keyData, 'importKey');
          const list = checkUsages(usages, ['deriveKey', 'deriveBits']);
          if (extractable) throw domError(`${name} keys cannot be extractable.`, 'SyntaxError');
          if (list.length === 0) throw domError('A secret key needs at least one usage.', 'SyntaxError');
          return newKey('secret', false, { name }, list, bytes);
        }
        if (name === 'ECDSA' || name === 'Ed25519') return importAsymmetric(name, format, keyData, algorithm, extractable, usages);
        throw domError(`importKey does not support ${name}.`, 'NotSupportedError');
      };

      // ---- PBKDF2 and HKDF ----
      // Go's MaxPBKDF2Bytes (derive.go).
      const maxPBKDF2Bytes = 1048576;
      const hashBytes = { 'SHA-1': 20, 'SHA-256': 32, 'SHA-384': 48, 'SHA-512': 64 };
      // Web IDL's conversions: [EnforceRange] unsigned long and unsigned
      // short, and the plain unsigned long? of deriveBits' length.
      const enforceRange = (v, top, what) => {
        const n = +v;
        const t = n - n % 1;
        if (n !== n || n === Infinity || n === -Infinity || t < 0 || t > top) throw new TypeErrorCtor(`${what} must be an integer from 0 to ${top}.`);
        return t + 0;
      };
      const bitLength = (v) => {
        if (v === null || v === undefined) return null;
        const n = +v;
        if (n !== n || n === Infinity || n === -Infinity) return 0;
        const t = (n - n % 1) % 4294967296;
        return t < 0 ? t + 4294967296 : t + 0;
      };
      const deriveAlgorithm = (algorithm, op) => {
        const name = algorithmName(algorithm);
        if (name !== 'PBKDF2' && name !== 'HKDF') throw domError(`${op} does not support ${name}.`, 'NotSupportedError');
        // A dictionary's members are read in alphabetical order, then the
        // hash is normalized.
        if (algorithm.hash === undefined) throw new TypeErrorCtor(`${name}: the hash member is required.`);
        const params = { name };
        if (name === 'PBKDF2') {
          if (algorithm.iterations === undefined) throw new TypeErrorCtor('PBKDF2: the iterations member is required.');
          params.iterations = enforceRange(algorithm.iterations, 4294967295, 'PBKDF2 iterations');
        } else params.info = bufferSource(algorithm.info, 'HKDF info');
        params.salt = bufferSource(algorithm.salt, `${name} salt`);
        params.hash = hashName(algorithm.hash);
        return params;
      };
      // derive answers a promise of length bits derived from key's state,
      // the key's checks done.
      const derive = (params, st, length) => {
        if (length === null) throw domError('deriveBits needs a length, a multiple of 8 bits.', 'OperationError');
        if (length % 8 !== 0) throw domError(`The length must be a multiple of 8 bits, not ${length}.`, 'OperationError');
        const bytes = length / 8;
        if (params.name === 'HKDF') {
          const out = native('hkdf', params.hash, abOf(st.material), abOf(params.salt), abOf(params.info), bytes);
          if (out === null) throw domError(`HKDF with ${params.hash} derives at most ${255 * hashBytes[params.hash] * 8} bits.`, 'OperationError');
          return promiseResolve(out);
        }
        if (params.iterations === 0) throw domError('PBKDF2 needs at least one iteration.', 'OperationError');
        if (bytes === 0) return promiseResolve(new ArrayBufferCtor(0));
        if (bytes > maxPBKDF2Bytes) throw domError(`This runtime derives at most ${maxPBKDF2Bytes * 8} bits with PBKDF2.`, 'OperationError');
        return new PromiseCtor((resolve) => native('pbkdf2', params.hash, abOf(st.material), abOf(params.salt), params.iterations, bytes, resolve));
      };
      // keyLengthOf normalizes the key type deriveKey makes and answers its
      // "get key length", run once the base key passed its checks: bits, or
      // null for a type without a length.
      const keyLengthOf = (type) => {
        const name = algorithmName(type);
        if (name === 'AES-GCM') {
          if (type.length === undefined) throw new TypeErrorCtor('AES-GCM: the length member is required.');
          const bits = enforceRange(type.length, 65535, 'AES-GCM length');
          return () => {
            if (bits !== 128 && bits !== 192 && bits !== 256) throw domError('AES key length must be 128, 192 or 256 bits.', 'OperationError');
            return bits;
          };
        }
        if (name === 'HMAC') {
          if (type.hash === undefined) throw new TypeErrorCtor('HMAC: the hash member is required.');
          const bits = type.length === undefined ? undefined : enforceRange(type.length, 4294967295, 'HMAC length');
          const hash = hashName(type.hash);
          return () => {
            if (bits === 0) throw new TypeErrorCtor('HMAC: the length of a derived key cannot be zero.');
            return bits === undefined ? hashBlockBits[hash] : bits;
          };
        }
        if (name === 'PBKDF2' || name === 'HKDF') return () => null;
        throw domError(`deriveKey does not make ${name} keys.`, 'NotSupportedError');
      };

      // ---- ECDSA P-256 and Ed25519 ----
      // A private key's material is {priv, pub}, a public key's {priv: null,
      // pub}: the bytes Go reads (see asymmetric.go).
      const sameBytes = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
      const curveOf = (name, algorithm) => {
        if (name === 'ECDSA' && algorithm.namedCurve !== 'P-256') {
          throw domError(`This runtime supports ECDSA on the P-256 curve only, not ${StringCtor(algorithm.namedCurve)}.`, 'NotSupportedError');
        }
        return name === 'ECDSA' ? { name, namedCurve: 'P-256' } : { name };
      };
      const asymmetricKey = (name, algorithm, type, extractable, usages, priv, pub) => {
        const list = checkUsages(usages, type === 'private' ? ['sign'] : ['verify']);
        if (type === 'private' && list.length === 0) throw domError('A private key needs at least one usage.', 'SyntaxError');
        return newKey(type, !!extractable, curveOf(name, algorithm), list, { priv, pub });
      };
      const dataError = (what) => domError(`The ${what} is not a valid key for this algorithm.`, 'DataError');
      function importAsymmetric(name, format, keyData, algorithm, extractable, usages) {
        curveOf(name, algorithm);
        const ec = name === 'ECDSA';
        if (format === 'raw') {
          const pub = bufferSource(keyData, 'importKey');
          if (ec ? !native('asym', 'ecValid', abOf(pub)) : pub.length !== 32) throw dataError('raw public key');
          return asymmetricKey(name, algorithm, 'public', extractable, usages, null, pub);
        }
        if (format === 'spki') {
          const r = native('asym', 'spki', abOf(bufferSource(keyData, 'importKey')));
          if (r === null || r[0] !== name) throw dataError('SubjectPublicKeyInfo');
          return asymmetricKey(name, algorithm, 'public', extractable, usages, null, new U8(r[1]));
        }
        if (format === 'pkcs8') {
          const r = native('asym', 'pkcs8', abOf(bufferSource(keyData, 'importKey')));
          if (r === null || r[0] !== name) throw dataError('PKCS #8 private key');
          return asymmetricKey(name, algorithm, 'private', extractable, usages, new U8(r[1]), new U8(r[2]));
        }
        if (format === 'jwk') {
          if (typeof keyData !== 'object' || keyData === null) throw dataError('JWK');
          let pub;
          if (ec) {
            if (keyData.kty !== 'EC' || keyData.crv !== 'P-256') throw dataError('JWK');
            const x = fromB64url(keyData.x), y = fromB64url(keyData.y);
            if (x.length !== 32 || y.length !== 32) throw dataError('JWK');
            pub = concatBytes([new U8([4]), x, y]);
            if (!native('asym', 'ecValid', abOf(pub))) throw dataError('JWK');
          } else {
            if (keyData.kty !== 'OKP' || keyData.crv !== 'Ed25519') throw dataError('JWK');
            pub = fromB64url(keyData.x);
            if (pub.length !== 32) throw dataError('JWK');
          }
          if (keyData.d === undefined) return asymmetricKey(name, algorithm, 'public', extractable, usages, null, pub);
          const priv = fromB64url(keyData.d);
          const derived = native('asym', ec ? 'ecPublicOf' : 'edPublicOf', abOf(priv));
          if (derived === null || !sameBytes(new U8(derived), pub)) throw dataError('JWK');
          return asymmetricKey(name, algorithm, 'private', extractable, usages, priv, pub);
        }
        throw domError(`${name} keys import from raw, spki, pkcs8 or jwk, not ${format}.`, 'NotSupportedError');
      }
      function exportAsymmetric(st, format) {
        const name = st.algorithm.name, ec = name === 'ECDSA', { priv, pub } = st.material;
        if (format === 'raw' || format === 'spki') {
          if (st.type !== 'public') throw domError(`A private key does not export as ${format}.`, 'InvalidAccessError');
          return format === 'raw' ? abOf(pub) : native('asym', 'toSPKI', name, abOf(pub));
        }
        if (format === 'pkcs8') {
          if (st.type !== 'private') throw domError('A public key does not export as pkcs8.', 'InvalidAccessError');
          return native('asym', 'toPKCS8', name, abOf(priv));
        }
        if (format === 'jwk') {
          const jwk = ec
            ? { kty: 'EC', crv: 'P-256', x: b64url(call(u8Slice, pub, 1, 33)), y: b64url(call(u8Slice, pub, 33, 65)) }
            : { kty: 'OKP', crv: 'Ed25519', x: b64url(pub) };
          if (priv !== null) jwk.d = b64url(priv);
          jwk.key_ops = [...st.usages];
          jwk.ext = true;
          return jwk;
        }
        throw domError(`${name} keys export as raw, spki, pkcs8 or jwk, not ${format}.`, 'NotSupportedError');
      }
      function generateAsymmetric(name, algorithm, extractable, usages) {
        curveOf(name, algorithm);
        const list = checkUsages(usages, ['sign', 'verify']);
        const [priv, pub] = native('asym', name === 'ECDSA' ? 'ecGenerate' : 'edGenerate');
        return {
          publicKey: asymmetricKey(name, algorithm, 'public', true, list.filter((u) => u === 'verify'), null, new U8(pub)),
          privateKey: asymmetricKey(name, algorithm, 'private', extractable, list.filter((u) => u === 'sign'), new U8(priv), new U8(pub)),
        };
      }

      class SubtleCrypto {
        constructor(token) { if (token !== INTERNAL) throw new TypeErrorCtor('Illegal constructor'); }
        digest(algorithm, data) {
          return settleAsync(() => {
            const name = hashName(algorithm);
            const [buf, off, len] = sourceRange(data, 'digest');
            return native('digest', name, buf, off, len);
          });
        }
        importKey(format, keyData, algorithm, extractable, keyUsages) {
          return settleAsync(() => importKey(format, keyData, algorithm, extractable, keyUsages));
        }
        exportKey(format, key) {
          return settleAsync(() => {
            const st = key instanceof CryptoKey ? call(weakGet, keyState, key) : undefined;
            if (!st) throw new TypeErrorCtor('The key is not a CryptoKey.');
            if (!st.extractable) throw domError('The key is not extractable.', 'InvalidAccessError');
            format = StringCtor(format);
            if (st.type !== 'secret') return exportAsymmetric(st, format);
            if (format === 'raw') return abOf(st.material);
            if (format === 'jwk') {
              const alg = st.algorithm.name === 'HMAC' ? jwkAlg.HMAC[st.algorithm.hash.name] : aesJwkAlg[st.algorithm.length];
              return { kty: 'oct', k: b64url(st.material), alg, key_ops: [...st.usages], ext: true };
            }
            throw domError(`Secret keys export as raw or jwk, not ${format}.`, 'NotSupportedError');
          });
        }
        generateKey(algorithm, extractable, keyUsages) {
          return settleAsync(() => {
            const name = algorithmName(algorithm);
            if (name === 'HMAC') {
              const hash = hashName(algorithm.hash);
              const bits = algorithm.length !== undefined ? +algorithm.length : hashBlockBits[hash];
              if (!(bits > 0) || bits % 8 !== 0 || bits > 8192) throw domError('The HMAC key length must be a positive multiple of 8 bits.', 'OperationError');
              return importKey('raw', native('randomBytes', bits / 8), { name, hash }, extractable, keyUsages);
            }
            if (name === 'AES-GCM') {
              const bits = +algorithm.length;
              if (![128, 192, 256].includes(bits)) throw domError('AES key length must be 128, 192 or 256 bits.', 'OperationError');
              return importKey('raw', native('randomBytes', bits / 8), { name }, extractable, keyUsages);
            }
            if (name === 'ECDSA' || name === 'Ed25519') return generateAsymmetric(name, algorithm, extractable, keyUsages);
            throw domError(`generateKey does not support ${name}.`, 'NotSupportedError');
          });
        }
        sign(algorithm, key, data) {
          return settleAsync(() => {
            const name = algorithmName(algorithm);
            if (name === 'ECDSA' || name === 'Ed25519') {
              const st = keyOf(key, 'sign', name);
              const bytes = abOf(bufferSource(data, 'sign'));
              const sig = name === 'ECDSA'
                ? native('asym', 'ecSign', abOf(st.material.priv), hashName(algorithm.hash), bytes)
                : native('asym', 'edSign', abOf(st.material.priv), bytes);
              if (sig === null) throw domError('The operation failed for an operation-specific reason', 'OperationError');
              return sig;
            }
            if (name !== 'HMAC') throw domError(`sign does not support ${name}.`, 'NotSupportedError');
            const st = keyOf(key, 'sign', name);
            const [buf, off, len] = sourceRange(data, 'sign');
            return native('hmacSign', st.algorithm.hash.name, abOf(st.material), buf, off, len);
          });
        }
        verify(algorithm, key, signature, data) {
          return settleAsync(() => {
            const name = algorithmName(algorithm);
            if (name === 'ECDSA' || name === 'Ed25519') {
              const st = keyOf(key, 'verify', name);
              const sig = abOf(bufferSource(signature, 'verify')), bytes = abOf(bufferSource(data, 'verify'));
              return name === 'ECDSA'
                ? native('asym', 'ecVerify', abOf(st.material.pub), hashName(algorithm.hash), sig, bytes)
                : native('asym', 'edVerify', abOf(st.material.pub), sig, bytes);
            }
            if (name !== 'HMAC') throw domError(`verify does not support ${name}.`, 'NotSupportedError');
            const st = keyOf(key, 'verify', name);
            const sig = abOf(bufferSource(signature, 'verify'));
            const [buf, off, len] = sourceRange(data, 'verify');
            return native('hmacVerify', st.algorithm.hash.name, abOf(st.material), sig, buf, off, len);
          });
        }
        deriveBits(algorithm, baseKey, length) {
          return settleAsync(() => {
            const bits = bitLength(length);
            const params = deriveAlgorithm(algorithm, 'deriveBits');
            return derive(params, keyOf(baseKey, 'deriveBits', params.name), bits);
          });
        }
        deriveKey(algorithm, baseKey, derivedKeyType, extractable, keyUsages) {
          return settleAsync(() => {
            const params = deriveAlgorithm(algorithm, 'deriveKey');
            const lengthOf = keyLengthOf(derivedKeyType);
            const st = keyOf(baseKey, 'deriveKey', params.name);
            return then(derive(params, st, lengthOf()), (secret) => importKey('raw', secret, derivedKeyType, extractable, keyUsages));
          });
        }
        encrypt(algorithm, key, data) { return settleAsync(() => aesGcm(true, algorithm, key, data)); }
        decrypt(algorithm, key, data) { return settleAsync(() => aesGcm(false, algorithm, key, data)); }
      }
      for (const m of ['wrapKey', 'unwrapKey']) {
        defineProperty(SubtleCrypto.prototype, m, {
          value: function () { return promiseReject(domError(`crypto.subtle.${m} is not supported by this runtime.`, 'NotSupportedError')); },
          writable: true, configurable: true,
        });
      }
      setTag(SubtleCrypto, 'SubtleCrypto');
      const gcmTags = [32, 64, 96, 104, 112, 120, 128];
      function aesGcm(seal, algorithm, key, data) {
        const name = algorithmName(algorithm);
        if (name !== 'AES-GCM') throw domError(`${seal ? 'encrypt' : 'decrypt'} does not support ${name}.`, 'NotSupportedError');
        const st = keyOf(key, seal ? 'encrypt' : 'decrypt', name);
        const iv = bufferSource(algorithm.iv, 'AES-GCM iv');
        const aad = algorithm.additionalData === undefined ? new U8(0) : bufferSource(algorithm.additionalData, 'AES-GCM additionalData');
        const tag = algorithm.tagLength === undefined ? 128 : +algorithm.tagLength;
        if (!gcmTags.includes(tag)) throw domError('AES-GCM tagLength must be one of 32, 64, 96, 104, 112, 120, 128.', 'OperationError');
        if (iv.length === 0) throw domError('AES-GCM needs a non-empty iv.', 'OperationError');
        if (tag < 96 || (tag !== 128 && iv.length !== 12)) throw domError('This runtime supports AES-GCM tags of 96 to 128 bits (with a 12-byte iv unless the tag is 128 bits).', 'NotSupportedError');
        const [buf, off, len] = sourceRange(data, seal ? 'encrypt' : 'decrypt');
        const out = native('aesGcm', seal, abOf(st.material), abOf(iv), abOf(aad), tag / 8, buf, off, len);
        if (out === null) throw domError('The operation failed for an operation-specific reason', 'OperationError');
        return out;
      }

      class Crypto {
        #subtle = new SubtleCrypto(INTERNAL);
        constructor(token) { if (token !== INTERNAL) throw new TypeErrorCtor('Illegal constructor'); }
        get subtle() { return this.#subtle; }
        getRandomValues(array) {
          requireArgs(1, arguments.length, 'getRandomValues');
          const kind = viewKind(array);
          if (!integerArrays.includes(kind)) throw domError("Failed to execute 'getRandomValues' on 'Crypto': The provided ArrayBufferView is not an integer array type.", 'TypeMismatchError');
          const [buf, off, len] = viewRange(array);
          if (len > 65536) throw domError(`Failed to execute 'getRandomValues' on 'Crypto': The ArrayBufferView's byte length (${len}) exceeds the number of bytes of entropy available via this API (65536).`, 'QuotaExceededError');
          native('randomFill', buf, off, len);
          return array;
        }
        randomUUID() { return native('randomUUID'); }
      }
      setTag(Crypto, 'Crypto');
      return { crypto: new Crypto(INTERNAL), Crypto, SubtleCrypto, CryptoKey };
    });

    // ---- declared absences ----

    const absences = section(() => {
      const { domError } = dom();
      const notSupported = (text) => domError(text, 'NotSupportedError');
      const CompressionStream = function CompressionStream() { throw notSupported(texts.compressionStream); };
      const DecompressionStream = function DecompressionStream() { throw notSupported(texts.decompressionStream); };
      // SharedArrayBuffer: the contract declares only its grow absent, so
      // the rest works. A run has no second thread, so a shared buffer is
      // an ArrayBuffer's memory (metered like any other) under this
      // prototype; typed arrays and DataView take it as they take an
      // ArrayBuffer. shared maps each one to its maxByteLength, or to -1
      // when it was made fixed-length.
      const setPrototypeOf = ObjectCtor.setPrototypeOf, MathTrunc = Math.trunc;
      const shared = new WeakMapCtor();
      const toIndex = (v, what) => {
        const n = v === undefined ? 0 : MathTrunc(+v || 0);
        if (n < 0 || n > 9007199254740991) throw new RangeErrorCtor(`Invalid ${what}: ${StringCtor(v)}`);
        return n;
      };
      const brand = (self, member) => {
        if (typeof self !== 'object' || self === null || !call(weakHas, shared, self)) {
          throw new TypeErrorCtor(`SharedArrayBuffer.prototype.${member} called on an object that is not a SharedArrayBuffer`);
        }
        return self;
      };
      const makeShared = (length, max, proto) => {
        const buf = new ArrayBufferCtor(length);
        setPrototypeOf(buf, proto);
        call(weakSet, shared, buf, max);
        return buf;
      };
      const SharedArrayBuffer = function SharedArrayBuffer(length, options) {
        if (new.target === undefined) throw new TypeErrorCtor("Constructor SharedArrayBuffer requires 'new'");
        const n = toIndex(length, 'array buffer length');
        let max = -1;
        if (typeof options === 'object' && options !== null && options.maxByteLength !== undefined) {
          max = toIndex(options.maxByteLength, 'maxByteLength');
          if (n > max) throw new RangeErrorCtor(`Invalid array buffer length: ${n} is above maxByteLength ${max}`);
        }
        const proto = new.target.prototype;
        return makeShared(n, max, typeof proto === 'object' && proto !== null ? proto : SharedArrayBuffer.prototype);
      };
      const sharedProto = SharedArrayBuffer.prototype;
      const getter = (name, get) => defineProperty(sharedProto, name, { get: { [name]: get }[name], configurable: true, enumerable: false });
      getter('byteLength', function () { return call(abByteLength, brand(this, 'byteLength')); });
      getter('growable', function () { return call(weakGet, shared, brand(this, 'growable')) >= 0; });
      getter('maxByteLength', function () {
        const max = call(weakGet, shared, brand(this, 'maxByteLength'));
        return max >= 0 ? max : call(abByteLength, this);
      });
      const methods = {
        grow(newLength) { throw notSupported(texts.grow); },
        slice(start, end) {
          const bytes = new U8(brand(this, 'slice'));
          const part = call(u8Slice, bytes, start, end);
          const out = makeShared(call(taByteLength, part), -1, sharedProto);
          call(u8Set, new U8(out), part);
          return out;
        },
      };
      for (const name of ['grow', 'slice']) {
        defineProperty(sharedProto, name, { value: methods[name], writable: true, configurable: true, enumerable: false });
      }
      defineProperty(sharedProto, SymbolToStringTag, { value: 'SharedArrayBuffer', configurable: true });
      // caches: the members of CacheStorage on a plain object, no interface
      // object behind them; each rejects with the persistence text.
      const rejectAbsent = () => promiseReject(notSupported(texts.caches));
      const caches = ObjectCtor.create({
        match(request, options) { return rejectAbsent(); },
        has(cacheName) { return rejectAbsent(); },
        open(cacheName) { return rejectAbsent(); },
        delete(cacheName) { return rejectAbsent(); },
        keys() { return rejectAbsent(); },
      });
      return { CompressionStream, DecompressionStream, SharedArrayBuffer, caches };
    });

    return { dom, encoding, url, fetchApi, cloneSection, cryptoSection, absences };
  }
  const dom = () => core().dom();

  // ---- declared absences ----

  // resize lives on a prototype, so it is defined now; the absent globals
  // are published lazily with the rest (see absences in build).
  defineProperty(ArrayBuffer.prototype, 'resize', {
    value: { resize(newLength) { throw dom().domError(texts.resize, 'NotSupportedError'); } }.resize,
    writable: true, configurable: true, enumerable: false,
  });

  // ---- publish ----

  // Every other global is an accessor Go defined before this ran (one Go
  // function per name, far cheaper in goja than a JavaScript closure). Its
  // first read calls publish, which builds the name's section and replaces
  // the section's names that are still those accessors with plain writable
  // data properties, keeping each one's enumerability. A name the program
  // assigned or deleted first stays as it made it. Index loops, not for-of:
  // a program may have replaced the array iterator by then.
  const getters = host.getters;
  const lazyGlobals = host.lazyGlobals;
  const isLazy = (n) => {
    const d = ObjectCtor.getOwnPropertyDescriptor(g, n);
    return d !== undefined && d.get !== undefined && d.get === getters[n] ? d : undefined;
  };
  const publish = (sectionName, name) => {
    let names = [];
    for (let i = 0; i < lazyGlobals.length; i++) if (lazyGlobals[i][0] === sectionName) names = lazyGlobals[i][1];
    const exports = core()[sectionName]();
    for (let k = 0; k < names.length; k++) {
      const n = names[k], d = isLazy(n);
      if (d !== undefined) defineProperty(g, n, { value: exports[n], writable: true, configurable: true, enumerable: d.enumerable });
    }
    return isLazy(name) !== undefined ? undefined : g[name];
  };

  // What Go keeps (never the guest): publish and the handle exchange.
  return {
    publish,
    makeRequest: (method, url, flat, body) => core().fetchApi().makeRequest(method, url, flat, body),
    serializeResponse: (r) => core().fetchApi().serializeResponse(r),
  };
})
