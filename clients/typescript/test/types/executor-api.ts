// Type-checked by `tsc -p tsconfig.types.json` (make test), never run: the
// contract's wire surface types capnweb's stub, and misuse fails to compile.
import { newWebSocketRpcSession, type RpcStub } from 'capnweb'
import type { ExecuteResultMessage, ExecutorApi, OutboundResponseMessage } from '../../src/index.js'
import { RemoteExecutor, type Executor } from '../../src/index.js'

export async function handshakeThenRun(url: string): Promise<ExecuteResultMessage> {
  const api: RpcStub<ExecutorApi> = newWebSocketRpcSession<ExecutorApi>(url)
  const version: number = await api.protocolVersion()
  if (version !== 1) throw new Error('another protocol')
  const dispatch = async (provider: string, tool: string, argsJson: string) => JSON.stringify({ result: [provider, tool, argsJson] })
  const res: OutboundResponseMessage = await api.invokeHandle('x1.id', 'fetch', { method: 'GET', url: 'https://app.example/', headers: [], body: null })
  void res
  // @ts-expect-error: the outbound mode is one of three names
  void api.execute('async () => 1', [], {}, null, 'carrier-pigeon')
  // @ts-expect-error: modules cross as [name, source] pairs, not a map
  void api.execute('async () => 1', [], { modules: { greeter: 'export const x = 1' } }, null, 'disabled')
  return api.execute('async () => 1', [{ name: 'store', tools: ['find'] }], { timeout: null, modules: [['greeter', 'export const x = 1']] }, dispatch, 'disabled')
}

// RemoteExecutor is the contract's Executor.
export const asExecutor = (r: RemoteExecutor): Executor => r
