// The package's protocol half against vectors the Go protocol package wrote
// (test/vectors/protocol.json, checked against Go by vectors_test.go) and
// the shared dispatch vectors of protocol/testdata.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import * as client from '../dist/index.js'

const vectors = JSON.parse(readFileSync(new URL('./vectors/protocol.json', import.meta.url), 'utf8'))
const dispatchVectors = JSON.parse(readFileSync(new URL('../../../protocol/testdata/dispatch-vectors.json', import.meta.url), 'utf8'))

test('constants and fault codes are the protocol package\'s', () => {
  for (const [name, value] of Object.entries(vectors.constants)) assert.equal(client[name], value, name)
  assert.deepEqual(client.FAULT_CODES, vectors.faultCodes)
})

test('stringifyForDispatch writes every shared dispatch vector byte for byte', () => {
  assert.ok(dispatchVectors.length >= 40)
  for (const v of dispatchVectors) {
    const value = new Function(`return (${v.js})`)()
    assert.equal(client.stringifyForDispatch(value), v.json, v.name)
    assert.equal(client.stringifyForDispatch(client.parseForDispatch(v.json)), v.reparsed ?? v.json, `${v.name}, parsed and written again`)
  }
})

test('parseForDispatch turns both binary tags into bytes and refuses data that is not base64', () => {
  const bytes = client.parseForDispatch('{"a":{"__executor_binary_v1__":"ArrayBufferView","data":"AQID"}}').a
  assert.ok(bytes instanceof Uint8Array)
  assert.deepEqual([...bytes], [1, 2, 3])
  assert.deepEqual([...client.parseForDispatch('{"__executor_binary_v1__":"Uint8Array","data":"/w"}')], [255])
  assert.throws(() => client.parseForDispatch('{"__executor_binary_v1__":"Uint8Array","data":"A*=="}'), TypeError)
})

test('every declared failure composes the text Go composes', () => {
  assert.ok(vectors.failures.length >= 30)
  for (const v of vectors.failures) {
    const Class = client[v.class]
    assert.equal(typeof Class, 'function', `no class ${v.class}`)
    const err = new Class(...v.args)
    assert.equal(err.message, v.text, v.class)
    assert.equal(err.name, v.class)
    assert.ok(err instanceof Error)
    if (v.code) {
      assert.ok(err instanceof client.ExecutorFault, `${v.class} is a fault`)
      assert.equal(err.code, v.code)
    } else {
      assert.ok(err instanceof client.DeclaredFailure, `${v.class} is a declared failure`)
    }
  }
})

test('matches recognises the timeout and memory texts as Go does', () => {
  for (const v of vectors.matches) {
    assert.equal(client.ExecutionTimeoutError.matches(v.text), v.timeout, JSON.stringify(v.text))
    assert.equal(client.MemoryLimitError.matches(v.text), v.memory, JSON.stringify(v.text))
  }
})

test('rehydrateExecutorError rebuilds what Go\'s Rehydrate rebuilds', () => {
  for (const v of vectors.rehydrate) {
    const wire = Object.assign(new Error(v.message), v.props ?? {})
    if (v.code) wire.code = v.code
    const err = client.rehydrateExecutorError(wire)
    if (v.class === 'passthrough') {
      assert.equal(err, wire, `${v.message} passes through untouched`)
      continue
    }
    assert.equal(err.constructor, client[v.class], `${v.message}: ${err.constructor.name}, want ${v.class}`)
    assert.ok(err instanceof client.ExecutorFault)
    assert.equal(err.message, v.message)
    assert.equal(err.code, v.code)
    // Other own properties stay as they arrived; a field the class rebuilt
    // from the text (retryAfterMs) is the text's, as Go's RetryAfterOf reads it.
    for (const [k, want] of Object.entries(v.props ?? {})) if (!(k in (v.fields ?? {}))) assert.deepEqual(err[k], want, `prop ${k}`)
    for (const [k, want] of Object.entries(v.fields ?? {})) assert.deepEqual(err[k], want, `${v.class}.${k}`)
    assert.equal(err.retryable, v.code === 'QUEUE_OVERFLOW' || v.code === 'WORKER_CRASHED')
  }
  assert.equal(client.rehydrateExecutorError('text'), 'text')
  assert.equal(client.rehydrateExecutorError(null), null)
})

test('createEnvelopeDispatch composes the envelopes Go composes', async () => {
  for (const v of vectors.envelopes) {
    const fn = v.error !== undefined ? async () => { throw new Error(v.error) } : async () => client.parseForDispatch(v.value)
    const dispatch = client.createEnvelopeDispatch({ active: true }, fn)
    assert.equal(await dispatch('store', 'listOrders', ''), v.envelope, v.name)
  }
})

test('createEnvelopeDispatch: the contract\'s three envelopes, and arguments by the argument grammar', async () => {
  const seen = []
  const answering = client.createEnvelopeDispatch({ active: true }, async (provider, tool, args) => {
    seen.push([provider, tool, args])
    return { id: 'o1', total: 42 }
  })
  assert.equal(await answering('store', 'listOrders', '["ada",3]'), '{"result":{"id":"o1","total":42}}')
  assert.deepEqual(seen, [['store', 'listOrders', ['ada', 3]]])
  const throwing = client.createEnvelopeDispatch({ active: true }, async () => { throw new Error('No such customer.') })
  assert.equal(await throwing('store', 'listOrders', ''), '{"error":"No such customer."}')
  const state = { active: true }
  let called = 0
  const settled = client.createEnvelopeDispatch(state, async () => { called++ })
  assert.equal(await settled('store', 'listOrders', ''), '{}')
  state.active = false
  assert.equal(await settled('store', 'listOrders', ''), '{"error":"Execution has already completed."}')
  assert.equal(called, 1)
  for (const v of vectors.args) assert.equal(client.stringifyForDispatch(client.argsFromJson(v.argsJson)), v.list, JSON.stringify(v.argsJson))
})
