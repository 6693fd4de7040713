// The programs of examples/ run as their README says, against the gateway
// of `make run` (config.example.yaml as it is, on free ports) with its
// demo key, and print what their comments say. What varies from run to run
// (usage figures, the executionId) is masked; the rest is compared whole.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { startGateway } from './gateway.mjs'

const examples = fileURLToPath(new URL('../../../examples/', import.meta.url))
const exampleConfig = fileURLToPath(new URL('../../../config.example.yaml', import.meta.url))

let gw
before(async () => {
  gw = await startGateway({ configFile: exampleConfig })
})
after(async () => {
  await gw?.kill()
})

/** Runs examples/<name>.mjs against the gateway and returns its output, masked. */
function runExample(name) {
  return new Promise((resolve, reject) => {
    execFile('node', [examples + name + '.mjs'], { env: { ...process.env, CODEMODE_URL: gw.url }, timeout: 60000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${name}.mjs: ${err.message}\n${stdout}\n${stderr}`))
      else resolve(stdout
        .replace(/(runClockMs|cpuMs|peakHeapBytes): [\d.]+/g, '$1: <n>')
        .replace(/Execution "[^"]+"/g, 'Execution "<id>"'))
    })
  })
}

const usage = (toolCalls, logBytes) => `  usage: {
    runClockMs: <n>,
    cpuMs: <n>,
    peakHeapBytes: <n>,
    toolCalls: ${toolCalls},
    outboundRequests: 0,
    logBytes: ${logBytes}
  }`

test('first-program.mjs: two tools and a module', async () => {
  assert.equal(await runExample('first-program'), `{
  result: { net: 50, gross: 62.5 },
  logs: [ { level: 'log', text: 'orders 2' } ],
${usage(2, 8)}
}
`)
})

test('retained-handles.mjs: state across invocations, then closed', async () => {
  assert.equal(await runExample('retained-handles'), `granted [ 'fetch' ]
200 {"path":"/a","visits":1}
200 {"path":"/a","visits":2}
200 {"path":"/b","visits":1}
closed: Execution "<id>" holds no handles: they were closed, expired at the idle bound, or never granted. Execute again with retainHandles to get a fresh executionId.
`)
})

test('ai-agent.mjs: the AI SDK with its mock model', async () => {
  assert.equal(await runExample('ai-agent'), `[ { result: 'Lisbon', logs: [] } ]
Lisbon is warmer.
`)
})

test("codemode.mjs: @cloudflare/codemode's tool on the gateway", async () => {
  // The description is the pinned upstream package's, around the tool's
  // declaration; the result after it comes from the gateway.
  assert.equal(await runExample('codemode'), `Execute code to achieve a goal.

Available:
type SearchDocsInput = {
    query: string;
}
type SearchDocsOutput = unknown

declare const codemode: {
	/**
	 * Search the docs
	 */
	searchDocs: (input: SearchDocsInput) => Promise<SearchDocsOutput>;
}

Write an async arrow function in JavaScript that returns the result.
Do NOT use TypeScript syntax — no type annotations, interfaces, or generics.
Do NOT define named functions then call them — just write the arrow function body directly.

Example: async () => { const r = await codemode.searchWeb({ query: "test" }); return r; }
{
  result: 'allowedOrigins: see docs/configuration.md',
  logs: [ '[warn] found 1' ]
}
`)
})

test("mcp-tools.mjs: an MCP server's tools in a program", async () => {
  assert.equal(await runExample('mcp-tools'), `declare const inventory: {
  /** Units in stock of a product */
  stock(input: {
    sku: string
  }): Promise<unknown>
}
{
  result: [ 'desk', 'lamp', 'chair' ],
  logs: [],
${usage(3, 0)}
}
`)
})
