// The contract's examples, run against a live executor server with the
// client of lib/executor-client.mjs. CODEMODE_URL names the server (and
// CODEMODE_KEY a bearer credential, when it needs one); e2e_test.go starts
// the real gateway binary and sets both.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { RemoteExecutor, stringifyForDispatch, ExecutorFault } from './lib/executor-client.mjs'

const url = process.env.CODEMODE_URL
if (!url) throw new Error('CODEMODE_URL is not set: run these tests through `go test ./e2e` (make e2e)')
const headers = process.env.CODEMODE_KEY ? { Authorization: `Bearer ${process.env.CODEMODE_KEY}` } : undefined

const executor = await RemoteExecutor.connect(url, { headers })
after(() => executor.dispose())

const modules = { greeter: `export const greet = (name) => 'hello ' + name` }

test('entry: an import on its own line', async () => {
  const r = await executor.execute({
    code: `import { greet } from 'greeter'
async () => greet('ada')`,
    modules,
  })
  assert.deepEqual(r, { result: 'hello ada', logs: [] })
})

test('entry: trailing code on the import line reaches module scope', async () => {
  const r = await executor.execute({
    code: `import { greet } from 'greeter'; const size = 3
async () => greet('ada').repeat(size).length`,
    modules,
  })
  assert.deepEqual(r, { result: 27, logs: [] })
})

test('entry: an arrow on the import line is a syntax error in the entry module', async () => {
  const r = await executor.execute({
    code: `import { greet } from 'greeter'; async () => greet('ada')`,
    modules,
  })
  assert.equal(r.result, undefined)
  assert.deepEqual(r.logs, [])
  assert.match(r.error, /\[executor\.js:\d+:\d+\]$/)
})

test('providers: every call reaches the dispatch', async () => {
  const seen = []
  const r = await executor.execute({
    code: `async () => {
    await store.listOrders()
    await store.deleteOrders()
    await __dispatch('crm', 'listOrders', '')

    return 'every call reached the dispatch'
  }`,
    providers: [{ name: 'store', tools: ['listOrders'] }],
    dispatch: async (provider, tool) => {
      seen.push([provider, tool])
      return JSON.stringify({ result: null })
    },
  })
  assert.deepEqual(r, { result: 'every call reached the dispatch', logs: [] })
  assert.deepEqual(seen, [['store', 'listOrders'], ['store', 'deleteOrders'], ['crm', 'listOrders']])
})

test('dispatch grammar: arguments, results and errors cross as envelopes', async () => {
  const calls = []
  const r = await executor.execute({
    code: `async () => {
      const order = await store.listOrders('ada', 3)
      let failure
      try { await store.fail() } catch (e) { failure = e.message }
      return { order, failure }
    }`,
    providers: [{ name: 'store', tools: ['listOrders', 'fail'], positionalArgs: true }],
    dispatch: async (provider, tool, argsJson) => {
      calls.push(argsJson)
      if (tool === 'fail') return JSON.stringify({ error: 'No such customer.' })
      return stringifyForDispatch({ result: { id: 'o1', total: 42 } })
    },
  })
  assert.deepEqual(r, { result: { order: { id: 'o1', total: 42 }, failure: 'No such customer.' }, logs: [] })
  assert.equal(calls[0], '["ada",3]')
})

test('dispatch grammar: binary values cross tagged and decode to bytes', async () => {
  const r = await executor.execute({
    code: `async () => new Uint8Array([1, 2, 3, 255])`,
  })
  assert.deepEqual(r.result, new Uint8Array([1, 2, 3, 255]))
})

test('without a dispatch every tool call is not found', async () => {
  const r = await executor.execute({
    code: `async () => { try { await store.listOrders() } catch (e) { return e.message } }`,
    providers: [{ name: 'store', tools: ['listOrders'] }],
  })
  assert.deepEqual(r, { result: 'Tool "listOrders" not found', logs: [] })
})

