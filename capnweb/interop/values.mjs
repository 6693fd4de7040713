// The named test values shared by every interop script, and a strict comparison for them.
//
// interop_test.go holds the same table built from Go values (goNamedValues). The two tables
// must agree name by name: a server's expect(name, v) checks a received value against its own
// table, and value(name) returns the entry from its own table.

// namedValues builds a fresh copy of every test value, keyed by name, as a sender passes it.
export function namedValues() {
  const nested = (depth) => (depth === 0 ? "bottom" : [nested(depth - 1)]);
  const errorCode = new Error("error with a code");
  errorCode.code = "E_CODE";
  errorCode.count = 5;
  const typedError = new TypeError("typed error");
  typedError.code = "E_TYPED";
  return {
    string_ascii: "hello",
    string_empty: "",
    // Characters JSON encoders treat differently: U+2028/2029 (raw in JS, escaped by Go by
    // default), HTML-sensitive characters, escapes, a NUL, an astral-plane emoji.
    string_unicode: "h\u00e9llo w\u00f6rld \u2713 \ud83d\ude00 \u65e5\u672c\u8a9e \u2028\u2029 <>&\"\\\n\t\u0000 \u007f",
    int: 42,
    negative: -7,
    float: 3.25,
    max_safe: 9007199254740991,
    tiny: 5e-324,
    huge: 1.7976931348623157e308,
    negzero: -0,
    nan: NaN,
    inf: Infinity,
    ninf: -Infinity,
    bool_true: true,
    bool_false: false,
    null: null,
    undefined: undefined,
    bigint: 12345678901234567890n,
    bigint_negative: -98765432109876543210n,
    bigint_zero: 0n,
    date: new Date(1749342170815),
    date_epoch: new Date(0),
    date_before_epoch: new Date(-86400000),
    bytes: new Uint8Array([0, 1, 2, 250, 255]),
    bytes_empty: new Uint8Array([]),
    arraybuffer: new Uint8Array([9, 8, 7]).buffer,
    array_empty: [],
    array_nested: [1, [2, [3, []]], "x", [[]]],
    array_mixed: [null, undefined, true, "s", 1.5, 2n, [new Date(0)]],
    object_empty: {},
    object_nested: { a: { b: { c: [1, 2] } }, "key with space": 1, "\u00fcn\u00efcode": "v", "": "empty key" },
    object_undefined_field: { u: undefined, n: null },
    object_types: { bytes: new Uint8Array([1]), when: new Date(5), big: 7n, buf: new Uint8Array([2, 3]).buffer },
    error: new Error("plain error"),
    error_code: errorCode,
    error_typed: typedError,
    deep: nested(100),
  };
}

// receivedValues is namedValues as the receiver of one trip over the wire must see it. The only
// difference: -0 travels as 0, because capnweb writes numbers as JSON.stringify does.
export function receivedValues() {
  return { ...namedValues(), negzero: 0 };
}

function kind(v) {
  if (v === null) return "null";
  if (v === undefined) return "undefined";
  if (typeof v === "function") return "function";
  if (typeof v !== "object") return typeof v;
  if (Array.isArray(v)) return "array";
  if (v instanceof Date) return "date";
  if (v instanceof Error) return "error";
  if (v instanceof ArrayBuffer) return "ArrayBuffer";
  if (v instanceof Uint8Array) return "Uint8Array"; // Node's Buffer is a Uint8Array
  if (ArrayBuffer.isView(v)) return v.constructor.name;
  if (Object.getPrototypeOf(v) === Object.prototype) return "object";
  return "class " + (v.constructor?.name ?? "?");
}

function hex(bytes) {
  return Buffer.from(bytes).toString("hex");
}

// diff compares got against want strictly (types, -0, NaN, bytes flavour, error name, message
// and own enumerable properties) and returns "" when they are the same, else where they differ.
export function diff(got, want, path = "$") {
  const kg = kind(got);
  const kw = kind(want);
  if (kg !== kw) return `${path}: got ${kg} ${preview(got)}, want ${kw} ${preview(want)}`;
  switch (kw) {
    case "number":
    case "string":
    case "boolean":
    case "bigint":
      return Object.is(got, want) ? "" : `${path}: got ${preview(got)}, want ${preview(want)}`;
    case "null":
    case "undefined":
      return "";
    case "date":
      return Object.is(got.getTime(), want.getTime()) ? "" : `${path}: got date ${got.getTime()}, want ${want.getTime()}`;
    case "ArrayBuffer":
    case "Uint8Array":
      return hex(new Uint8Array(got.buffer ?? got, got.byteOffset ?? 0, got.byteLength)) ===
        hex(new Uint8Array(want.buffer ?? want, want.byteOffset ?? 0, want.byteLength))
        ? "" : `${path}: bytes differ`;
    case "array": {
      if (got.length !== want.length) return `${path}: got length ${got.length}, want ${want.length}`;
      for (let i = 0; i < want.length; i++) {
        const d = diff(got[i], want[i], `${path}[${i}]`);
        if (d) return d;
      }
      return "";
    }
    case "error": {
      if (got.name !== want.name) return `${path}: error name ${got.name}, want ${want.name}`;
      if (got.message !== want.message) return `${path}: error message ${JSON.stringify(got.message)}, want ${JSON.stringify(want.message)}`;
      return diffKeys(got, want, path);
    }
    case "object":
      return diffKeys(got, want, path);
    default:
      return `${path}: cannot compare ${kw}`;
  }
}

function diffKeys(got, want, path) {
  const gk = Object.keys(got).sort();
  const wk = Object.keys(want).sort();
  if (JSON.stringify(gk) !== JSON.stringify(wk)) return `${path}: keys ${JSON.stringify(gk)}, want ${JSON.stringify(wk)}`;
  for (const k of wk) {
    const d = diff(got[k], want[k], `${path}.${k}`);
    if (d) return d;
  }
  return "";
}

function preview(v) {
  try {
    if (typeof v === "bigint") return `${v}n`;
    if (typeof v === "number") return Object.is(v, -0) ? "-0" : String(v);
    const s = JSON.stringify(v);
    return s === undefined ? String(v) : s.length > 80 ? s.slice(0, 80) + "…" : s;
  } catch {
    return String(v);
  }
}

// errorFields reduces an error (or any thrown value) to plain JSON-friendly fields.
export function errorFields(e) {
  if (e instanceof Error) {
    const out = { name: e.name, message: e.message };
    for (const k of Object.keys(e)) if (typeof e[k] !== "function" && typeof e[k] !== "bigint") out[k] = e[k];
    return out;
  }
  return { thrown: String(e) };
}
