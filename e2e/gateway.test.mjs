// Two tenants through the real gateway, with the contract-only client.
// gateway_test.go starts the gateway (alpha on the local backend, gamma on a
// remote group of executor servers) and sets GATEWAY_URL, ALPHA_KEY and
// GAMMA_KEY.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { RemoteExecutor, ExecutorFault } from './lib/executor-client.mjs'

const base = process.env.GATEWAY_URL
if (!base) throw new Error('GATEWAY_URL is not set: run these tests through `go test ./e2e`')
const url = base.replace(/^http/, 'ws') + '/v1/executor'
const connect = (key) => RemoteExecutor.connect(url, { headers: { Authorization: `Bearer ${key}` } })

const alpha = await connect(process.env.ALPHA_KEY)
const gamma = await connect(process.env.GAMMA_KEY)
after(() => Promise.all([alpha.dispose(), gamma.dispose()]))

const program = {
  code: `async () => {
    const total = await shop.total('ada', 2)
    console.log('total', total)
    return { total, twice: (await shop.total('bob', 3)) * 2 }
  }`,
  providers: [{ name: 'shop', tools: ['total'], positionalArgs: true }],
}

for (const [name, executor] of [['alpha (local backend, one hop)', () => alpha], ['gamma (remote group, two hops)', () => gamma]]) {
  test(`${name}: tool calls come back to this process`, async () => {
    const calls = []
    const r = await executor().execute({
      ...program,
      dispatch: async (provider, tool, argsJson) => {
        calls.push([provider, tool, argsJson])
        const [, n] = JSON.parse(argsJson)
        return JSON.stringify({ result: n * 10 })
      },
    })
    assert.deepEqual(r, { result: { total: 20, twice: 60 }, logs: [{ level: 'log', text: 'total 20' }] })
    assert.deepEqual(calls, [['shop', 'total', '["ada",2]'], ['shop', 'total', '["bob",3]']])
  })

  test(`${name}: many executions at once on one connection`, async () => {
    const runs = Array.from({ length: 8 }, (_, i) =>
      executor().execute({ code: `async () => (await calc.add(${i}, 1))`, providers: [{ name: 'calc', tools: ['add'], positionalArgs: true }],
        dispatch: async (_p, _t, a) => { const [x, y] = JSON.parse(a); return JSON.stringify({ result: x + y }) } }))
    const results = await Promise.all(runs)
    assert.deepEqual(results.map((r) => r.result), [1, 2, 3, 4, 5, 6, 7, 8])
  })

  test(`${name}: the timeout text arrives in the envelope`, async () => {
    const r = await executor().execute({ code: 'async () => { while (true) {} }', timeout: 250 })
    assert.equal(r.error, 'Execution timed out at its 250 ms bound. Do less work per run and return the part that is already finished.')
  })
}

for (const [name, key, other] of [['alpha (local backend)', 'ALPHA_KEY', () => gamma], ['gamma (remote group)', 'GAMMA_KEY', () => alpha]]) {
  test(`${name}: a retained handler keeps its state across connections, and only for its tenant`, async () => {
    const first = await connect(process.env[key])
    const grant = await first.execute({
      code: `async () => { let count = 0; return { fetch: async (req) => Response.json({ count: ++count, path: new URL(req.url).pathname }) } }`,
      retainHandles: true,
    })
    assert.equal(grant.result, undefined)
    assert.deepEqual(grant.handles, ['fetch'])
    assert.match(grant.executionId, /^x2\./)
    const r1 = await first.invokeHandle(grant.executionId, 'fetch', { url: 'https://app.example/a' })
    await first.dispose()
    // A fresh connection of the same tenant reaches the same isolate.
    const second = await connect(process.env[key])
    const r2 = await second.invokeHandle(grant.executionId, 'fetch', { url: 'https://app.example/b', method: 'POST', body: 'x' })
    assert.equal(r1.status, 200)
    assert.deepEqual(JSON.parse(new TextDecoder().decode(r1.body)), { count: 1, path: '/a' })
    assert.deepEqual(JSON.parse(new TextDecoder().decode(r2.body)), { count: 2, path: '/b' })
    // Another tenant meets exactly what an unknown id meets.
    await assert.rejects(async () => other().invokeHandle(grant.executionId, 'fetch', { url: 'https://app.example/' }),
      (err) => err instanceof ExecutorFault && err.code === 'HANDLES_CLOSED' && err.message.includes(grant.executionId))
    await second.closeHandles(grant.executionId)
    await assert.rejects(async () => second.invokeHandle(grant.executionId, 'fetch', { url: 'https://app.example/' }),
      (err) => err.code === 'HANDLES_CLOSED')
    await second.dispose()
  })
}

test('handles: an id is closed to every tenant that was not granted it', async () => {
  for (const executor of [alpha, gamma]) {
    await assert.rejects(async () => executor.invokeHandle('not-granted', 'fetch', { url: 'https://x/' }),
      (err) => err instanceof ExecutorFault && err.code === 'HANDLES_CLOSED' && err.message.includes('"not-granted"'))
  }
})

test('a wrong key never connects', async () => {
  await assert.rejects(connect('cmk_wrong_wrong_wrong_wrong_wrong'), (err) => err.code === 'CONNECTION_REJECTED')
})
