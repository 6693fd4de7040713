// The dispatch codec: JSON with binary values carried in a tagged base64
// envelope, because JSON has no binary type. It needs only ECMAScript, so it
// runs the same in Node and in browsers.
import { BINARY_TAG } from './constants.js'

/** The two values the binary tag takes. Decoding turns both into bytes. */
export const BINARY_KIND_UINT8ARRAY = 'Uint8Array'
export const BINARY_KIND_VIEW = 'ArrayBufferView'
export type BinaryKind = typeof BINARY_KIND_UINT8ARRAY | typeof BINARY_KIND_VIEW

/** The envelope a binary value crosses in. */
export type BinaryEnvelope = { [BINARY_TAG]: BinaryKind; data: string }

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
const SEXTETS = new Int8Array(128).fill(-1)
for (let i = 0; i < ALPHABET.length; i++) SEXTETS[ALPHABET.charCodeAt(i)] = i

/** Standard base64 with padding. */
export function encodeBase64(bytes: Uint8Array): string {
  let text = ''
  const whole = bytes.length - (bytes.length % 3)
  for (let i = 0; i < whole; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!
    text += ALPHABET[n >>> 18]! + ALPHABET[(n >>> 12) & 63]! + ALPHABET[(n >>> 6) & 63]! + ALPHABET[n & 63]!
  }
  if (bytes.length - whole === 1) {
    const n = bytes[whole]!
    text += ALPHABET[n >>> 2]! + ALPHABET[(n & 3) << 4]! + '=='
  } else if (bytes.length - whole === 2) {
    const n = (bytes[whole]! << 8) | bytes[whole + 1]!
    text += ALPHABET[n >>> 10]! + ALPHABET[(n >>> 4) & 63]! + ALPHABET[(n & 15) << 2]! + '='
  }
  return text
}

/** Standard base64, padding optional; a TypeError for anything else. */
export function decodeBase64(text: string): Uint8Array {
  let end = text.length
  if (end % 4 === 0 && end > 0) {
    if (text.endsWith('==')) end -= 2
    else if (text.endsWith('=')) end -= 1
  }
  if (end % 4 === 1) throw new TypeError('invalid base64')
  const out = new Uint8Array(Math.floor((end * 3) / 4))
  let bits = 0
  let held = 0
  let o = 0
  for (let i = 0; i < end; i++) {
    const c = text.charCodeAt(i)
    const v = c < 128 ? SEXTETS[c]! : -1
    if (v < 0) throw new TypeError('invalid base64')
    bits = (bits << 6) | v
    held += 6
    if (held >= 8) {
      held -= 8
      out[o++] = (bits >>> held) & 255
    }
  }
  return out
}

/** The envelope of a Uint8Array, an ArrayBuffer or another view; undefined for anything else. */
export function encodeBinaryValue(value: unknown): BinaryEnvelope | undefined {
  let kind: BinaryKind
  let bytes: Uint8Array
  if (value instanceof Uint8Array) {
    kind = BINARY_KIND_UINT8ARRAY
    bytes = value
  } else if (value instanceof ArrayBuffer) {
    kind = BINARY_KIND_UINT8ARRAY
    bytes = new Uint8Array(value)
  } else if (ArrayBuffer.isView(value)) {
    kind = BINARY_KIND_VIEW
    bytes = new Uint8Array(value.buffer, value.byteOffset, value.byteLength)
  } else {
    return undefined
  }
  return { [BINARY_TAG]: kind, data: encodeBase64(bytes) }
}

/** Bytes for an envelope whose own keys are exactly the tag and data; the value itself otherwise. */
export function decodeBinaryValue(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value
  const own = Object.keys(value)
  if (own.length !== 2 || !Object.hasOwn(value, BINARY_TAG) || !Object.hasOwn(value, 'data')) return value
  const record = value as Record<string, unknown>
  const kind = record[BINARY_TAG]
  if (kind !== BINARY_KIND_UINT8ARRAY && kind !== BINARY_KIND_VIEW) return value
  if (typeof record.data !== 'string') return value
  return decodeBase64(record.data)
}

/**
 * JSON.stringify with binary values in their envelope: the text every tool
 * call's arguments and every answer cross in. Undefined where
 * JSON.stringify gives no text (undefined, a function, a symbol).
 */
export function stringifyForDispatch(value: unknown): string | undefined {
  return JSON.stringify(value, function (this: Record<string, unknown>, key: string, converted: unknown) {
    // this[key] is the value before its toJSON ran: a Buffer's toJSON would
    // hide that it is bytes.
    return encodeBinaryValue(this[key]) ?? encodeBinaryValue(converted) ?? converted
  })
}

/** JSON.parse with every binary envelope turned back into a Uint8Array. */
export function parseForDispatch(text: string): unknown {
  return JSON.parse(text, (_key, value: unknown) => decodeBinaryValue(value))
}
