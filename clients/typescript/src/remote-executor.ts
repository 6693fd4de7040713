// RemoteExecutor: the contract's Executor over a WebSocket to a gateway or
// an executor server.
import { RpcSession, type RpcStub } from 'capnweb'
import { parseForDispatch } from './codec.js'
import { COMPLETED_TEXT, PROTOCOL_VERSION } from './constants.js'
import { errorEnvelope, messageOf } from './envelope.js'
import { ExecutorFault, rehydrateExecutorError } from './errors.js'
import { outgoingTraceContext } from './trace-context.js'
import {
  BEARER_SUBPROTOCOL_PREFIX,
  EXECUTOR_SUBPROTOCOL,
  SocketTransport,
  defaultSocketFactory,
  isNode,
  whenOpen,
  type SocketFactory,
} from './transport.js'
import type {
  CallOptions,
  ExecuteCallOptions,
  ExecuteRequest,
  ExecuteResult,
  Executor,
  Usage,
  ExecutorApi,
  OutboundMode,
  OutboundRequestMessage,
  OutboundResponseMessage,
  ToolDispatchFn,
} from './types.js'

/** How new calls reconnect after the connection broke. */
export type ReconnectOptions = {
  /** The first wait between attempts, doubled after each failure (default 100 ms). */
  initialDelayMs?: number
  /** The longest wait between attempts (default 5000 ms). */
  maxDelayMs?: number
  /** Attempts for one call before it fails with CONNECTION_REJECTED (default 6). */
  maxAttempts?: number
}

/**
 * How execute tries a program again after the executor turned it away with
 * QUEUE_OVERFLOW (a full queue, a tenant bound, a draining server, a
 * gateway with no executor server that could take it): it never started,
 * so it runs once. invokeHandle and closeHandles are tried again the same
 * way (a gateway that could not reach the executor server holding the
 * handles refuses the call with QUEUE_OVERFLOW: it never started). WORKER_CRASHED is retryable too, but the program may
 * have called tools before the crash, so it is thrown for the caller to
 * decide. The waits grow from baseDelayMs, doubling, with jitter (each
 * between half and all of its step), and are never shorter than the retry
 * hint a refusal carries.
 */
export type RetryOptions = {
  /** Tries of one execution or handle call in all (default 5, waiting about 3 s at most in all; 1 never retries). */
  attempts?: number
  /** The step before the first retry, doubled for each later one (default 200 ms). */
  baseDelayMs?: number
  /** The longest wait (default 2000 ms); a refusal whose retry hint is longer is thrown at once. */
  maxDelayMs?: number
}

export type RemoteExecutorOptions = {
  /** The executor route, e.g. ws://127.0.0.1:8080/v1/executor. */
  url: string | URL
  /** The bearer credential: an API key or a JWT. */
  apiKey?: string
  /**
   * How the credential travels: an Authorization header (the default in
   * Node), or a subprotocol entry `codemode.bearer.<key>` offered beside the
   * route's subprotocol (the default elsewhere: browsers cannot set headers
   * on a WebSocket).
   */
  credential?: 'header' | 'subprotocol'
  /** The route's subprotocol, offered with the subprotocol credential (default codemode.executor.v1). */
  subprotocol?: string
  /** More headers, where the runtime can send them. */
  headers?: Record<string, string>
  /** Makes the socket; by default `ws` in Node and the global WebSocket elsewhere. */
  webSocket?: SocketFactory
  /** The bound on opening the socket and the handshake (default 10000 ms). */
  connectTimeoutMs?: number
  /** Reconnection of new calls after the connection broke; false never reconnects. */
  reconnect?: ReconnectOptions | false
  /** Retries of an execution or handle call turned away with QUEUE_OVERFLOW; false never retries. */
  retry?: RetryOptions | false
}

/** A request as invokeHandle takes it: a URL, and the rest optional. */
export type HandleRequest = {
  url: string
  method?: string
  headers?: Array<[string, string]>
  body?: ArrayBuffer | ArrayBufferView | string | null
}

/** One capnweb session on one socket. */
class Connection {
  broken: Error | undefined
  constructor(
    readonly api: RpcStub<ExecutorApi>,
    readonly transport: SocketTransport,
  ) {}
}

