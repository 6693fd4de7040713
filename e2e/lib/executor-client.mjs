// A JavaScript client of the executor contract, written from the contract
// alone (docs/protocol.md), not from the Go code: the ExecuteRequest -> wire mapping, the
// dispatch codec's parseForDispatch, and the rehydration of faults. It is
// what a host application on Node would write, and the end-to-end tests
// drive the gateway with it.
import { WebSocket as WsWebSocket } from 'ws'

// capnweb reads the global WebSocket even when handed a socket, and Node 20
// has none.
if (typeof globalThis.WebSocket === 'undefined') globalThis.WebSocket = WsWebSocket
const { newWebSocketRpcSession } = await import('capnweb')

export const PROTOCOL_VERSION = 1

// ---- the dispatch codec ------------------------------------------------------

export const BINARY_TAG = '__executor_binary_v1__'

function encodeBase64(bytes) {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64')
}

function decodeBase64(text) {
  return new Uint8Array(Buffer.from(text, 'base64'))
}

export function stringifyForDispatch(value) {
  return JSON.stringify(value, function (key, v) {
    const raw = this[key]
    if (raw instanceof Uint8Array) return { [BINARY_TAG]: 'Uint8Array', data: encodeBase64(raw) }
    if (raw instanceof ArrayBuffer) return { [BINARY_TAG]: 'Uint8Array', data: encodeBase64(new Uint8Array(raw)) }
    if (ArrayBuffer.isView(raw)) {
      return { [BINARY_TAG]: 'ArrayBufferView', data: encodeBase64(new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength)) }
    }
    return v
  })
}

export function parseForDispatch(text) {
  return JSON.parse(text, (_key, v) => {
    if (v && typeof v === 'object' && !Array.isArray(v) && typeof v[BINARY_TAG] === 'string' && typeof v.data === 'string') {
      return decodeBase64(v.data)
    }
    return v
  })
}

// ---- faults --------------------------------------------------------------------

export const FAULT_CODES = [
  'QUEUE_OVERFLOW', 'WORKER_CRASHED', 'PROTOCOL_MISMATCH', 'CONNECTION_REJECTED',
  'CONNECTION_BROKEN', 'RESPONSE_TOO_LARGE', 'HANDLES_CLOSED', 'INTERNAL',
]

export class ExecutorFault extends Error {
  constructor(code, message, props = {}) {
    super(message)
    this.name = 'ExecutorFault'
    Object.assign(this, props)
    this.code = code
  }

  get retryable() {
    return this.code === 'QUEUE_OVERFLOW' || this.code === 'WORKER_CRASHED'
  }
}

// A thrown error whose code is in the taxonomy becomes an ExecutorFault; any
// other error (user code, a provider rejection) passes through untouched.
export function rehydrateExecutorError(err) {
  if (err && typeof err === 'object' && FAULT_CODES.includes(err.code)) {
    const { code, message, ...props } = err
    delete props.stack
    return new ExecutorFault(code, message, props)
  }
  return err
}

// ---- the executor ----------------------------------------------------------------

function toArrayBuffer(body) {
  if (body === null || body === undefined) return null
  if (body instanceof ArrayBuffer) return body
  if (typeof body === 'string') body = new TextEncoder().encode(body)
  const view = ArrayBuffer.isView(body) ? body : new Uint8Array(body)
  return view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength)
}

export class RemoteExecutor {
  #api

  constructor(api) {
    this.#api = api
  }

  // connect opens a session to url and performs the version handshake.
  static async connect(url, { headers, protocols } = {}) {
    const socket = new WsWebSocket(url, protocols ?? [], { headers })
    const api = newWebSocketRpcSession(socket)
    let version
    try {
      version = await api.protocolVersion()
    } catch (err) {
      api[Symbol.dispose]()
      throw new ExecutorFault('CONNECTION_REJECTED', `connect failed: ${err?.message ?? err}`)
    }
    if (version !== PROTOCOL_VERSION) {
      api[Symbol.dispose]()
      throw new ExecutorFault('PROTOCOL_MISMATCH', `the server speaks protocol ${version}, this client ${PROTOCOL_VERSION}`)
    }
    return new RemoteExecutor(api)
  }

  async execute(request) {
    const options = {}
    if (request.timeout !== undefined) options.timeout = request.timeout
    if (request.countHostWaits !== undefined) options.countHostWaits = request.countHostWaits
    if (request.retainHandles !== undefined) options.retainHandles = request.retainHandles
    if (request.modules !== undefined) options.modules = Object.entries(request.modules)

    const dispatch = request.dispatch ?? null
    let outboundMode = 'native'
    const rest = []
    if (request.outbound === null) outboundMode = 'disabled'
    else if (typeof request.outbound === 'function') {
      outboundMode = 'stub'
      const fn = request.outbound
      rest.push(async (req) => {
        const res = await fn(req)
        return { status: res.status, statusText: res.statusText ?? '', headers: res.headers ?? [], body: toArrayBuffer(res.body) ?? new ArrayBuffer(0) }
      })
    }

    let message
    try {
      message = await this.#api.execute(request.code, request.providers ?? [], options, dispatch, outboundMode, ...rest)
    } catch (err) {
      throw rehydrateExecutorError(err)
    }
    const result = { result: message.resultJson === undefined ? undefined : parseForDispatch(message.resultJson) }
    if (message.error !== undefined) result.error = message.error
    result.logs = message.logs ?? []
    if (message.executionId !== undefined) {
      result.executionId = message.executionId
      result.handles = message.handles
    }
    // The gateway's usage extension, for the benchmarks; not enumerable,
    // so that results compare as the contract's shape.
    if (message.usage !== undefined) Object.defineProperty(result, 'usage', { value: message.usage })
    return result
  }

  async invokeHandle(executionId, handleName, request) {
    const wire = { method: request.method ?? 'GET', url: request.url, headers: request.headers ?? [], body: toArrayBuffer(request.body) }
    try {
      return await this.#api.invokeHandle(executionId, handleName, wire)
    } catch (err) {
      throw rehydrateExecutorError(err)
    }
  }

  async closeHandles(executionId) {
    try {
      await this.#api.closeHandles(executionId)
    } catch (err) {
      throw rehydrateExecutorError(err)
    }
  }

  // raw exposes the session's main stub, for tests that send what a
  // conforming client never would.
  get raw() {
    return this.#api
  }

  async dispose() {
    this.#api[Symbol.dispose]()
  }
}
