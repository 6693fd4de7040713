// An executor server on isolated-vm: the contract's ExecutorApi over the
// real capnweb library, with the same surface and conventions as
// ../js-executor-server.mjs, but every execution runs in a fresh V8 isolate
// of its own (128 MB heap limit), disposed after its run. It is the
// isolate-per-run design a user might build instead of the gateway, and the
// capacity benchmark (../bench-capacity.mjs) measures the gateway against
// it. Like the node:vm server it takes no modules, retains no handles, and
// times a run by the wall clock (tool waits included).
//
//   node --no-node-snapshot ivm-executor-server.mjs [port]
//     prints "listening on ws://127.0.0.1:PORT/"
//
// isolated-vm needs --no-node-snapshot on Node 20 and later.
import ivm from 'isolated-vm'
import { PAYLOAD_LIMIT, serveExecutor } from '../lib/executor-server.mjs'

const MEMORY_LIMIT_MB = 128
const DEFAULT_TIMEOUT_MS = 30000
const MAX_TIMEOUT_MS = 2147483647

if (!process.execArgv.includes('--no-node-snapshot') && !(process.env.NODE_OPTIONS ?? '').includes('--no-node-snapshot')) {
  console.error('run me as: node --no-node-snapshot ivm-executor-server.mjs (isolated-vm requires it on Node 20+)')
  process.exit(2)
}

const timeoutText = (ms) => `Execution timed out at its ${ms} ms bound. Do less work per run and return the part that is already finished.`
const memoryText = `Execution ran out of memory at its ${MEMORY_LIMIT_MB} MB limit. Work through the data in smaller pieces and keep only what you return.`

// guestSetup runs INSIDE the isolate (its source is sent there; it closes
// over nothing of this file). It installs console, the dispatch codec, the
// provider proxies, __dispatch and fetch, and returns the function that
// runs the program's arrow and reports { resultJson | error, logs } as JSON
// text. The host references arrive as isolated-vm References; the guest can
// only call them, and only through the closures below.
function guestSetup(hostDispatch, hostFetch, providersJson, outboundMode) {
  const TAG = '__executor_binary_v1__'
  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
  const encodeBase64 = (bytes) => {
    let out = ''
    for (let i = 0; i < bytes.length; i += 3) {
      const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0)
      out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63]
      out += i + 1 < bytes.length ? B64[(n >> 6) & 63] : '='
      out += i + 2 < bytes.length ? B64[n & 63] : '='
    }
    return out
  }
  const decodeBase64 = (text) => {
    const digits = text.replace(/=+$/, '')
    const out = new Uint8Array(Math.floor((digits.length * 3) / 4))
    let acc = 0
    let bits = 0
    let j = 0
    for (const c of digits) {
      acc = ((acc << 6) | B64.indexOf(c)) & 0xffffff
      bits += 6
      if (bits >= 8) {
        bits -= 8
        out[j++] = (acc >> bits) & 255
      }
    }
    return out
  }
  const stringify = (value) => JSON.stringify(value, function (key, v) {
    const raw = this[key]
    if (raw instanceof Uint8Array) return { [TAG]: 'Uint8Array', data: encodeBase64(raw) }
    if (raw instanceof ArrayBuffer) return { [TAG]: 'Uint8Array', data: encodeBase64(new Uint8Array(raw)) }
    if (ArrayBuffer.isView(raw)) return { [TAG]: 'ArrayBufferView', data: encodeBase64(new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength)) }
    return v
  })
  const parse = (text) => JSON.parse(text, (_k, v) =>
    v && typeof v === 'object' && !Array.isArray(v) && typeof v[TAG] === 'string' && typeof v.data === 'string' ? decodeBase64(v.data) : v)
  const messageOf = (err) => (err !== null && typeof err === 'object' && 'message' in err ? String(err.message) : String(err))

  const logs = []
  const text = (a) => {
    if (typeof a === 'string') return a
    const s = JSON.stringify(a)
    return s === undefined ? String(a) : s
  }
  const line = (level) => (...args) => { logs.push({ level, text: args.map(text).join(' ') }) }
  globalThis.console = { log: line('log'), warn: line('warn'), error: line('error'), info() {}, debug() {} }

  // A tool call crosses to the host as three strings and comes back as a
  // promise of the envelope's JSON text; the guest keeps running meanwhile.
  const dispatch = (provider, tool, argsJson) =>
    hostDispatch.apply(undefined, [String(provider), String(tool), String(argsJson)], { result: { promise: true, copy: true } })
  globalThis.__dispatch = dispatch
  for (const { name, positionalArgs } of JSON.parse(providersJson)) {
    globalThis[name] = new Proxy({}, {
      get(_t, tool) {
        if (typeof tool === 'symbol' || tool === 'then' || tool === 'toJSON') return undefined
        return async (...args) => {
          const payload = positionalArgs ? stringify(args) : args.length === 0 ? '' : stringify(args[0])
          const answerText = await dispatch(name, tool, payload)
          const answer = typeof answerText === 'string' ? parse(answerText) : undefined
          if (answer && typeof answer === 'object' && 'error' in answer) throw new Error(answer.error)
          if (!answer || typeof answer !== 'object' || !('result' in answer)) throw new Error('The dispatch answered outside the result envelope.')
          return answer.result
        }
      },
    })
  }

  if (outboundMode === 'stub') {
    globalThis.fetch = async (url, init = {}) => {
      const body = init.body === undefined || init.body === null ? null : String(init.body)
      const headers = JSON.stringify(Object.entries(init.headers ?? {}))
      const res = await hostFetch.apply(undefined, [init.method ?? 'GET', String(url), headers, body], { result: { promise: true, copy: true } })
      return { status: res.status, text: async () => res.text }
    }
  } else if (outboundMode === 'disabled') {
    globalThis.fetch = async () => {
      throw new TypeError('Outbound fetch is disabled for this execution. Anything this run needs from outside has to arrive through a tool call.')
    }
  }

  return (arrow) => Promise.resolve()
    .then(() => arrow())
    .then((value) => ({ resultJson: value === undefined ? undefined : stringify(value) }), (err) => ({ error: messageOf(err) }))
    .then((outcome) => JSON.stringify({ ...outcome, logs }))
}