function toArrayBuffer(body: ArrayBuffer | ArrayBufferView | string | null | undefined): ArrayBuffer | null {
  if (body === null || body === undefined) return null
  if (body instanceof ArrayBuffer) return body
  const view = typeof body === 'string' ? new TextEncoder().encode(body) : body
  const copy = new Uint8Array(view.byteLength)
  copy.set(new Uint8Array(view.buffer, view.byteOffset, view.byteLength))
  return copy.buffer
}

function abortError(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError')
}

/**
 * The usage a result message carries, or undefined when it carries none or
 * one this client cannot read (a member missing, negative or not a finite
 * number): another server's usage is ignored, not an error, as in Go.
 */
function readUsage(u: unknown): Usage | undefined {
  if (typeof u !== 'object' || u === null) return undefined
  const keys = ['runClockMs', 'cpuMs', 'peakHeapBytes', 'toolCalls', 'outboundRequests', 'logBytes'] as const
  const out: Partial<Usage> = {}
  for (const k of keys) {
    const v = (u as Record<string, unknown>)[k]
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) return undefined
    out[k] = v
  }
  return out as Usage
}

/** Settles with promise, or rejects with the signal's reason once it aborts. */
function raceSignal<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise
  if (signal.aborted) return Promise.reject(abortError(signal))
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(abortError(signal))
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort)
        resolve(v)
      },
      (e) => {
        signal.removeEventListener('abort', onAbort)
        reject(e)
      },
    )
  })
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return raceSignal(new Promise((resolve) => setTimeout(resolve, ms)), signal)
}

/**
 * The wait before retry number n (1 for the first) after fault, or
 * undefined when its retry hint is past maxMs.
 */
function retryWait(n: number, baseMs: number, maxMs: number, fault: ExecutorFault): number | undefined {
  const step = Math.min(baseMs * 2 ** Math.min(n - 1, 30), maxMs)
  // Jitter over the upper half of the step, so that callers refused
  // together do not come back together.
  const wait = step / 2 + Math.random() * (step / 2)
  const hint = fault.retryAfter()
  if (hint === undefined) return wait
  return hint > maxMs ? undefined : Math.max(wait, hint)
}

/**
 * The contract's Executor on a remote executor: a gateway route or an
 * executor server. One connection carries many executions at once. When it
 * breaks, the calls in flight on it fail with CONNECTION_BROKEN (nothing is
 * replayed: a program may have had effects), and the next call reconnects,
 * with backoff, and repeats the handshake.
 */
export class RemoteExecutor implements Executor, AsyncDisposable {
  readonly #options: RemoteExecutorOptions
  #current: Connection | undefined
  #connecting: Promise<Connection> | undefined
  #disposed = false

  private constructor(options: RemoteExecutorOptions) {
    this.#options = options
  }

  /**
   * Connects and performs the handshake. Rejects with CONNECTION_REJECTED
   * when the socket or the handshake fails, and with PROTOCOL_MISMATCH when
   * the server speaks another protocol version.
   */
  static async connect(options: RemoteExecutorOptions): Promise<RemoteExecutor> {
    const executor = new RemoteExecutor(options)
    executor.#current = await executor.#open()
    return executor
  }

