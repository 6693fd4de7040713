// The trace context a call carries: the caller's own, or else the active
// context of OpenTelemetry's API when the application has it installed.
import type { CallOptions, InvokeCallOptions } from './types.js'

/** What this client uses of @opentelemetry/api. */
export type OpenTelemetryApi = {
  context: { active(): unknown }
  propagation: { inject(context: unknown, carrier: Record<string, string>): void }
}

// A variable, not a literal: bundlers leave the import alone, so an
// application without the optional peer still builds.
const OPENTELEMETRY_API = '@opentelemetry/api'

let loading: Promise<OpenTelemetryApi | undefined> | undefined

function isApi(m: unknown): m is OpenTelemetryApi {
  const api = m as Partial<OpenTelemetryApi> | null
  return typeof api?.context?.active === 'function' && typeof api.propagation?.inject === 'function'
}

/**
 * @opentelemetry/api, loaded once; undefined when it cannot be loaded (it is
 * an optional peer dependency).
 */
export function loadOpenTelemetryApi(): Promise<OpenTelemetryApi | undefined> {
  loading ??= import(/* webpackIgnore: true */ /* @vite-ignore */ OPENTELEMETRY_API).then(
    (m: unknown) => (isApi(m) ? m : undefined),
    () => undefined,
  )
  return loading
}

/**
 * The trace context of one call: the one the options give, when they give
 * one; else what the registered propagator injects from the active context
 * (nothing without @opentelemetry/api, a propagator or an active span).
 */
export async function outgoingTraceContext(options: CallOptions | undefined): Promise<InvokeCallOptions> {
  const out: InvokeCallOptions = {}
  if (options?.traceparent !== undefined || options?.tracestate !== undefined) {
    if (options.traceparent !== undefined) out.traceparent = options.traceparent
    if (options.tracestate !== undefined) out.tracestate = options.tracestate
    return out
  }
  const api = await loadOpenTelemetryApi()
  if (!api) return out
  const carrier: Record<string, string> = {}
  api.propagation.inject(api.context.active(), carrier)
  if (typeof carrier.traceparent !== 'string' || carrier.traceparent === '') return out
  out.traceparent = carrier.traceparent
  if (typeof carrier.tracestate === 'string' && carrier.tracestate !== '') out.tracestate = carrier.tracestate
  return out
}
