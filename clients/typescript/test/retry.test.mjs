// RemoteExecutor's retries against a fake executor server on loopback that
// turns executions, or handle calls, away with a chosen fault a chosen
// number of times.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { WebSocketServer } from 'ws'
import { RpcSession, RpcTarget } from 'capnweb'
import { RemoteExecutor, ExecutorFault, HandlesClosedError, HandlesUnreachableError, PROTOCOL_VERSION } from '../dist/index.js'
import { SocketTransport } from '../dist/transport.js'

const NO_EXECUTOR = 'No executor server behind this gateway could take the execution, so it did not start. Retry it in a few seconds; an executor server that is down or restarting takes executions again once it is back.'

const fault = (code, message, props = {}) => Object.assign(new Error(message), { code, ...props })

/** The executor API, refusing the first `refusals` executions with refusal(). */
class RefusingApi extends RpcTarget {
  calls = 0
  constructor(refusals, refusal) {
    super()
    this.refusals = refusals
    this.refusal = refusal
  }
  protocolVersion() { return PROTOCOL_VERSION }
  execute(code) {
    this.calls++
    if (this.calls <= this.refusals) throw this.refusal()
    return { resultJson: code === 'async () => 7' ? '7' : 'null', logs: [] }
  }
}

/**
 * The executor API, running every execution and refusing the first
 * `refusals` calls of each handle method with refusal(); invokes and closes
 * count the calls that arrived.
 */
class RefusingHandlesApi extends RpcTarget {
  invokes = 0
  closes = 0
  constructor(refusals, refusal) {
    super()
    this.refusals = refusals
    this.refusal = refusal
  }
  protocolVersion() { return PROTOCOL_VERSION }
  execute() { return { resultJson: 'null', logs: [], executionId: 'x1', handles: ['fetch'] } }
  invokeHandle(executionId, handle, req) {
    this.invokes++
    if (this.invokes <= this.refusals) throw this.refusal()
    return { status: 200, statusText: 'OK', headers: [], body: new TextEncoder().encode(`${handle} ${req.url}`).buffer }
  }
  closeHandles() {
    this.closes++
    if (this.closes <= this.refusals) throw this.refusal()
  }
}

/** Serves api on loopback; returns a connected client with options and the api. */
async function fakeServer(t, refusals, refusal, options = {}, Api = RefusingApi) {
  const api = new Api(refusals, refusal)
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 })
  // The client's own transport, on the server's socket: Node 20 has no
  // global WebSocket for capnweb's.
  wss.on('connection', (ws) => new RpcSession(new SocketTransport(ws, () => {}), api))
  await new Promise((resolve) => wss.once('listening', resolve))
  const executor = await RemoteExecutor.connect({ url: `ws://127.0.0.1:${wss.address().port}/`, ...options })
  t.after(async () => {
    await executor.dispose()
    for (const c of wss.clients) c.terminate()
    await new Promise((resolve) => wss.close(resolve))
  })
  return { executor, api }
}

const fast = { baseDelayMs: 1, maxDelayMs: 5 }

test('two QUEUE_OVERFLOW refusals, then the result: execute returns it after two retries', async (t) => {
  const { executor, api } = await fakeServer(t, 2, () => fault('QUEUE_OVERFLOW', NO_EXECUTOR), { retry: fast })
  const r = await executor.execute({ code: 'async () => 7' })
  assert.equal(r.result, 7)
  assert.equal(api.calls, 3)
})

test('a WORKER_CRASHED fault is thrown for the caller to decide: its tools may have run', async (t) => {
  const { executor, api } = await fakeServer(t, 1, () => fault('WORKER_CRASHED', 'the worker process died'), { retry: fast })
  await assert.rejects(executor.execute({ code: 'async () => 7' }), (err) => err instanceof ExecutorFault && err.code === 'WORKER_CRASHED')
  assert.equal(api.calls, 1)
})

test('attempts spent: the last fault is thrown, whole', async (t) => {
  const { executor, api } = await fakeServer(t, 10, () => fault('QUEUE_OVERFLOW', NO_EXECUTOR), { retry: { ...fast, attempts: 3 } })
  await assert.rejects(executor.execute({ code: 'async () => 7' }), (err) => {
    assert.ok(err instanceof ExecutorFault)
    assert.equal(err.code, 'QUEUE_OVERFLOW')
    assert.equal(err.message, NO_EXECUTOR)
    assert.equal(err.retryable, true)
    return true
  })
  assert.equal(api.calls, 3)
})

test('by default an execution is tried five times', async (t) => {
  const { executor, api } = await fakeServer(t, 10, () => fault('QUEUE_OVERFLOW', NO_EXECUTOR), { retry: { baseDelayMs: 1, maxDelayMs: 1 } })
  await assert.rejects(executor.execute({ code: 'async () => 7' }), (err) => err instanceof ExecutorFault && err.code === 'QUEUE_OVERFLOW')
  assert.equal(api.calls, 5)
})

