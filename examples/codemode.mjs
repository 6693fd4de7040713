// @ts-check
// @cloudflare/codemode on the gateway: its browser-entry code tool, with
// the gateway as its executor.
//
//   make run
//   node examples/codemode.mjs
import { createBrowserCodeTool } from '@cloudflare/codemode/browser'
import { RemoteExecutor } from '@codemode-gateway/client'
import { GatewayCodemodeExecutor } from '@codemode-gateway/client/codemode'

const url = process.env.CODEMODE_URL ?? 'ws://127.0.0.1:8080/v1/executor'
const apiKey = process.env.CODEMODE_KEY ?? 'cmk_demo_local_only_never_deploy_this_key'

const remote = await RemoteExecutor.connect({ url, apiKey })
try {
  const codeTool = createBrowserCodeTool({
    tools: {
      searchDocs: {
        description: 'Search the docs',
        inputSchema: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
        execute: async (args) => [`${args.query}: see docs/configuration.md`],
      },
    },
    executor: new GatewayCodemodeExecutor(remote, { timeout: 10000 }),
  })
  console.log(codeTool.description) // the tool's TypeScript declarations, for the model

  const out = await codeTool.execute({
    code: `async () => {
  const hits = await codemode.searchDocs({ query: 'allowedOrigins' })
  console.warn('found', hits.length)
  return hits[0]
}`,
  })
  console.log(out) // { result: 'allowedOrigins: see docs/configuration.md', logs: [ '[warn] found 1' ] }
} finally {
  await remote.dispose()
}
