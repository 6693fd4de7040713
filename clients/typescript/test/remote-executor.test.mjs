// RemoteExecutor against the real gateway binary: the contract's examples,
// faults rebuilt as their classes, the handshake, per-call abort, and
// reconnection after the gateway restarts.
import { test, after, before } from 'node:test'
import assert from 'node:assert/strict'
import {
  RemoteExecutor, ExecutorFault, HandlesClosedError, ExecutionTimeoutError, OutboundDisabledError,
  ToolNotFoundError, HandleNotFoundError, createEnvelopeDispatch, COMPLETED_TEXT,
} from '../dist/index.js'
import { connectToNewGateway, contractPart, stopGateway } from './gateway.mjs'

let gw
let executor
before(async () => ({ gw, executor } = await connectToNewGateway()))
after(() => stopGateway({ gw, executor }))

const execute = async (request, options) => contractPart(await executor.execute(request, options))

const greeter = { greeter: `export const greet = (name) => 'hello ' + name` }

// The contract's examples: each request and the result it quotes.
const examples = [
  ['entry: an import on its own line', { code: `import { greet } from 'greeter'\nasync () => greet('ada')`, modules: greeter },
    { result: 'hello ada', logs: [] }],
  ['entry: trailing code on the import line reaches module scope', { code: `import { greet } from 'greeter'; const size = 3\nasync () => greet('ada').repeat(size).length`, modules: greeter },
    { result: 27, logs: [] }],
  ['declared absences read as present to typeof', { code: 'async () => [typeof caches, typeof CompressionStream, typeof WebSocket]', outbound: null },
    { result: ['object', 'function', 'undefined'], logs: [] }],
  ['binary values come back as bytes', { code: 'async () => ({ bytes: new Uint8Array([1, 2, 3, 255]), wide: new Uint16Array([1, 2]) })' },
    { result: { bytes: new Uint8Array([1, 2, 3, 255]), wide: new Uint8Array([1, 0, 2, 0]) }, logs: [] }],
  ['console levels are kept', { code: `async () => { console.log('a', 1); console.warn('w'); console.error('e'); console.debug('quiet'); return null }` },
    { result: null, logs: [{ level: 'log', text: 'a 1' }, { level: 'warn', text: 'w' }, { level: 'error', text: 'e' }] }],
]
for (const [name, request, want] of examples) {
  test(`contract: ${name}`, async () => assert.deepEqual(await execute(request), want))
}

test('contract: an arrow on the import line is a syntax error in the entry module', async () => {
  const r = await executor.execute({ code: `import { greet } from 'greeter'; async () => greet('ada')`, modules: greeter })
  assert.equal(r.result, undefined)
  assert.deepEqual(r.logs, [])
  assert.equal(typeof r.error, 'string')
  assert.ok(r.error.endsWith(']') && r.error.includes('[executor.js:'), r.error)
})

test('contract: every call reaches the dispatch, declared or not', async () => {
  const seen = []
  const request = {
    // The contract's example, on one line.
    code: "async () => { await store.listOrders(); await store.deleteOrders(); await __dispatch('crm', 'listOrders', ''); return 'every call reached the dispatch' }",
    providers: [{ name: 'store', tools: ['listOrders'] }],
    dispatch: createEnvelopeDispatch({ active: true }, (provider, tool) => { seen.push([provider, tool]); return null }),
  }
  assert.deepEqual(await execute(request), { result: 'every call reached the dispatch', logs: [] })
  assert.deepEqual(seen, [['store', 'listOrders'], ['store', 'deleteOrders'], ['crm', 'listOrders']])
})