  async #open(): Promise<Connection> {
    const o = this.#options
    const url = String(o.url)
    const timeoutMs = o.connectTimeoutMs ?? 10000
    const headers: Record<string, string> = { ...o.headers }
    const protocols: string[] = []
    const credential = o.credential ?? (isNode() ? 'header' : 'subprotocol')
    if (credential === 'subprotocol') {
      protocols.push(o.subprotocol ?? EXECUTOR_SUBPROTOCOL)
      if (o.apiKey !== undefined) protocols.push(BEARER_SUBPROTOCOL_PREFIX + o.apiKey)
    } else if (o.apiKey !== undefined) {
      headers.Authorization = `Bearer ${o.apiKey}`
    }
    let socket
    try {
      const factory = o.webSocket ?? (await defaultSocketFactory())
      socket = factory(url, protocols, headers)
      await whenOpen(socket, timeoutMs)
    } catch (err) {
      throw new ExecutorFault('CONNECTION_REJECTED', `Connecting to ${url} failed: ${messageOf(err)}`)
    }
    let connection: Connection
    const transport = new SocketTransport(socket, (reason) => {
      if (connection && !connection.broken) connection.broken = reason
    })
    const session = new RpcSession<ExecutorApi>(transport)
    connection = new Connection(session.getRemoteMain(), transport)
    let version: number
    try {
      let timer: ReturnType<typeof setTimeout> | undefined
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no handshake answer within ${timeoutMs} ms`)), timeoutMs)
      })
      try {
        version = await Promise.race([connection.api.protocolVersion(), late])
      } finally {
        clearTimeout(timer)
      }
    } catch (err) {
      transport.abort(new Error('handshake failed'))
      throw new ExecutorFault('CONNECTION_REJECTED', `The handshake with ${url} failed: ${messageOf(err)}`)
    }
    if (version !== PROTOCOL_VERSION) {
      transport.abort(new Error('protocol mismatch'))
      throw new ExecutorFault('PROTOCOL_MISMATCH', `The executor at ${url} speaks protocol ${version}, and this client speaks ${PROTOCOL_VERSION}.`)
    }
    return connection
  }

  /** Whether the executor holds an open connection now; a call made while false reconnects first. */
  get connected(): boolean {
    return !this.#disposed && this.#current !== undefined && this.#current.broken === undefined
  }

  /** The open connection, reconnecting with backoff when the last one broke. */
  async #connection(signal: AbortSignal | undefined): Promise<Connection> {
    if (this.#disposed) throw new ExecutorFault('CONNECTION_BROKEN', 'This executor was disposed.')
    const current = this.#current
    if (current && !current.broken) return current
    if (this.#options.reconnect === false) {
      throw new ExecutorFault('CONNECTION_BROKEN', `The connection to ${String(this.#options.url)} broke, and this executor does not reconnect.`)
    }
    this.#connecting ??= this.#reconnect().finally(() => {
      this.#connecting = undefined
    })
    return raceSignal(this.#connecting, signal)
  }

  async #reconnect(): Promise<Connection> {
    const r = this.#options.reconnect || {}
    const attempts = Math.max(1, r.maxAttempts ?? 6)
    let delay = r.initialDelayMs ?? 100
    let last: unknown
    for (let i = 0; i < attempts; i++) {
      if (i > 0) {
        await sleep(delay, undefined)
        delay = Math.min(delay * 2, r.maxDelayMs ?? 5000)
      }
      if (this.#disposed) break
      try {
        const connection = await this.#open()
        if (this.#disposed) {
          connection.transport.abort(new Error('disposed'))
          break
        }
        this.#current = connection
        return connection
      } catch (err) {
        last = err
        if (err instanceof ExecutorFault && err.code === 'PROTOCOL_MISMATCH') throw err
      }
    }
    if (this.#disposed) throw new ExecutorFault('CONNECTION_BROKEN', 'This executor was disposed.')
    throw last
  }

  /** Runs one call on the connection, turning what it throws into the contract's failures. */
  async #call<T>(signal: AbortSignal | undefined, call: (api: RpcStub<ExecutorApi>) => Promise<T>): Promise<T> {
    signal?.throwIfAborted()
    const connection = await this.#connection(signal)
    try {
      return await raceSignal(call(connection.api), signal)
    } catch (err) {
      if (signal?.aborted && err === signal.reason) throw err
      const typed = rehydrateExecutorError(err)
      if (typed instanceof ExecutorFault) throw typed
      if (connection.broken) {
        throw new ExecutorFault(
          'CONNECTION_BROKEN',
          this.#disposed ? 'This executor was disposed under the call.' : `The connection broke under this call: ${connection.broken.message}`,
        )
      }
      throw typed
    }
  }

