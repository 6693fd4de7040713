// The dispatch codec of the executor contract in plain JavaScript: the
// reference the Go codec (protocol/codec.go, protocol/parse.go) is checked
// against, and the source the sandbox installs into the entry scope.
//
// It is a plain script, not a module: evaluating it declares exactly the
// seven entry-scope names below and nothing else, so it runs as is in goja
// and in a Node vm context. It needs only ECMAScript (no atob, no
// TextEncoder, no Buffer).
//
//   __BINARY_TAG             the envelope key "__executor_binary_v1__"
//   __encodeBase64(bytes)    Uint8Array -> standard base64 with padding
//   __decodeBase64(text)     standard base64, padding optional -> Uint8Array;
//                            throws a TypeError on anything else
//   __encodeBinaryValue(v)   the envelope for a Uint8Array, an ArrayBuffer or
//                            another ArrayBuffer view; undefined for the rest
//   __decodeBinaryValue(v)   bytes for an envelope; v itself for the rest
//   __stringifyForDispatch(v) JSON.stringify with binary values enveloped
//   __parseForDispatch(text) JSON.parse with envelopes turned into bytes
//
// Tags: a Uint8Array (Node's Buffer included) and a bare ArrayBuffer are
// written under "Uint8Array"; every other view (Uint16Array, Float64Array,
// DataView, Uint8ClampedArray, ...) under "ArrayBufferView", its own bytes
// in memory order. Decoding gives a Uint8Array for both tags.
//
// An object decodes as bytes only when its own keys are exactly the tag and
// "data", the tag's value is one of the two names and data is a string;
// data that is not base64 then makes parsing throw. Any other object,
// including one with an unknown tag value, stays an object.

const __BINARY_TAG = '__executor_binary_v1__'

function __encodeBase64(bytes) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
  const out = []
  let i = 0
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2]
    out.push(alphabet[(n >> 18) & 63] + alphabet[(n >> 12) & 63] + alphabet[(n >> 6) & 63] + alphabet[n & 63])
  }
  const rest = bytes.length - i
  if (rest === 1) {
    const n = bytes[i] << 16
    out.push(alphabet[(n >> 18) & 63] + alphabet[(n >> 12) & 63] + '==')
  } else if (rest === 2) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8)
    out.push(alphabet[(n >> 18) & 63] + alphabet[(n >> 12) & 63] + alphabet[(n >> 6) & 63] + '=')
  }
  return out.join('')
}

function __decodeBase64(text) {
  let body = text
  if (text.length > 0 && text.length % 4 === 0) {
    if (text.endsWith('==')) body = text.slice(0, -2)
    else if (text.endsWith('=')) body = text.slice(0, -1)
  }
  if (body.length % 4 === 1) throw new TypeError('invalid base64')
  const values = new Uint8Array(body.length)
  for (let i = 0; i < body.length; i++) {
    const c = body.charCodeAt(i)
    let v
    if (c >= 65 && c <= 90) v = c - 65
    else if (c >= 97 && c <= 122) v = c - 71
    else if (c >= 48 && c <= 57) v = c + 4
    else if (c === 43) v = 62
    else if (c === 47) v = 63
    else throw new TypeError('invalid base64')
    values[i] = v
  }
  const out = new Uint8Array(Math.floor((body.length * 3) / 4))
  let o = 0
  let i = 0
  for (; i + 3 < body.length; i += 4) {
    const n = (values[i] << 18) | (values[i + 1] << 12) | (values[i + 2] << 6) | values[i + 3]
    out[o++] = (n >> 16) & 255
    out[o++] = (n >> 8) & 255
    out[o++] = n & 255
  }
  const rest = body.length - i
  if (rest === 2) {
    out[o++] = ((values[i] << 2) | (values[i + 1] >> 4)) & 255
  } else if (rest === 3) {
    const n = (values[i] << 10) | (values[i + 1] << 4) | (values[i + 2] >> 2)
    out[o++] = (n >> 8) & 255
    out[o++] = n & 255
  }
  return out
}

function __encodeBinaryValue(value) {
  let kind
  let bytes
  if (value instanceof Uint8Array) {
    kind = 'Uint8Array'
    bytes = value
  } else if (value instanceof ArrayBuffer) {
    kind = 'Uint8Array'
    bytes = new Uint8Array(value)
  } else if (ArrayBuffer.isView(value)) {
    kind = 'ArrayBufferView'
    bytes = new Uint8Array(value.buffer, value.byteOffset, value.byteLength)
  } else {
    return undefined
  }
  const envelope = {}
  envelope[__BINARY_TAG] = kind
  envelope.data = __encodeBase64(bytes)
  return envelope
}

function __decodeBinaryValue(value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value
  const keys = Object.keys(value)
  if (keys.length !== 2 || !Object.prototype.hasOwnProperty.call(value, __BINARY_TAG) ||
      !Object.prototype.hasOwnProperty.call(value, 'data')) return value
  const tag = value[__BINARY_TAG]
  if ((tag !== 'Uint8Array' && tag !== 'ArrayBufferView') || typeof value.data !== 'string') return value
  return __decodeBase64(value.data)
}

function __stringifyForDispatch(value) {
  return JSON.stringify(value, function (key, converted) {
    // this[key] is the value before toJSON ran: a Buffer's toJSON would
    // otherwise hide that it is bytes.
    let envelope = __encodeBinaryValue(this[key])
    if (envelope === undefined) envelope = __encodeBinaryValue(converted)
    return envelope === undefined ? converted : envelope
  })
}

function __parseForDispatch(text) {
  return JSON.parse(text, function (key, value) {
    return __decodeBinaryValue(value)
  })
}