test('logs: log, warn and error are captured with their level', async () => {
  const r = await executor.execute({
    code: `async () => { console.log('a', 1, true); console.warn('w'); console.error('e'); console.debug('quiet'); return 0 }`,
  })
  assert.deepEqual(r, { result: 0, logs: [{ level: 'log', text: 'a 1 true' }, { level: 'warn', text: 'w' }, { level: 'error', text: 'e' }] })
})

test('timeout: a run past its bound reports the pinned text', async () => {
  const r = await executor.execute({ code: `async () => { while (true) {} }`, timeout: 200 })
  assert.equal(r.error, 'Execution timed out at its 200 ms bound. Do less work per run and return the part that is already finished.')
})

test('user errors reach the envelope as they read', async () => {
  const r = await executor.execute({ code: `async () => { throw new Error('boom') }` })
  assert.equal(r.result, undefined)
  assert.equal(r.error, 'boom')
})

test('faults: an unknown outbound mode is PROTOCOL_MISMATCH', async () => {
  await assert.rejects(async () => await executor.raw.execute('async () => 1', [], {}, null, 'carrier-pigeon'), (err) => err.code === 'PROTOCOL_MISMATCH')
})

test('faults: a handle that was never granted is HANDLES_CLOSED', async () => {
  await assert.rejects(executor.closeHandles('never-granted'), (err) => err instanceof ExecutorFault && err.code === 'HANDLES_CLOSED')
})

test('handles: pipelined invocations run one at a time in arrival order', async () => {
  // Each invocation awaits a timer before it answers, so an invocation that
  // started beside another would read a count that moved under it.
  const grant = await executor.execute({
    code: `async () => {
    let running = 0, seen = 0
    return async (req) => {
      const mine = ++seen
      running++
      await new Promise((r) => setTimeout(r, 2))
      const overlapped = running > 1
      running--
      return new Response(JSON.stringify([new URL(req.url).pathname, mine, overlapped]))
    }
  }`,
    retainHandles: true,
    outbound: null,
  })
  assert.deepEqual(grant.handles, ['fetch'])
  const calls = []
  for (let i = 1; i <= 40; i++) calls.push(executor.invokeHandle(grant.executionId, 'fetch', { url: `https://app.example/${i}` }))
  const answers = await Promise.all(calls)
  await executor.closeHandles(grant.executionId)
  const got = answers.map((a) => JSON.parse(new TextDecoder().decode(a.body)))
  assert.deepEqual(got, Array.from({ length: 40 }, (_, i) => [`/${i + 1}`, i + 1, false]))
})

test('declared absences: typeof reads as if the capability were there', async () => {
  const r = await executor.execute({
    code: `async () => [typeof caches, typeof CompressionStream, typeof WebSocket]`,
    outbound: null,
  })
  assert.deepEqual(r, { result: ['object', 'function', 'undefined'], logs: [] })
})

test('outbound: null disables fetch with the pinned text', async () => {
  const r = await executor.execute({
    code: `async () => { try { await fetch('https://api.example/') } catch (e) { return e.message } }`,
    outbound: null,
  })
  assert.equal(r.result, 'Outbound fetch is disabled for this execution. Anything this run needs from outside has to arrive through a tool call.')
})

test('outbound: a function receives the serialized exchange', async () => {
  const seen = []
  const r = await executor.execute({
    code: `async () => { const res = await fetch('https://api.example/x', { method: 'PUT', body: 'hello' }); return [res.status, await res.text()] }`,
    outbound: async (req) => {
      seen.push([req.method, req.url, new TextDecoder().decode(req.body)])
      return { status: 202, statusText: 'Accepted', headers: [['content-type', 'text/plain']], body: new TextEncoder().encode('stored') }
    },
  })
  assert.deepEqual(r, { result: [202, 'stored'], logs: [] })
  assert.deepEqual(seen, [['PUT', 'https://api.example/x', 'hello']])
})
