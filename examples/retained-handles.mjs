// @ts-check
// Retained handles: a program returns a fetch handler, and the gateway keeps
// its isolate alive so later requests reach the same state.
//
//   make run
//   node examples/retained-handles.mjs
import { RemoteExecutor, HandlesClosedError } from '@codemode-gateway/client'

const url = process.env.CODEMODE_URL ?? 'ws://127.0.0.1:8080/v1/executor'
const apiKey = process.env.CODEMODE_KEY ?? 'cmk_demo_local_only_never_deploy_this_key'

const executor = await RemoteExecutor.connect({ url, apiKey })
try {
  const grant = await executor.execute({
    code: `async () => {
  const visits = new Map()
  return {
    fetch: async (request) => {
      const path = new URL(request.url).pathname
      visits.set(path, (visits.get(path) ?? 0) + 1)
      return Response.json({ path, visits: visits.get(path) })
    },
  }
}`,
    retainHandles: true,
  })
  if (!grant.executionId) throw new Error(`nothing was retained: ${grant.error ?? 'the run returned no handler'}`)
  console.log('granted', grant.handles) // [ 'fetch' ]

  for (const path of ['/a', '/a', '/b']) {
    const res = await executor.invokeHandle(grant.executionId, 'fetch', { url: `https://app.example${path}` })
    console.log(res.status, new TextDecoder().decode(res.body)) // 200 {"path":"/a","visits":1} ...
  }

  await executor.closeHandles(grant.executionId)
  try {
    await executor.invokeHandle(grant.executionId, 'fetch', { url: 'https://app.example/' })
  } catch (err) {
    if (!(err instanceof HandlesClosedError)) throw err
    console.log('closed:', err.message)
  }
} finally {
  await executor.dispose()
}
