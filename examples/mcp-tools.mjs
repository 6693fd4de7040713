// @ts-check
// An MCP server's tools in code mode: the program calls them through the
// MCP client of this process. The server runs in-process here (the SDK's
// in-memory transport); any transport's client works the same.
//
//   make run
//   node examples/mcp-tools.mjs
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'
import { z } from 'zod'
import { RemoteExecutor } from '@codemode-gateway/client'
import { mcpToolSource } from '@codemode-gateway/client/mcp'

const url = process.env.CODEMODE_URL ?? 'ws://127.0.0.1:8080/v1/executor'
const apiKey = process.env.CODEMODE_KEY ?? 'cmk_demo_local_only_never_deploy_this_key'

const server = new McpServer({ name: 'inventory', version: '1.0.0' })
server.registerTool('stock', { description: 'Units in stock of a product', inputSchema: { sku: z.string() } },
  async ({ sku }) => ({ content: [{ type: 'text', text: JSON.stringify({ sku, units: sku.length * 3 }) }] }))
const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
const client = new Client({ name: 'codemode-example', version: '1.0.0' })
await Promise.all([server.connect(serverSide), client.connect(clientSide)])

const executor = await RemoteExecutor.connect({ url, apiKey })
try {
  const inventory = await mcpToolSource(client, 'inventory')
  console.log(inventory.declarations) // what to put in the model's prompt

  const r = await executor.execute({
    code: `async () => {
  const all = await Promise.all(['desk', 'lamp', 'chair'].map((sku) => inventory.stock({ sku })))
  return all.filter((s) => s.units > 10).map((s) => s.sku)
}`,
    providers: inventory.providers,
    dispatch: inventory.dispatch,
  })
  console.log(r) // { result: [ 'desk', 'lamp', 'chair' ], logs: [] }
} finally {
  await executor.dispose()
  await client.close()
  await server.close()
}
