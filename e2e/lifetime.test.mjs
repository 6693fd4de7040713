// The handlesLifetime extension through the real capnweb client, straight
// on the wire: lifetime_test.go starts the gateway (alpha on the local
// backend, gamma on a remote group of executor servers) and sets
// GATEWAY_URL, ALPHA_KEY and GAMMA_KEY.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { WebSocket as WsWebSocket } from 'ws'

if (typeof globalThis.WebSocket === 'undefined') globalThis.WebSocket = WsWebSocket
const { newWebSocketRpcSession } = await import('capnweb')

const base = process.env.GATEWAY_URL
if (!base) throw new Error('GATEWAY_URL is not set: run these tests through `go test ./e2e`')
const url = base.replace(/^http/, 'ws') + '/v1/executor'

const sessions = []
after(() => sessions.forEach((api) => api[Symbol.dispose]()))

// retain grants handles in mode, lending a function whose disposal settles
// the returned promise.
async function retain(key, mode) {
  const api = newWebSocketRpcSession(new WsWebSocket(url, [], { headers: { Authorization: `Bearer ${key}` } }))
  sessions.push(api)
  assert.equal(await api.protocolVersion(), 1)
  assert.deepEqual(await api.extensions(), ['handlesLifetime'])
  let released
  const gone = new Promise((resolve) => { released = resolve })
  const lifetime = () => {}
  lifetime[Symbol.dispose] = () => released('released')
  const grant = await api.execute(`async () => () => new Response('kept')`, [], { retainHandles: true, handlesLifetime: lifetime }, null, mode)
  assert.deepEqual(grant.handles, ['fetch'])
  const early = await Promise.race([gone, new Promise((resolve) => setTimeout(() => resolve('kept'), 200))])
  assert.equal(early, 'kept', 'the function went before the handles closed')
  return { api, id: grant.executionId, gone }
}

for (const [name, key] of [['alpha (local backend)', 'ALPHA_KEY'], ['gamma (remote group, two hops)', 'GAMMA_KEY']]) {
  for (const mode of ['native', 'disabled']) {
    test(`${name}, ${mode}: the lent function is kept until closeHandles`, async () => {
      const { api, id, gone } = await retain(process.env[key], mode)
      const answer = await api.invokeHandle(id, 'fetch', { method: 'GET', url: 'https://app.example/', headers: [], body: null })
      assert.equal(new TextDecoder().decode(answer.body), 'kept')
      await api.closeHandles(id)
      assert.equal(await gone, 'released')
    })
  }
}
