// The sandbox bootstrap. It runs once in every fresh runtime before any guest
// code, captures the intrinsics it relies on (so a program that replaces
// JSON.stringify or Promise.prototype.then cannot break the codec or the
// run's settlement), installs the console and queueMicrotask, and returns the
// values the entry module's scope receives.
//
// `host` holds the Go functions of one run. It is a parameter of this
// function only: nothing here stores it where guest code can reach it.
(function (host) {
  'use strict';
  const { capture, settle, grant, uncaught, dispatch, encodeBase64Bytes, decodeBase64Buffer, parseDispatchText } = host;
  const ObjectCtor = Object;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const PromiseCtor = Promise;
  const promiseResolve = Promise.resolve.bind(Promise);
  const promiseThen = Promise.prototype.then;
  const jsonStringify = JSON.stringify;
  const jsonParse = JSON.parse;
  const isArray = Array.isArray;
  const isView = ArrayBuffer.isView;
  const ArrayBufferCtor = ArrayBuffer;
  const objectHasOwn = Object.prototype.hasOwnProperty;
  const hasOwn = (o, k) => objectHasOwn.call(o, k);
  const objectKeys = Object.keys;
  const StringCtor = String;

  // The intrinsics the binary codec and the console inspector use are
  // captured on first use: capturing them up front makes goja build every
  // prototype they live on, which would triple the cost of a trivial run.
  let I;
  const intrinsics = () => {
    if (I !== undefined) return I;
    const getOwnDesc = ObjectCtor.getOwnPropertyDescriptor;
    const typedArrayProto = ObjectCtor.getPrototypeOf(Uint8Array.prototype);
    I = {
      Uint8ArrayCtor: Uint8Array,
      getProto: ObjectCtor.getPrototypeOf,
      ownKeys: Reflect.ownKeys,
      getOwnDesc,
      symbolToString: Symbol.prototype.toString,
      fnToString: Function.prototype.toString,
      errorToString: Error.prototype.toString,
      dateToISO: Date.prototype.toISOString,
      dateGetTime: Date.prototype.getTime,
      RegExpCtor: RegExp,
      regexpToString: RegExp.prototype.toString,
      mapEntries: Map.prototype.entries,
      setValues: Set.prototype.values,
      mapSize: getOwnDesc(Map.prototype, 'size').get,
      setSize: getOwnDesc(Set.prototype, 'size').get,
      abByteLength: getOwnDesc(ArrayBuffer.prototype, 'byteLength').get,
      taBuffer: getOwnDesc(typedArrayProto, 'buffer').get,
      taByteOffset: getOwnDesc(typedArrayProto, 'byteOffset').get,
      taByteLength: getOwnDesc(typedArrayProto, 'byteLength').get,
      taLength: getOwnDesc(typedArrayProto, 'length').get,
      taTag: getOwnDesc(typedArrayProto, Symbol.toStringTag).get,
      dvBuffer: getOwnDesc(DataView.prototype, 'buffer').get,
      dvByteOffset: getOwnDesc(DataView.prototype, 'byteOffset').get,
      dvByteLength: getOwnDesc(DataView.prototype, 'byteLength').get,
      arrayJoin: Array.prototype.join,
      arrayPush: Array.prototype.push,
      stringReplace: String.prototype.replace,
      regexpTest: RegExp.prototype.test,
      identifierPattern: /^[A-Za-z_$][A-Za-z0-9_$]*$/,
    };
    return I;
  };

  // ---- the dispatch codec: the contract's names, assembled from its parts ----

  const BINARY_TAG = host.binaryTag;

  // Brand checks without exceptions (stringify asks about every object it
  // writes): instanceof filters cheaply, the getter confirms the brand.
  let abByteLength;
  const isArrayBuffer = (v) => {
    if (!(v instanceof ArrayBufferCtor)) return false;
    abByteLength = abByteLength || ObjectCtor.getOwnPropertyDescriptor(ArrayBufferCtor.prototype, 'byteLength').get;
    try { abByteLength.call(v); return true; } catch { return false; }
  };
  // A view is a DataView when the typed-array tag getter, which answers
  // undefined for anything but a typed array, has no tag for it.
  const isDataView = (v) => intrinsics().taTag.call(v) === undefined;
  // viewBytes gives a Uint8Array over exactly the bytes of a view.
  const viewBytes = (v) => isDataView(v)
    ? new (intrinsics().Uint8ArrayCtor)(intrinsics().dvBuffer.call(v), intrinsics().dvByteOffset.call(v), intrinsics().dvByteLength.call(v))
    : new (intrinsics().Uint8ArrayCtor)(intrinsics().taBuffer.call(v), intrinsics().taByteOffset.call(v), intrinsics().taByteLength.call(v));

  // encodeBase64 writes standard base64 with padding. It takes a Uint8Array
  // (any view or ArrayBuffer works: their bytes are encoded).
  const encodeBase64 = (bytes) => {
    if (!isView(bytes) && !isArrayBuffer(bytes)) {
      throw new TypeErrorCtor('__encodeBase64 expects a Uint8Array');
    }
    const u8 = isArrayBuffer(bytes) ? new (intrinsics().Uint8ArrayCtor)(bytes) : viewBytes(bytes);
    return encodeBase64Bytes(intrinsics().taBuffer.call(u8), intrinsics().taByteOffset.call(u8), intrinsics().taByteLength.call(u8));
  };
  // decodeBase64 reads standard base64, padding optional, into a
  // Uint8Array; anything else throws a TypeError.
  const decodeBase64 = (text) => new (intrinsics().Uint8ArrayCtor)(decodeBase64Buffer(StringCtor(text)));

  // encodeBinaryValue gives the envelope of a Uint8Array or an ArrayBuffer
  // (tag Uint8Array) or of any other view (tag ArrayBufferView, its own bytes
  // in memory order), and undefined for anything else.
  const encodeBinaryValue = (value) => {
    if (value === null || typeof value !== 'object') return undefined;
    let kind;
    if (isView(value)) {
      kind = !isDataView(value) && intrinsics().taTag.call(value) === 'Uint8Array' ? 'Uint8Array' : 'ArrayBufferView';
    } else if (isArrayBuffer(value)) {
      kind = 'Uint8Array';
    } else {
      return undefined;
    }
    const envelope = {};
    envelope[BINARY_TAG] = kind;
    envelope.data = encodeBase64(value);
    return envelope;
  };
  // decodeBinaryValue gives the bytes of an envelope (own keys exactly the
  // tag and data, a known tag, string data) and the value itself otherwise.
  const decodeBinaryValue = (value) => {
    if (value === null || typeof value !== 'object' || isArray(value)) return value;
    const keys = objectKeys(value);
    if (keys.length !== 2 || !hasOwn(value, BINARY_TAG) || !hasOwn(value, 'data')) return value;
    const tag = value[BINARY_TAG];
    if ((tag !== 'Uint8Array' && tag !== 'ArrayBufferView') || typeof value.data !== 'string') return value;
    return decodeBase64(value.data);
  };
  const stringifyForDispatch = (value) => jsonStringify(value, function (key, converted) {
    // this[key] is the value before toJSON ran: a toJSON on a view would
    // otherwise hide that it is bytes.
    let envelope = encodeBinaryValue(this[key]);
    if (envelope === undefined) envelope = encodeBinaryValue(converted);
    return envelope === undefined ? converted : envelope;
  });
  // parseForDispatch reads JSON as JSON.parse does, envelopes turned into
  // bytes. It is the Go codec's reader: goja's own JSON.parse turns an
  // escaped lone surrogate into U+FFFD, where JavaScript keeps it.
  const parseForDispatch = (text) => parseDispatchText(StringCtor(text));

  // ---- the console ----

  const quote = (s) => "'" + intrinsics().stringReplace.call(s, /[\\'\n\r\t]/g, (c) =>
    c === '\n' ? '\\n' : c === '\r' ? '\\r' : c === '\t' ? '\\t' : '\\' + c) + "'";
  const keyText = (k) => typeof k === 'symbol' ? '[' + intrinsics().symbolToString.call(k) + ']'
    : intrinsics().regexpTest.call(intrinsics().identifierPattern, k) ? k : quote(k);
  const maxItems = 100;
  const maxDepth = 2;

  const constructorName = (o) => {
    try {
      const proto = intrinsics().getProto(o);
      if (proto === null) return null;
      const ctor = intrinsics().getOwnDesc(proto, 'constructor');
      if (ctor && typeof ctor.value === 'function' && typeof ctor.value.name === 'string') return ctor.value.name;
    } catch {}
    return '';
  };
  const functionText = (f) => {
    let name = '';
    try { name = typeof f.name === 'string' ? f.name : ''; } catch {}
    let isClass = false;
    try { isClass = /^class\b/.test(intrinsics().fnToString.call(f)); } catch {}
    if (isClass) return '[class ' + (name || '(anonymous)') + ']';
    return name ? '[Function: ' + name + ']' : '[Function (anonymous)]';
  };
  const errorText = (e) => {
    try {
      const stack = e.stack;
      if (typeof stack === 'string' && stack !== '') {
        // goja appends a bytecode offset to each frame; a reader has no use for it.
        return intrinsics().stringReplace.call(stack, /\(\d+\)$/gm, '');
      }
    } catch {}
    try { return intrinsics().errorToString.call(e); } catch { return '[Error]'; }
  };

  const inspect = (v, depth, seen) => {
    switch (typeof v) {
      case 'string': return depth === 0 ? v : quote(v);
      case 'number': return v === 0 && 1 / v < 0 ? '-0' : StringCtor(v);
      case 'bigint': return StringCtor(v) + 'n';
      case 'boolean': return v ? 'true' : 'false';
      case 'undefined': return 'undefined';
      case 'symbol': return intrinsics().symbolToString.call(v);
      case 'function': return functionText(v);
    }
    if (v === null) return 'null';
    if (seen.indexOf(v) !== -1) return '[Circular]';
    if (v instanceof ErrorCtor) return errorText(v);
    if (isArrayBuffer(v)) return 'ArrayBuffer { byteLength: ' + intrinsics().abByteLength.call(v) + ' }';
    if (isView(v) && !isDataView(v)) {
      const n = intrinsics().taLength.call(v);
      const parts = [];
      for (let i = 0; i < n && i < maxItems; i++) intrinsics().arrayPush.call(parts, inspect(v[i], depth + 1, seen));
      if (n > maxItems) intrinsics().arrayPush.call(parts, '... ' + (n - maxItems) + ' more items');
      return intrinsics().taTag.call(v) + '(' + n + ') ' + (n === 0 ? '[]' : '[ ' + intrinsics().arrayJoin.call(parts, ', ') + ' ]');
    }
    let time;
    try { time = intrinsics().dateGetTime.call(v); } catch {}
    if (time !== undefined) return time === time ? intrinsics().dateToISO.call(v) : 'Invalid Date';
    if (v instanceof intrinsics().RegExpCtor) {
      try { return intrinsics().regexpToString.call(v); } catch {}
    }
    return inspectObject(v, depth, seen);
  };
  const inspectObject = (v, depth, seen) => {
    let size = -1, kind = '';
    try { size = intrinsics().mapSize.call(v); kind = 'Map'; } catch {}
    if (kind === '') { try { size = intrinsics().setSize.call(v); kind = 'Set'; } catch {} }
    if (kind !== '') {
      if (depth > maxDepth) return '[' + kind + ']';
      const parts = [];
      seen.push(v);
      let i = 0;
      if (kind === 'Map') {
        for (const [k, val] of intrinsics().mapEntries.call(v)) {
          if (i++ >= maxItems) break;
          intrinsics().arrayPush.call(parts, inspect(k, depth + 1, seen) + ' => ' + inspect(val, depth + 1, seen));
        }
      } else {
        for (const val of intrinsics().setValues.call(v)) {
          if (i++ >= maxItems) break;
          intrinsics().arrayPush.call(parts, inspect(val, depth + 1, seen));
        }
      }
      seen.pop();
      if (size > maxItems) intrinsics().arrayPush.call(parts, '... ' + (size - maxItems) + ' more items');
      return kind + '(' + size + ') ' + (parts.length === 0 ? '{}' : '{ ' + intrinsics().arrayJoin.call(parts, ', ') + ' }');
    }
    if (v instanceof PromiseCtor) return 'Promise {}';
    const array = isArray(v);
    if (depth > maxDepth) return array ? '[Array]' : '[Object]';
    const parts = [];
    seen.push(v);
    let keys;
    try { keys = intrinsics().ownKeys(v); } catch (e) { seen.pop(); return '[Object]'; }
    let shown = 0, hidden = 0;
    if (array) {
      const n = v.length;
      for (let i = 0; i < n; i++) {
        if (shown >= maxItems) { hidden = n - i; break; }
        intrinsics().arrayPush.call(parts, hasOwn(v, i) ? inspect(v[i], depth + 1, seen) : '<empty>');
        shown++;
      }
    }
    for (const k of keys) {
      if (array && (k === 'length' || (typeof k === 'string' && StringCtor(k >>> 0) === k))) continue;
      const d = intrinsics().getOwnDesc(v, k);
      if (!d || !d.enumerable) continue;
      if (shown >= maxItems) { hidden++; continue; }
      let text;
      if (d.get || d.set) text = d.get && d.set ? '[Getter/Setter]' : d.get ? '[Getter]' : '[Setter]';
      else text = inspect(d.value, depth + 1, seen);
      intrinsics().arrayPush.call(parts, keyText(k) + ': ' + text);
      shown++;
    }
    seen.pop();
    if (hidden > 0) intrinsics().arrayPush.call(parts, '... ' + hidden + ' more items');
    if (array) return parts.length === 0 ? '[]' : '[ ' + intrinsics().arrayJoin.call(parts, ', ') + ' ]';
    const name = constructorName(v);
    const prefix = name === null ? '[Object: null prototype] ' : name === 'Object' || name === '' ? '' : name + ' ';
    return prefix + (parts.length === 0 ? '{}' : '{ ' + intrinsics().arrayJoin.call(parts, ', ') + ' }');
  };
  const format = (args) => {
    const parts = [];
    for (let i = 0; i < args.length; i++) intrinsics().arrayPush.call(parts, inspect(args[i], 0, []));
    return intrinsics().arrayJoin.call(parts, ' ');
  };

  const console = {};
  for (const name of ['assert', 'clear', 'count', 'countReset', 'debug', 'dir', 'dirxml', 'group',
    'groupCollapsed', 'groupEnd', 'info', 'table', 'time', 'timeEnd', 'timeLog', 'trace']) {
    console[name] = { [name]: function () {} }[name];
  }
  console.log = function log(...args) { capture('log', format(args)); };
  console.warn = function warn(...args) { capture('warn', format(args)); };
  console.error = function error(...args) { capture('error', format(args)); };
  ObjectCtor.defineProperty(globalThis, 'console', { value: console, writable: true, configurable: true, enumerable: false });

  // ---- queueMicrotask ----

  const resolved = promiseResolve(undefined);
  const queueMicrotask = function queueMicrotask(callback) {
    if (typeof callback !== 'function') {
      throw new TypeErrorCtor("Failed to execute 'queueMicrotask': parameter 1 is not of type 'Function'.");
    }
    // An exception nobody can catch ends the run, as it ends a Node process.
    promiseThen.call(resolved, () => { try { callback(); } catch (e) { uncaught(messageOf(e)); } });
  };
  ObjectCtor.defineProperty(globalThis, 'queueMicrotask', { value: queueMicrotask, writable: true, configurable: true, enumerable: true });

  // ---- the run's settlement ----

  // messageOf is the text a thrown value reports in the envelope: an error's
  // message as it reads, anything else as String() gives it.
  const messageOf = (e) => {
    try {
      if (e !== null && typeof e === 'object' && e instanceof ErrorCtor) {
        const m = e.message;
        return typeof m === 'string' ? m : StringCtor(m);
      }
      if (e !== null && typeof e === 'object' && typeof e.message === 'string') return e.message;
      return StringCtor(e);
    } catch {
      try { return intrinsics().errorToString.call(e); } catch { return 'Uncaught exception'; }
    }
  };
  // isHandler says whether a run's value is a fetch handler in the shape a
  // Workers entrypoint exports: a function, or an object with a fetch
  // method.
  const isHandler = (value) => typeof value === 'function' ||
    (value !== null && typeof value === 'object' && typeof value.fetch === 'function');
  let retain = false;
  const fulfilled = (value) => {
    if (retain) {
      let handler;
      try { handler = isHandler(value); } catch (e) { settle(false, messageOf(e)); return; }
      if (handler) { grant(value); return; }
    }
    let json;
    try { json = stringifyForDispatch(value); } catch (e) { settle(false, messageOf(e)); return; }
    settle(true, json);
  };
  const rejected = (reason) => { settle(false, messageOf(reason)); };

  // start evaluates the entry module wrapper, invokes its default export and
  // settles the run with whatever that settles to.
  const start = (wrapper, require, retainHandles) => {
    retain = retainHandles === true;
    const module = { exports: {} };
    let settled;
    try {
      wrapper.call(undefined, module.exports, require, module, dispatch, stringifyForDispatch,
        parseForDispatch, BINARY_TAG, encodeBinaryValue, decodeBinaryValue, encodeBase64, decodeBase64);
      const entry = module.exports.default;
      if (typeof entry !== 'function') {
        throw new TypeErrorCtor('The program is ' + inspect(entry, 1, []) +
          ', not a function. Write it as an arrow, for example async () => { … }.');
      }
      settled = promiseResolve(entry());
    } catch (e) {
      rejected(e);
      return;
    }
    promiseThen.call(settled, fulfilled, rejected);
  };

  // callHandler calls a granted fetch handler with one Request and reports
  // how it settled: done(true, value) or done(false, message).
  const callHandler = (handler, request, done) => {
    let answer;
    try {
      answer = promiseResolve(typeof handler === 'function' ? handler(request) : handler.fetch(request));
    } catch (e) {
      done(false, messageOf(e));
      return;
    }
    promiseThen.call(answer, (v) => { done(true, v); }, (e) => { done(false, messageOf(e)); });
  };

  // makeError builds the plain Error a host function throws or rejects with.
  const makeError = (message) => new ErrorCtor(message);

  // bytesOf wraps an ArrayBuffer the host made in a Uint8Array.
  const bytesOf = (buffer) => new (intrinsics().Uint8ArrayCtor)(buffer);

  return { start, callHandler, makeError, messageOf, jsonParse, bytesOf };
})
