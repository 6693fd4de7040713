// The usage extension and the traceparent option through the real capnweb
// client, straight on the wire: usage_test.go starts the gateway (alpha on
// the local backend, gamma on a remote group of executor servers) and sets
// GATEWAY_URL, ALPHA_KEY, GAMMA_KEY, ALPHA_TRACEPARENT and GAMMA_TRACEPARENT.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { WebSocket as WsWebSocket } from 'ws'

if (typeof globalThis.WebSocket === 'undefined') globalThis.WebSocket = WsWebSocket
const { newWebSocketRpcSession } = await import('capnweb')

const base = process.env.GATEWAY_URL
if (!base) throw new Error('GATEWAY_URL is not set: run these tests through `go test ./e2e`')
const url = base.replace(/^http/, 'ws') + '/v1/executor'

async function connect(key) {
  const api = newWebSocketRpcSession(new WsWebSocket(url, [], { headers: { Authorization: `Bearer ${key}` } }))
  assert.equal(await api.protocolVersion(), 1)
  return api
}

const sessions = []
after(() => sessions.forEach((api) => api[Symbol.dispose]()))

// Two tool calls, one request to the caller's outbound function, six bytes
// of console text, and a fixed amount of work (tens of milliseconds of CPU
// in goja however loaded the machine is).
const code = `async () => {
  const a = await calc.add(1, 2)
  const b = await calc.add(a, 3)
  const resp = await fetch('https://api.example.test/items?page=2')
  console.log('abc')
  console.warn('def')
  let x = 0
  for (let i = 0; i < 2e6; i++) x += i % 7
  return { b, status: resp.status, x }
}`
const providers = [{ name: 'calc', tools: ['add'], positionalArgs: true }]
const dispatch = async (_provider, _tool, argsJson) => {
  const [x, y] = JSON.parse(argsJson)
  return JSON.stringify({ result: x + y })
}
const outbound = async () => ({ status: 204, statusText: 'No Content', headers: [], body: new ArrayBuffer(0) })

for (const [name, key, traceparent] of [
  ['alpha (local backend)', 'ALPHA_KEY', 'ALPHA_TRACEPARENT'],
  ['gamma (remote group, two hops)', 'GAMMA_KEY', 'GAMMA_TRACEPARENT'],
]) {
  test(`${name}: the result message carries what the execution used`, async () => {
    const api = await connect(process.env[key])
    sessions.push(api)
    const message = await api.execute(code, providers, { timeout: 10000, traceparent: process.env[traceparent] }, dispatch, 'stub', outbound)
    assert.equal(message.resultJson, '{"b":6,"status":204,"x":5999995}')
    assert.deepEqual(message.logs, [{ level: 'log', text: 'abc' }, { level: 'warn', text: 'def' }])
    const usage = message.usage
    assert.deepEqual(Object.keys(usage), ['runClockMs', 'cpuMs', 'peakHeapBytes', 'toolCalls', 'outboundRequests', 'logBytes'])
    assert.equal(usage.toolCalls, 2)
    assert.equal(usage.outboundRequests, 1)
    assert.equal(usage.logBytes, 6)
    assert.ok(usage.runClockMs >= 10 && usage.runClockMs < 10000, `runClockMs ${usage.runClockMs}`)
    assert.ok(usage.cpuMs >= 10 && usage.cpuMs < 10000, `cpuMs ${usage.cpuMs}`)
    assert.ok(usage.peakHeapBytes > 0 && Number.isInteger(usage.peakHeapBytes), `peakHeapBytes ${usage.peakHeapBytes}`)
  })
}