// runIn runs one program in a fresh context of isolate and returns the
// guest's report, parsed. Compile errors and a dying isolate reject.
async function runIn(isolate, code, providers, dispatch, outboundMode, outbound) {
  const context = await isolate.createContext()
  const hostDispatch = new ivm.Reference(async (provider, tool, argsJson) =>
    dispatch ? dispatch(provider, tool, argsJson) : JSON.stringify({ error: `Tool "${tool}" not found` }))
  const hostFetch = new ivm.Reference(async (method, url, headersJson, body) => {
    const bodyBuffer = body === null ? null : new TextEncoder().encode(body).buffer
    const res = await outbound({ method, url, headers: JSON.parse(headersJson), body: bodyBuffer })
    return { status: res.status, text: new TextDecoder().decode(res.body) }
  })
  const providersJson = JSON.stringify(providers.map((p) => ({ name: p.name, positionalArgs: !!p.positionalArgs })))
  const runner = await context.evalClosure(`return (${guestSetup})($0, $1, $2, $3)`,
    [hostDispatch, hostFetch, providersJson, outboundMode], { result: { reference: true } })
  // The program is its own script, so its errors point into its own lines.
  const script = await isolate.compileScript(`(${code})`, { filename: 'program.js' })
  const arrow = await script.run(context, { reference: true })
  const report = await runner.apply(undefined, [arrow.derefInto()], { result: { promise: true, copy: true } })
  return JSON.parse(report)
}

// run is execute's body: a fresh isolate per program, disposed after it.
async function run(code, providers, options, dispatch, outboundMode, outbound) {
  const timeout = options.timeout === undefined ? DEFAULT_TIMEOUT_MS : options.timeout === null ? MAX_TIMEOUT_MS : Math.min(options.timeout, MAX_TIMEOUT_MS)
  const isolate = new ivm.Isolate({ memoryLimit: MEMORY_LIMIT_MB })
  let timer
  try {
    // The host's timer bounds the run; disposing the isolate stops guest
    // code wherever it is, a busy loop included.
    const expired = new Promise((resolve) => { timer = setTimeout(() => resolve({ error: timeoutText(timeout), logs: [] }), timeout) })
    const report = await Promise.race([runIn(isolate, code, providers ?? [], dispatch, outboundMode, outbound), expired])
    if (report.resultJson !== undefined && report.resultJson.length > PAYLOAD_LIMIT) {
      return { error: `The run's answer is ${report.resultJson.length} bytes, over the ${PAYLOAD_LIMIT}-byte bound.`, logs: report.logs }
    }
    return report
  } catch (err) {
    // isolated-vm disposes an isolate that passes its memory limit.
    if (isolate.isDisposed || /memory limit/i.test(String(err?.message))) return { error: memoryText, logs: [] }
    return { error: err !== null && typeof err === 'object' && 'message' in err ? String(err.message) : String(err), logs: [] }
  } finally {
    clearTimeout(timer)
    if (!isolate.isDisposed) isolate.dispose()
  }
}

serveExecutor(run)