test('contract: envelopes from createEnvelopeDispatch reach the program, thrown texts rethrown', async () => {
  const r = await executor.execute({
    code: `async () => {
      const order = await store.find('ada', 3)
      try { await store.missing() } catch (e) { return { order, failure: e.message } }
    }`,
    providers: [{ name: 'store', tools: ['find', 'missing'], positionalArgs: true }],
    dispatch: createEnvelopeDispatch({ active: true }, (_p, tool, args) => {
      if (tool === 'find') return { name: args[0], total: args[1] * 14, receipt: new Uint8Array([7]) }
      throw new ToolNotFoundError(tool)
    }),
  })
  assert.deepEqual(contractPart(r), { result: { order: { name: 'ada', total: 42, receipt: new Uint8Array([7]) }, failure: 'Tool "missing" not found' }, logs: [] })
})

test('contract: the timeout and outbound texts arrive as their classes compose them', async () => {
  const slow = await executor.execute({ code: 'async () => { while (true) {} }', timeout: 150 })
  assert.equal(slow.error, new ExecutionTimeoutError(150).message)
  assert.ok(ExecutionTimeoutError.matches(slow.error))
  const offline = await executor.execute({ code: `async () => { try { await fetch('https://api.example/') } catch (e) { return e.message } }`, outbound: null })
  assert.equal(offline.result, new OutboundDisabledError().message)
})

test('contract: a function as outbound gets the serialized exchange', async () => {
  const seen = []
  const r = await executor.execute({
    code: `async () => { const res = await fetch('https://api.example/items', { method: 'POST', body: 'one' }); return [res.status, res.statusText, await res.text()] }`,
    outbound: async (req) => {
      seen.push([req.method, req.url, new TextDecoder().decode(req.body)])
      return { status: 201, statusText: 'Created', headers: [['content-type', 'text/plain']], body: new TextEncoder().encode('made') }
    },
  })
  assert.deepEqual(contractPart(r), { result: [201, 'Created', 'made'], logs: [] })
  assert.deepEqual(seen, [['POST', 'https://api.example/items', 'one']])
})

test('contract: retained handles keep state, refuse unknown names, and close to HandlesClosedError', async () => {
  const grant = await executor.execute({
    code: `async () => { let n = 0; return { fetch: async (req) => new Response(req.method + ' ' + (++n)) } }`,
    retainHandles: true,
  })
  assert.equal(grant.result, undefined)
  assert.deepEqual(grant.handles, ['fetch'])
  const text = async (res) => new TextDecoder().decode(res.body)
  assert.equal(await text(await executor.invokeHandle(grant.executionId, 'fetch', { url: 'https://app.example/' })), 'GET 1')
  assert.equal(await text(await executor.invokeHandle(grant.executionId, 'fetch', { url: 'https://app.example/', method: 'PUT', body: 'x' })), 'PUT 2')
  await assert.rejects(executor.invokeHandle(grant.executionId, 'alarm', { url: 'https://app.example/' }),
    (err) => err.message === new HandleNotFoundError(grant.executionId, 'alarm', ['fetch']).message)
  await executor.closeHandles(grant.executionId)
  await assert.rejects(executor.invokeHandle(grant.executionId, 'fetch', { url: 'https://app.example/' }), (err) => {
    assert.ok(err instanceof HandlesClosedError, `got ${err?.constructor?.name}`)
    assert.equal(err.code, 'HANDLES_CLOSED')
    assert.equal(err.executionId, grant.executionId)
    assert.equal(err.message, new HandlesClosedError(grant.executionId).message)
    return true
  })
})

test('many executions at once share one connection', async () => {
  const runs = await Promise.all(Array.from({ length: 6 }, (_, i) => executor.execute({
    code: `async () => await calc.twice(${i})`,
    providers: [{ name: 'calc', tools: ['twice'], positionalArgs: true }],
    dispatch: createEnvelopeDispatch({ active: true }, (_p, _t, [x]) => x * 2),
  })))
  assert.deepEqual(runs.map((r) => r.result), [0, 2, 4, 6, 8, 10])
})

