// Sends N invokeHandle calls for one execution without awaiting any before
// the next is sent (pipelined on one capnweb session), then prints the
// response bodies in the order the calls were made, as one JSON line.
// Usage: node pipeline.mjs <url> <executionId> <n>
import { RemoteExecutor } from './lib/executor-client.mjs'

const [url, executionId, n] = process.argv.slice(2)
const executor = await RemoteExecutor.connect(url)
const calls = []
for (let i = 1; i <= Number(n); i++) {
  calls.push(executor.invokeHandle(executionId, 'fetch', { url: `https://app.example/${i}` }))
}
const answers = await Promise.all(calls)
console.log(JSON.stringify(answers.map((a) => new TextDecoder().decode(a.body))))
await executor.dispose()
