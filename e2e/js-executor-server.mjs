// A JavaScript executor server speaking the contract's ExecutorApi over the
// real capnweb library, written from the contract alone. It runs programs
// with node:vm, which is NOT a sandbox: it exists to prove backends/remote
// against a peer this project did not write in Go, and as the baseline a
// user might write instead (the benchmarks compare against it).
//
//   node js-executor-server.mjs [port]   prints "listening on ws://127.0.0.1:PORT/"
import vm from 'node:vm'
import { PAYLOAD_LIMIT, serveExecutor } from './lib/executor-server.mjs'

function stringifyForDispatch(value) {
  return JSON.stringify(value, function (key, v) {
    const raw = this[key]
    if (raw instanceof Uint8Array) return { __executor_binary_v1__: 'Uint8Array', data: Buffer.from(raw).toString('base64') }
    if (ArrayBuffer.isView(raw)) {
      return { __executor_binary_v1__: 'ArrayBufferView', data: Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('base64') }
    }
    return v
  })
}

// Generated proxy: every property is a tool; arguments travel as one JSON
// string in the dispatch grammar; the envelope's error is rethrown.
function providerProxy(name, positional, dispatch) {
  return new Proxy({}, {
    get(_t, tool) {
      if (typeof tool === 'symbol' || tool === 'then' || tool === 'toJSON') return undefined
      return async (...args) => {
        if (!dispatch) throw new Error(`Tool "${tool}" not found`)
        const payload = positional ? stringifyForDispatch(args) : args.length === 0 ? '' : stringifyForDispatch(args[0])
        const answer = JSON.parse(await dispatch(name, tool, payload))
        if (answer && typeof answer === 'object' && 'error' in answer) throw new Error(answer.error)
        if (!answer || typeof answer !== 'object' || !('result' in answer)) throw new Error('The dispatch answered outside the result envelope.')
        return answer.result
      }
    },
  })
}

// run is execute's body: a fresh node:vm context per program.
async function run(code, providers, options, dispatch, outboundMode, outbound) {
  const logs = []
  const line = (level) => (...args) => logs.push({ level, text: args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))).join(' ') })
  const scope = {
    console: { log: line('log'), warn: line('warn'), error: line('error'), info() {}, debug() {} },
    __dispatch: dispatch ? (p, t, a) => dispatch(p, t, a) : async (_p, t) => JSON.stringify({ error: `Tool "${t}" not found` }),
  }
  for (const p of providers) scope[p.name] = providerProxy(p.name, p.positionalArgs, dispatch)
  if (outboundMode === 'stub') {
    scope.fetch = async (url, init = {}) => {
      const body = init.body === undefined ? null : new TextEncoder().encode(String(init.body)).buffer
      const res = await outbound({ method: init.method ?? 'GET', url: String(url), headers: Object.entries(init.headers ?? {}), body })
      return { status: res.status, text: async () => new TextDecoder().decode(res.body) }
    }
  } else if (outboundMode === 'disabled') {
    scope.fetch = async () => {
      throw new TypeError('Outbound fetch is disabled for this execution. Anything this run needs from outside has to arrive through a tool call.')
    }
  }
  const timeout = options.timeout === undefined ? 30000 : options.timeout === null ? 2147483647 : options.timeout
  try {
    const arrow = vm.runInNewContext(`(${code})`, scope, { timeout })
    let timer
    const result = await Promise.race([
      arrow(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Execution timed out at its ${timeout} ms bound. Do less work per run and return the part that is already finished.`)), timeout)
      }),
    ]).finally(() => clearTimeout(timer))
    const resultJson = result === undefined ? undefined : stringifyForDispatch(result)
    if (resultJson !== undefined && resultJson.length > PAYLOAD_LIMIT) {
      return { error: `The run's answer is ${resultJson.length} bytes, over the ${PAYLOAD_LIMIT}-byte bound.`, logs }
    }
    return resultJson === undefined ? { logs } : { resultJson, logs }
  } catch (err) {
    // A vm context has its own Error, so instanceof would miss its errors.
    return { error: err !== null && typeof err === 'object' && 'message' in err ? String(err.message) : String(err), logs }
  }
}

serveExecutor(run)
