// Opening a WebSocket to an executor route and carrying a capnweb session
// over it. capnweb's own WebSocket transport reads the global WebSocket,
// which Node 20 lacks, so the client brings a small transport of its own.
import type { RpcTransport } from 'capnweb'

/** The subprotocol a gateway's browser route answers to. */
export const EXECUTOR_SUBPROTOCOL = 'codemode.executor.v1'
/** The prefix of the subprotocol entry that carries a credential where headers cannot be set. */
export const BEARER_SUBPROTOCOL_PREFIX = 'codemode.bearer.'

/** The part of a WebSocket (the browser's, or the `ws` package's) the client uses. */
export interface SocketLike {
  readonly readyState: number
  binaryType: string
  send(data: string): void
  close(code?: number, reason?: string): void
  addEventListener(type: string, listener: (event: any) => void): void
}

/** Makes a socket: a browser's WebSocket constructor fits, and so does `ws`'s. */
export type SocketFactory = (url: string, protocols: string[], headers: Record<string, string>) => SocketLike

const OPEN = 1

/** Whether this runtime is Node (where headers can be set on a WebSocket). */
export function isNode(): boolean {
  const p = (globalThis as { process?: { versions?: { node?: string } } }).process
  return typeof p?.versions?.node === 'string'
}

/** The default factory: `ws` in Node (headers work there), the global WebSocket elsewhere. */
export async function defaultSocketFactory(): Promise<SocketFactory> {
  if (isNode()) {
    const { WebSocket } = await import('ws')
    return (url, protocols, headers) => new WebSocket(url, protocols, { headers }) as unknown as SocketLike
  }
  const Global = (globalThis as { WebSocket?: new (url: string, protocols: string[]) => SocketLike }).WebSocket
  if (!Global) throw new Error('this runtime has no WebSocket; pass one as the webSocket option')
  return (url, protocols, headers) => {
    if (Object.keys(headers).length > 0) throw new Error('a browser WebSocket cannot carry headers; use the subprotocol credential')
    return new Global(url, protocols)
  }
}

/** Resolves once the socket is open; rejects with why it never opened. */
export function whenOpen(socket: SocketLike, timeoutMs: number): Promise<void> {
  if (socket.readyState === OPEN) return Promise.resolve()
  return new Promise((resolve, reject) => {
    let settled = false
    const finish = (err?: Error) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      if (err) {
        try {
          socket.close()
        } catch {
          // Closing a socket that never opened may throw; it is gone either way.
        }
        reject(err)
      } else resolve()
    }
    const timer = setTimeout(() => finish(new Error(`no WebSocket connection within ${timeoutMs} ms`)), timeoutMs)
    socket.addEventListener('open', () => finish())
    socket.addEventListener('error', (event: { message?: string; error?: unknown }) =>
      finish(new Error(event?.message || 'the WebSocket connection failed')),
    )
    socket.addEventListener('close', (event: { code?: number; reason?: string }) =>
      finish(new Error(`the WebSocket closed before it opened (${event?.code ?? 0}${event?.reason ? ' ' + event.reason : ''})`)),
    )
  })
}

/**
 * A capnweb transport over an open socket. onBreak is told once, with the
 * reason, when the socket closes or fails.
 */
export class SocketTransport implements RpcTransport {
  readonly #socket: SocketLike
  readonly #queue: string[] = []
  #waiting: { resolve: (m: string) => void; reject: (e: unknown) => void } | undefined
  #error: Error | undefined
  readonly #onBreak: (reason: Error) => void

  constructor(socket: SocketLike, onBreak: (reason: Error) => void) {
    this.#socket = socket
    this.#onBreak = onBreak
    socket.binaryType = 'arraybuffer'
    socket.addEventListener('message', (event: { data: unknown }) => {
      if (this.#error) return
      if (typeof event.data !== 'string') {
        this.#fail(new TypeError('the executor sent a binary WebSocket message; capnweb speaks text'))
        return
      }
      if (this.#waiting) {
        this.#waiting.resolve(event.data)
        this.#waiting = undefined
      } else this.#queue.push(event.data)
    })
    socket.addEventListener('close', (event: { code?: number; reason?: string }) =>
      this.#fail(new Error(`the WebSocket closed (${event?.code ?? 0}${event?.reason ? ' ' + event.reason : ''})`)),
    )
    socket.addEventListener('error', (event: { message?: string }) => this.#fail(new Error(event?.message || 'the WebSocket failed')))
  }

  #fail(reason: Error): void {
    if (this.#error) return
    this.#error = reason
    this.#waiting?.reject(reason)
    this.#waiting = undefined
    this.#onBreak(reason)
  }

  async send(message: string): Promise<void> {
    if (this.#error) throw this.#error
    this.#socket.send(message)
  }

  receive(): Promise<string> {
    const next = this.#queue.shift()
    if (next !== undefined) return Promise.resolve(next)
    if (this.#error) return Promise.reject(this.#error)
    return new Promise((resolve, reject) => {
      this.#waiting = { resolve, reject }
    })
  }

  abort(reason: unknown): void {
    // A close reason is at most 123 bytes.
    const text = new TextEncoder().encode(reason instanceof Error ? reason.message : String(reason)).subarray(0, 120)
    try {
      this.#socket.close(3000, new TextDecoder().decode(text, { stream: true }))
    } catch {
      this.#socket.close()
    }
    this.#fail(reason instanceof Error ? reason : new Error(String(reason)))
  }
}