  /** Runs attempt again, as the retry option says, while it throws a retryable fault. */
  async #retrying<T>(signal: AbortSignal | undefined, attempt: () => Promise<T>): Promise<T> {
    const r = this.#options.retry === false ? { attempts: 1 } : (this.#options.retry ?? {})
    const attempts = Math.max(1, Math.floor(r.attempts ?? 5))
    const baseMs = r.baseDelayMs ?? 200
    const maxMs = r.maxDelayMs ?? 2000
    for (let n = 1; ; n++) {
      try {
        return await attempt()
      } catch (err) {
        if (n >= attempts || !(err instanceof ExecutorFault) || err.code !== 'QUEUE_OVERFLOW') throw err
        const wait = retryWait(n, baseMs, maxMs, err)
        if (wait === undefined) throw err
        await sleep(wait, signal)
      }
    }
  }

  /**
   * Runs one program. Declared failures arrive in the result's error; faults
   * are thrown as ExecutorFault (or its declared subclasses). A program the
   * executor turned away with a retryable code is tried again with backoff
   * (the retry option), and the last fault is thrown once the attempts are
   * spent. Aborting the signal rejects at once; the run goes on to its own
   * bound on the executor, and its later tool calls get the completed
   * envelope.
   */
  async execute(request: ExecuteRequest, options?: CallOptions): Promise<ExecuteResult> {
    // First, while the caller's context is the active one.
    const trace = await outgoingTraceContext(options)
    const callOptions: ExecuteCallOptions = { ...trace }
    if (request.timeout !== undefined) callOptions.timeout = request.timeout
    if (request.countHostWaits !== undefined) callOptions.countHostWaits = request.countHostWaits
    if (request.retainHandles !== undefined) callOptions.retainHandles = request.retainHandles
    if (request.modules !== undefined) callOptions.modules = Object.entries(request.modules)

    let active = true
    let dispatch: ToolDispatchFn | null = null
    const given = request.dispatch
    if (given) dispatch = (provider, tool, argsJson) => (active ? given(provider, tool, argsJson) : Promise.resolve(errorEnvelope(COMPLETED_TEXT)))

    let mode: OutboundMode = 'native'
    const outbound = request.outbound
    let stub: ((req: OutboundRequestMessage) => Promise<OutboundResponseMessage>) | undefined
    if (outbound === null) mode = 'disabled'
    else if (typeof outbound === 'function') {
      mode = 'stub'
      stub = async (req) => {
        const res = await outbound(req)
        return { status: res.status, statusText: res.statusText ?? '', headers: res.headers ?? [], body: toArrayBuffer(res.body) ?? new ArrayBuffer(0) }
      }
    }
    try {
      const message = await this.#retrying(options?.signal, () =>
        this.#call(options?.signal, (api) =>
          stub
            ? api.execute(request.code, request.providers ?? [], callOptions, dispatch, mode, stub)
            : api.execute(request.code, request.providers ?? [], callOptions, dispatch, mode),
        ),
      )
      const result: ExecuteResult = { result: message.resultJson === undefined ? undefined : parseForDispatch(message.resultJson) }
      if (message.error !== undefined) result.error = message.error
      result.logs = message.logs ?? []
      if (message.executionId !== undefined) {
        result.executionId = message.executionId
        result.handles = message.handles ?? []
      }
      const usage = readUsage(message.usage)
      if (usage) result.usage = usage
      return result
    } finally {
      active = false
    }
  }

  /**
   * Calls one handle of a retained execution. A call turned away with
   * QUEUE_OVERFLOW (HandlesUnreachableError, say) is tried again as for
   * execute; CONNECTION_BROKEN and HANDLES_CLOSED are thrown at once.
   */
  async invokeHandle(executionId: string, handleName: string, request: OutboundRequestMessage | HandleRequest, options?: CallOptions): Promise<OutboundResponseMessage> {
    const wire: OutboundRequestMessage = {
      method: request.method ?? 'GET',
      url: request.url,
      headers: request.headers ?? [],
      body: toArrayBuffer(request.body),
    }
    const trace = await outgoingTraceContext(options)
    // Three arguments unless there is a context to send, as the Go client does.
    return this.#retrying(options?.signal, () =>
      this.#call(options?.signal, (api) =>
        trace.traceparent === undefined && trace.tracestate === undefined
          ? api.invokeHandle(executionId, handleName, wire)
          : api.invokeHandle(executionId, handleName, wire, trace),
      ),
    )
  }

  /** Releases a retained execution; a QUEUE_OVERFLOW is retried as for invokeHandle. */
  async closeHandles(executionId: string, options?: CallOptions): Promise<void> {
    await this.#retrying(options?.signal, () => this.#call(options?.signal, (api) => api.closeHandles(executionId)))
  }

  /** Closes the connection; calls in flight fail with CONNECTION_BROKEN, and so do later ones. */
  async dispose(): Promise<void> {
    if (this.#disposed) return
    this.#disposed = true
    const current = this.#current
    this.#current = undefined
    if (current && !current.broken) current.transport.abort(new Error('the client disposed the executor'))
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.dispose()
  }
}