test('retry: false tries once', async (t) => {
  const { executor, api } = await fakeServer(t, 1, () => fault('QUEUE_OVERFLOW', NO_EXECUTOR), { retry: false })
  await assert.rejects(executor.execute({ code: 'async () => 7' }), (err) => err instanceof ExecutorFault && err.code === 'QUEUE_OVERFLOW')
  assert.equal(api.calls, 1)
})

for (const code of ['CONNECTION_REJECTED', 'INTERNAL', 'RESPONSE_TOO_LARGE', 'HANDLES_CLOSED']) {
  test(`${code} is not retried`, async (t) => {
    const { executor, api } = await fakeServer(t, 1, () => fault(code, 'refused'), { retry: fast })
    await assert.rejects(executor.execute({ code: 'async () => 7' }), (err) => err instanceof ExecutorFault && err.code === code && err.message === 'refused')
    assert.equal(api.calls, 1)
  })
}

test('a refusal whose retry hint is past maxDelayMs is thrown at once, hint and all', async (t) => {
  const text = 'Tenant "acme" is at its bound of 1 execution in flight, so this execution was turned away before it started. Try it again in 3600000 ms.'
  const { executor, api } = await fakeServer(t, 1, () => fault('QUEUE_OVERFLOW', text, { retryAfterMs: 3600000 }), { retry: fast })
  await assert.rejects(executor.execute({ code: 'async () => 7' }), (err) => err instanceof ExecutorFault && err.message === text && err.retryAfter() === 3600000)
  assert.equal(api.calls, 1)
})

test('aborting the signal during a wait rejects with its reason and tries no more', async (t) => {
  const { executor, api } = await fakeServer(t, 10, () => fault('QUEUE_OVERFLOW', NO_EXECUTOR), { retry: { attempts: 5, baseDelayMs: 3600000, maxDelayMs: 3600000 } })
  const controller = new AbortController()
  const reason = new Error('the caller gave up')
  const call = executor.execute({ code: 'async () => 7' }, { signal: controller.signal })
  while (api.calls === 0) await new Promise((resolve) => setImmediate(resolve))
  controller.abort(reason)
  await assert.rejects(call, (err) => err === reason)
  assert.equal(api.calls, 1)
})

const UNREACHABLE = "The executor server that holds this execution's handles could not be reached, so the call did not start. Retry it in a few seconds; if that server restarted meanwhile, its handles are gone and the retry reads HANDLES_CLOSED."
const CLOSED = 'Execution "x1" holds no handles: they were closed, expired at the idle bound, or never granted. Execute again with retainHandles to get a fresh executionId.'

test('two QUEUE_OVERFLOW refusals of each handle call, then the answer: invokeHandle and closeHandles retry', async (t) => {
  const { executor, api } = await fakeServer(t, 2, () => fault('QUEUE_OVERFLOW', UNREACHABLE), { retry: fast }, RefusingHandlesApi)
  const grant = await executor.execute({ code: 'async () => (req) => new Response("ok")', retainHandles: true })
  const res = await executor.invokeHandle(grant.executionId, 'fetch', { url: 'https://app.example/' })
  assert.equal(res.status, 200)
  assert.equal(new TextDecoder().decode(res.body), 'fetch https://app.example/')
  assert.equal(api.invokes, 3)
  await executor.closeHandles(grant.executionId)
  assert.equal(api.closes, 3)
})

test('attempts spent on a handle call: the last refusal is thrown as HandlesUnreachableError', async (t) => {
  const { executor, api } = await fakeServer(t, 10, () => fault('QUEUE_OVERFLOW', UNREACHABLE), { retry: { ...fast, attempts: 3 } }, RefusingHandlesApi)
  const unreachable = (err) => err instanceof HandlesUnreachableError && err.code === 'QUEUE_OVERFLOW' && err.message === UNREACHABLE && err.retryable
  await assert.rejects(executor.invokeHandle('x1', 'fetch', { url: 'https://app.example/' }), unreachable)
  await assert.rejects(executor.closeHandles('x1'), unreachable)
  assert.equal(api.invokes, 3)
  assert.equal(api.closes, 3)
})

for (const [code, message] of [['HANDLES_CLOSED', CLOSED], ['CONNECTION_BROKEN', 'the connection broke']]) {
  test(`${code} from a handle call is not retried`, async (t) => {
    const { executor, api } = await fakeServer(t, 1, () => fault(code, message), { retry: fast }, RefusingHandlesApi)
    const thrown = (err) => err instanceof ExecutorFault && err.code === code && err.message === message && (code !== 'HANDLES_CLOSED' || err instanceof HandlesClosedError)
    await assert.rejects(executor.invokeHandle('x1', 'fetch', { url: 'https://app.example/' }), thrown)
    await assert.rejects(executor.closeHandles('x1'), thrown)
    assert.equal(api.invokes, 1)
    assert.equal(api.closes, 1)
  })
}