test('an aborted call rejects at once with the reason, and later tool calls get the completed envelope', async () => {
  const controller = new AbortController()
  const answered = []
  let firstCalled
  const inFirst = new Promise((resolve) => { firstCalled = resolve })
  let firstReturned
  const afterFirst = new Promise((resolve) => { firstReturned = resolve })
  const program = {
    code: `async () => { await slow.first(); return await slow.second() }`,
    providers: [{ name: 'slow', tools: ['first', 'second'] }],
  }
  const dispatch = async (_p, tool) => {
    answered.push(tool)
    if (tool === 'first') {
      firstCalled()
      // Answer only once the caller gave up, so the run goes on to its second call.
      if (!controller.signal.aborted) await new Promise((resolve) => controller.signal.addEventListener('abort', resolve))
      setTimeout(firstReturned, 300)
    }
    return '{"result":2}'
  }
  // Without an abort the program makes both calls.
  const control = new AbortController()
  assert.deepEqual(await execute({ ...program, dispatch: async (_p, tool) => { answered.push(tool); return '{"result":2}' } }, { signal: control.signal }), { result: 2, logs: [] })
  assert.deepEqual(answered.splice(0), ['first', 'second'])

  const run = executor.execute({ ...program, dispatch }, { signal: controller.signal })
  await inFirst
  const reason = new Error('the user went away')
  controller.abort(reason)
  await assert.rejects(run, (err) => err === reason)
  await afterFirst
  assert.deepEqual(answered, ['first'], 'the caller\'s dispatch saw no call after the abort')
  // The connection is still good for the next execution.
  assert.deepEqual(await execute({ code: 'async () => 5' }), { result: 5, logs: [] })
  await assert.rejects(executor.execute({ code: 'async () => 1' }, { signal: AbortSignal.abort() }), (err) => err.name === 'AbortError')
})

test('a wrong key is CONNECTION_REJECTED before anything runs', async () => {
  await assert.rejects(RemoteExecutor.connect({ url: gw.url, apiKey: 'cmk_' + 'x'.repeat(43), reconnect: false }), (err) => {
    assert.ok(err instanceof ExecutorFault)
    assert.equal(err.code, 'CONNECTION_REJECTED')
    assert.match(err.message, /401/)
    return true
  })
})

test('the subprotocol credential works from Node too', async () => {
  const viaSubprotocol = await RemoteExecutor.connect({ url: gw.url, apiKey: gw.key, credential: 'subprotocol' })
  try {
    assert.deepEqual(contractPart(await viaSubprotocol.execute({ code: 'async () => "through the subprotocol"' })), { result: 'through the subprotocol', logs: [] })
  } finally {
    await viaSubprotocol.dispose()
  }
})

test('a disposed executor fails calls with CONNECTION_BROKEN; Symbol.asyncDispose disposes', async () => {
  // What \`await using\` calls at the end of its block (Node 20 lacks the syntax).
  const scoped = await RemoteExecutor.connect({ url: gw.url, apiKey: gw.key })
  assert.equal((await scoped.execute({ code: 'async () => 1' })).result, 1)
  await scoped[Symbol.asyncDispose]()
  await assert.rejects(scoped.execute({ code: 'async () => 1' }), (err) => err instanceof ExecutorFault && err.code === 'CONNECTION_BROKEN')
})

test('calls in flight when the executor is disposed fail with CONNECTION_BROKEN', async () => {
  const own = await RemoteExecutor.connect({ url: gw.url, apiKey: gw.key })
  let entered
  const inTool = new Promise((resolve) => { entered = resolve })
  const run = own.execute({
    code: 'async () => await hold.on()',
    providers: [{ name: 'hold', tools: ['on'] }],
    dispatch: () => { entered(); return new Promise(() => {}) },
  })
  await inTool
  await own.dispose()
  await assert.rejects(run, (err) => err instanceof ExecutorFault && err.code === 'CONNECTION_BROKEN')
})

