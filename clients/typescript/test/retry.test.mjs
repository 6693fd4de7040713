// RemoteExecutor's retries against a fake executor server on loopback that
// turns executions away with a chosen fault a chosen number of times.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { WebSocketServer } from 'ws'
import { RpcSession, RpcTarget } from 'capnweb'
import { RemoteExecutor, ExecutorFault, PROTOCOL_VERSION } from '../dist/index.js'
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

/** Serves api on loopback; returns a connected client with options and the api. */
async function fakeServer(t, refusals, refusal, options = {}) {
  const api = new RefusingApi(refusals, refusal)
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
