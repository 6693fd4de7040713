// The caller's current OpenTelemetry context crosses to the gateway: spans
// of the real OpenTelemetry SDK (its async-hooks context manager and W3C
// propagator), calls made inside them, and the gateway's own spans as the
// OTLP receiver of client_test.go got them (OTLP_TRACES_URL is where the
// gateway exports; OTLP_SPANS_URL lists what arrived, as JSON).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { context, propagation, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base'
import { RemoteExecutor } from '../dist/index.js'
import { outgoingTraceContext } from '../dist/trace-context.js'
import { startGateway, stopGateway } from './gateway.mjs'

const tracesURL = process.env.OTLP_TRACES_URL
const spansURL = process.env.OTLP_SPANS_URL

let gw
let executor
before(async () => {
  assert.ok(tracesURL && spansURL, 'OTLP_TRACES_URL and OTLP_SPANS_URL are unset: run these tests through make client-test')
  gw = await startGateway({ tracingEndpoint: tracesURL })
  executor = await RemoteExecutor.connect({ url: gw.url, apiKey: gw.key })
})
after(() => stopGateway({ gw, executor }))

/** The spans the receiver holds once want(spans) holds, within 15 s. */
async function receivedSpans(want) {
  const deadline = Date.now() + 15000
  for (;;) {
    const spans = await (await fetch(spansURL)).json()
    if (want(spans)) return spans
    if (Date.now() > deadline) assert.fail(`the receiver never got the spans awaited; it holds ${JSON.stringify(spans)}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

test('with no propagator registered, a call carries no trace context', async () => {
  assert.deepEqual(await outgoingTraceContext(undefined), {})
})

test('execute and invokeHandle carry the active span\'s context: the gateway\'s spans are its children', async () => {
  trace.setGlobalTracerProvider(new BasicTracerProvider())
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
  const tracer = trace.getTracer('tsclient-test')
  /** Runs fn inside a new active span; its span context, and what fn returned. */
  const inSpan = (name, fn) => tracer.startActiveSpan(name, async (span) => {
    try {
      return { span: span.spanContext(), value: await fn() }
    } finally {
      span.end()
    }
  })

  const outside = await executor.execute({ code: 'async () => 1' })
  const step = await inSpan('agent step', () => executor.execute({ code: 'async () => 6 * 7' }))
  // A context the caller gives wins over the active one.
  const given = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
  const explicit = await inSpan('explicit', () => executor.execute({ code: 'async () => 2' }, { traceparent: given }))
  const grant = await executor.execute({ code: `async () => ({ fetch: async () => new Response('handled') })`, retainHandles: true })
  const invoked = await inSpan('handle', () => executor.invokeHandle(grant.executionId, 'fetch', { url: 'https://app.example/' }))
  await executor.closeHandles(grant.executionId)
  assert.deepEqual([outside.result, step.value.result, explicit.value.result, new TextDecoder().decode(invoked.value.body)], [1, 42, 2, 'handled'])

  const executions = (spans) => spans.filter((s) => s.name === 'codemode.execute')
  const spans = await receivedSpans((spans) => executions(spans).length === 4 && spans.some((s) => s.name === 'codemode.invoke_handle'))
  const inTrace = (id) => spans.filter((s) => s.traceId === id).map((s) => [s.name, s.parentSpanId])
  assert.deepEqual(inTrace(step.span.traceId), [['codemode.execute', step.span.spanId]])
  assert.deepEqual(inTrace(invoked.span.traceId), [['codemode.invoke_handle', invoked.span.spanId]])
  assert.deepEqual(inTrace('0af7651916cd43dd8448eb211c80319c'), [['codemode.execute', 'b7ad6b7169203331']])
  assert.deepEqual(inTrace(explicit.span.traceId), [])
  // The two executions made outside any span are traces of their own.
  const roots = executions(spans).filter((s) => ![step.span.traceId, '0af7651916cd43dd8448eb211c80319c'].includes(s.traceId))
  assert.deepEqual(roots.map((s) => s.parentSpanId), ['', ''])
  assert.notEqual(roots[0].traceId, roots[1].traceId)
})

test('without @opentelemetry/api the package loads and executes, sending no context', async () => {
  // A Node.js whose resolution cannot find @opentelemetry/api, as in an
  // application that does not install the optional peer.
  const hooks = new URL('./without-opentelemetry.mjs', import.meta.url).href
  const register = `import { register } from 'node:module'; register(${JSON.stringify(hooks)})`
  const program = `
    import assert from 'node:assert/strict'
    await assert.rejects(import('@opentelemetry/api'), { code: 'ERR_MODULE_NOT_FOUND' })
    const { RemoteExecutor } = await import(${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)})
    const { loadOpenTelemetryApi, outgoingTraceContext } = await import(${JSON.stringify(new URL('../dist/trace-context.js', import.meta.url).href)})
    assert.equal(await loadOpenTelemetryApi(), undefined)
    assert.deepEqual(await outgoingTraceContext(undefined), {})
    const executor = await RemoteExecutor.connect({ url: ${JSON.stringify(gw.url)}, apiKey: ${JSON.stringify(gw.key)} })
    const r = await executor.execute({ code: 'async () => 6 * 7' })
    await executor.dispose()
    console.log(JSON.stringify(r.result))
  `
  const child = spawn(process.execPath, ['--import', `data:text/javascript,${encodeURIComponent(register)}`, '--input-type=module', '--eval', program], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (b) => { out += b })
  child.stderr.on('data', (b) => { err += b })
  const code = await new Promise((resolve) => child.on('exit', resolve))
  assert.equal(code, 0, err)
  assert.equal(out, '42\n')
})
