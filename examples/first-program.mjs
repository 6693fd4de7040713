// @ts-check
// A first program: two tools and a module, run on the gateway of `make run`.
//
//   make run                        # in another terminal
//   node examples/first-program.mjs
import { RemoteExecutor, createEnvelopeDispatch, ToolNotFoundError } from '@codemode-gateway/client'

const url = process.env.CODEMODE_URL ?? 'ws://127.0.0.1:8080/v1/executor'
const apiKey = process.env.CODEMODE_KEY ?? 'cmk_demo_local_only_never_deploy_this_key' // make run's local-only demo key

const executor = await RemoteExecutor.connect({ url, apiKey })
try {
  // The tools live in this process; the program's calls come back here.
  const orders = { ada: [{ id: 'o1', total: 42 }, { id: 'o2', total: 8 }] }
  const dispatch = createEnvelopeDispatch({ active: true }, (_provider, tool, [input]) => {
    const { customer } = /** @type {{ customer: keyof typeof orders }} */ (input)
    if (tool === 'listOrders') return orders[customer] ?? []
    if (tool === 'vatRate') return 0.25
    throw new ToolNotFoundError(tool)
  })

  const result = await executor.execute({
    code: `import { sum } from 'math'
async () => {
  const list = await store.listOrders({ customer: 'ada' })
  const rate = await store.vatRate({ customer: 'ada' })
  console.log('orders', list.length)
  return { net: sum(list.map((o) => o.total)), gross: sum(list.map((o) => o.total)) * (1 + rate) }
}`,
    providers: [{ name: 'store', tools: ['listOrders', 'vatRate'], positionalArgs: true }],
    dispatch,
    modules: { math: 'export const sum = (xs) => xs.reduce((a, b) => a + b, 0)' },
    timeout: 5000,
    outbound: null, // no network for this program
  })
  console.log(result) // { result: { net: 50, gross: 62.5 }, logs: [ { level: 'log', text: 'orders 2' } ], usage: { …, toolCalls: 2, … } }
} finally {
  await executor.dispose()
}
