// The adapters, each driven through its real upstream package against the
// real gateway: @cloudflare/codemode's createBrowserCodeTool, an MCP server
// on the SDK's in-memory transport (the AI SDK's in ai.test.mjs); and the
// normaliser's output run as the executor's entry form.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { createBrowserCodeTool } from '@cloudflare/codemode/browser'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'
import { z } from 'zod'
import { RemoteExecutor, ExecutionTimeoutError } from '../dist/index.js'
import { GatewayCodemodeExecutor } from '../dist/adapters/codemode.js'
import { mcpToolSource, combineToolSources } from '../dist/adapters/mcp.js'
import { normalizeCode } from '../dist/adapters/normalize.js'
import { declareTools } from '../dist/adapters/declarations.js'
import { connectToNewGateway, stopGateway, contractPart } from './gateway.mjs'

let gw
let remote
before(async () => ({ gw, executor: remote } = await connectToNewGateway()))
after(() => stopGateway({ gw, executor: remote }))

const weatherSchema = { type: 'object', properties: { city: { type: 'string', description: 'The city' } }, required: ['city'] }

// ---- @cloudflare/codemode -------------------------------------------------------

test('codemode: createBrowserCodeTool runs on the gateway, tools and log prefixes in the dialect', async () => {
  const asked = []
  const codeTool = createBrowserCodeTool({
    tools: { getWeather: { description: 'Weather of a city', inputSchema: weatherSchema, execute: async ({ city }) => { asked.push(city); return { city, temp: 21 } } } },
    executor: new GatewayCodemodeExecutor(remote),
  })
  const out = await codeTool.execute({ code: `async () => {
    console.warn('careful')
    const w = await codemode.getWeather({ city: 'Oslo' })
    console.log('got', w.temp)
    console.error('done')
    return w.temp * 2
  }` })
  assert.deepEqual(out, { result: 42, logs: ['[warn] careful', 'got 21', '[error] done'] })
  assert.deepEqual(asked, ['Oslo'])
  // codemode normalises a statement body itself before it calls the executor.
  assert.deepEqual(await codeTool.execute({ code: `const w = await codemode.getWeather({ city: 'Rome' })\nw.city` }), { result: 'Rome' })
})

test('codemode: a run past its bound fails with the timeout text, recognised by matches', async () => {
  const codeTool = createBrowserCodeTool({ tools: {}, executor: new GatewayCodemodeExecutor(remote, { timeout: 150 }) })
  await assert.rejects(codeTool.execute({ code: 'async () => { while (true) {} }' }),
    (err) => err.message === `Code execution failed: ${new ExecutionTimeoutError(150).message}`)
  const direct = await new GatewayCodemodeExecutor(remote, { timeout: 150 }).execute('async () => { while (true) {} }', {})
  assert.deepEqual(direct, { result: undefined, error: new ExecutionTimeoutError(150).message, logs: [], timedOut: true })
})

test('codemode: host waits count, as the dialect measures wall-clock time', async () => {
  const slowTool = { getWeather: async () => { await new Promise((resolve) => setTimeout(resolve, 400)); return 1 } }
  const code = 'async () => await codemode.getWeather({})'
  // The contract's run clock alone stops during the tool call...
  const plain = await remote.execute({ code, timeout: 200, providers: [{ name: 'codemode', tools: ['getWeather'], positionalArgs: true }],
    dispatch: async () => { await new Promise((resolve) => setTimeout(resolve, 400)); return '{"result":1}' } })
  assert.equal(plain.result, 1)
  // ...and the adapter asks for the wall clock.
  const r = await new GatewayCodemodeExecutor(remote, { timeout: 200 }).execute(code, slowTool)
  assert.equal(r.error, new ExecutionTimeoutError(200).message)
  assert.equal(r.timedOut, true)
})

test('codemode: a fault comes back in error, never thrown', async () => {
  const closed = await RemoteExecutor.connect({ url: gw.url, apiKey: gw.key, reconnect: false })
  await closed.dispose()
  const r = await new GatewayCodemodeExecutor(closed).execute('async () => 1', {})
  assert.deepEqual(r, { result: undefined, error: 'This executor was disposed.', logs: [] })
})

// ---- MCP -------------------------------------------------------------------------