test('the gateway restarts: calls in flight fail with CONNECTION_BROKEN and are not replayed; new calls reconnect', async () => {
  const own = await RemoteExecutor.connect({ url: gw.url, apiKey: gw.key, reconnect: { initialDelayMs: 50, maxDelayMs: 400, maxAttempts: 40 } })
  try {
    let calls = 0
    let entered
    const inTool = new Promise((resolve) => { entered = resolve })
    const inFlight = own.execute({
      code: 'async () => await hold.forever()',
      providers: [{ name: 'hold', tools: ['forever'] }],
      dispatch: async () => {
        calls++
        entered()
        return new Promise(() => {})
      },
    })
    // Settled into a value now: it rejects while the gateway is killed.
    const outcome = inFlight.then(() => 'resolved', (err) => err)
    await inTool
    await gw.kill()
    await assert.rejects(outcome.then((v) => { throw v }), (err) => {
      assert.ok(err instanceof ExecutorFault, `got ${err}`)
      assert.equal(err.code, 'CONNECTION_BROKEN')
      return true
    })
    await gw.start()
    const r = await own.execute({ code: 'async () => "after the restart"' })
    assert.deepEqual(contractPart(r), { result: 'after the restart', logs: [] })
    assert.equal(calls, 1, 'the broken execution was not replayed')
  } finally {
    await own.dispose()
  }
  // The shared executor reconnects as well.
  assert.equal((await executor.execute({ code: 'async () => 2' })).result, 2)
})

test('a call while nothing listens fails with CONNECTION_REJECTED after its attempts', async () => {
  const own = await RemoteExecutor.connect({ url: gw.url, apiKey: gw.key, reconnect: { initialDelayMs: 10, maxDelayMs: 20, maxAttempts: 3 } })
  await gw.kill()
  try {
    // A call made before the client saw the socket close would be in flight on it, and broken.
    for (let i = 0; i < 200 && own.connected; i++) await new Promise((resolve) => setTimeout(resolve, 10))
    assert.equal(own.connected, false)
    await assert.rejects(own.execute({ code: 'async () => 1' }), (err) => err instanceof ExecutorFault && err.code === 'CONNECTION_REJECTED')
  } finally {
    await own.dispose()
    await gw.start()
  }
})

test('usage reports what the execution used, and a caller\'s traceparent is accepted', async () => {
  const r = await executor.execute({
    code: `async () => { console.log('hello'); await store.find(1); await store.find(2); return 'done' }`,
    providers: [{ name: 'store', tools: ['find'] }],
    dispatch: createEnvelopeDispatch({ active: true }, () => 7),
  }, { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: 'vendor=1' })
  assert.equal(r.result, 'done')
  const u = r.usage
  assert.deepEqual(Object.keys(u).sort(), ['cpuMs', 'logBytes', 'outboundRequests', 'peakHeapBytes', 'runClockMs', 'toolCalls'])
  assert.equal(u.toolCalls, 2)
  assert.equal(u.outboundRequests, 0)
  assert.equal(u.logBytes, 'hello'.length)
  assert.ok(u.runClockMs >= 0 && u.cpuMs >= 0 && u.peakHeapBytes > 0, JSON.stringify(u))
})

test('invokeHandle sends a trace context as the gateway\'s fourth argument, which it accepts', async () => {
  const grant = await executor.execute({ code: `async () => ({ fetch: async (req) => new Response('traced ' + req.method) })`, retainHandles: true })
  try {
    const res = await executor.invokeHandle(grant.executionId, 'fetch', { url: 'https://app.example/' },
      { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: 'vendor=1' })
    assert.equal(new TextDecoder().decode(res.body), 'traced GET')
    // The gateway reads what the client sent: a member of the wrong type is refused.
    await assert.rejects(executor.invokeHandle(grant.executionId, 'fetch', { url: 'https://app.example/' }, { traceparent: 5 }),
      (err) => err.message === 'invokeHandle: options.traceparent must be a string')
  } finally {
    await executor.closeHandles(grant.executionId)
  }
})

test('COMPLETED_TEXT is the pinned dispatch text', () => assert.equal(COMPLETED_TEXT, 'Execution has already completed.'))