async function mcpPair() {
  const server = new McpServer({ name: 'shop', version: '1.0.0' })
  server.registerTool('add', { description: 'Add two numbers', inputSchema: { a: z.number(), b: z.number() } },
    async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }))
  server.registerTool('order', { description: 'One order', inputSchema: { id: z.string() }, outputSchema: { id: z.string(), total: z.number() } },
    async ({ id }) => ({ content: [{ type: 'text', text: `order ${id}` }], structuredContent: { id, total: 42 } }))
  server.registerTool('refuse', { description: 'Always fails', inputSchema: {} },
    async () => ({ isError: true, content: [{ type: 'text', text: 'Refused by policy.' }] }))
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  const client = new Client({ name: 'codemode-test', version: '1.0.0' })
  await Promise.all([server.connect(serverSide), client.connect(clientSide)])
  return { client, close: () => Promise.all([client.close(), server.close()]) }
}

test('mcp: a program calls an MCP server\'s tools through its client', async () => {
  const { client, close } = await mcpPair()
  try {
    const source = await mcpToolSource(client, 'shop')
    assert.deepEqual(source.providers, [{ name: 'shop', tools: ['add', 'order', 'refuse'], positionalArgs: true }])
    const r = await remote.execute({
      code: `async () => {
        const sum = await shop.add({ a: 19, b: 23 })
        const order = await shop.order({ id: 'o1' })
        let refused, unknown
        try { await shop.refuse({}) } catch (e) { refused = e.message }
        try { await shop.dropTables({}) } catch (e) { unknown = e.message }
        return { sum, order, refused, unknown }
      }`,
      providers: source.providers,
      dispatch: source.dispatch,
    })
    assert.deepEqual(contractPart(r), { result: { sum: 42, order: { id: 'o1', total: 42 }, refused: 'Refused by policy.', unknown: 'Tool "dropTables" not found' }, logs: [] })
    assert.ok(source.declarations.startsWith('declare const shop: {\n  /** Add two numbers */\n  add(input: {\n    a: number\n    b: number\n  }): Promise<unknown>'), source.declarations)
    const both = combineToolSources(source, await mcpToolSource(client, 'again'))
    const r2 = await remote.execute({ code: 'async () => [await shop.add({ a: 1, b: 2 }), await again.add({ a: 3, b: 4 })]', providers: both.providers, dispatch: both.dispatch })
    assert.deepEqual(r2.result, [3, 7])
  } finally {
    await close()
  }
})

// ---- normalisation -----------------------------------------------------------------

test('normalizeCode: fences, TypeScript and statement bodies become the entry form', async () => {
  const cases = [
    ['async () => 1 + 1', 'async () => 1 + 1', 2],
    ['```js\nasync () => 3\n```', 'async () => 3', 3],
    ['Here you go:\n\n```typescript\nconst n: number = 4\nn * 2\n```\nDone.', 'async () => {\nconst n = 4\nreturn (n * 2)\n}', 8],
    ['async (): Promise<number> => { const xs: Array<number> = [1, 2]; return xs.length }', 'async () => { const xs = [1, 2]; return xs.length }', 2],
    ['interface Row { n: number }\nconst rows: Row[] = [{ n: 5 }]\nrows[0].n', 'async () => {\nconst rows = [{ n: 5 }]\nreturn (rows[0].n)\n}', 5],
    ['async function main() { return 6 }', 'async () => {\nasync function main() { return 6 }\nreturn main()\n}', 6],
    ['export default async () => 7', 'async () => 7', 7],
    ['(async function () { return 8 })', 'async () => (async function () { return 8 })()', 8],
    ["import { greet } from 'greeter'\nconst who: string = 'ada'\ngreet(who)", "import { greet } from 'greeter'\nasync () => {\nconst who = 'ada'\nreturn (greet(who))\n}", 'hello ada'],
    ['', 'async () => {}', undefined],
  ]
  for (const [raw, want, value] of cases) {
    const code = normalizeCode(raw)
    assert.equal(code, want, JSON.stringify(raw))
    const r = await remote.execute({ code, modules: { greeter: "export const greet = (n) => 'hello ' + n" } })
    assert.deepEqual(contractPart(r), { result: value, logs: [] }, code)
  }
  // Code that does not parse stays as written, and the executor reports its syntax error.
  assert.equal(normalizeCode('async () => {'), 'async () => {')
})

test('declareTools writes the declarations of JSON Schemas', () => {
  assert.equal(declareTools('api', [
    { name: 'find-user', description: 'Finds */ a user', inputSchema: { type: 'object', properties: { id: { type: 'integer' }, tags: { type: 'array', items: { enum: ['a', 'b'] } }, extra: { type: ['string', 'null'] } }, required: ['id'] } },
    { name: 'ping' },
  ]), 'declare const api: {\n  /** Finds * / a user */\n  "find-user"(input: {\n    id: number\n    tags?: Array<"a" | "b">\n    extra?: string | null\n  }): Promise<unknown>\n  ping(): Promise<unknown>\n}')
})
