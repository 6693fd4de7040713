// @cloudflare/codemode: an Executor of that package's shape, so its
// createBrowserCodeTool (and createCodeTool) run the model's code on the
// gateway.
import { createEnvelopeDispatch, messageOf } from '../envelope.js'
import { ExecutionTimeoutError, ToolNotFoundError } from '../errors.js'
import type { ExecuteTarget, ModuleMap, OutboundFetchFn, ProviderDescriptor } from '../types.js'
import { renderLogLine } from './logs.js'

type ToolFns = Record<string, (...args: unknown[]) => Promise<unknown>>

/** A provider as @cloudflare/codemode resolves it: a namespace of functions, and sandbox-side source. */
export type CodemodeProvider = { name: string; fns: ToolFns; prelude?: string }

/** What @cloudflare/codemode's Executor.execute answers. */
export type CodemodeExecuteResult = {
  result: unknown
  error?: string
  logs?: string[]
  /** True when the run outlived its bound (the error is then the timeout text). */
  timedOut?: boolean
}

export type GatewayCodemodeExecutorOptions = {
  /** The run bound in milliseconds (the gateway's default when absent). */
  timeout?: number | null
  /** Where sandbox fetch goes: null (the default) blocks it, as the dialect's executors do. */
  outbound?: OutboundFetchFn | null
  modules?: ModuleMap
}

/**
 * @cloudflare/codemode's Executor on a codemode gateway. Every request
 * counts host waits (the dialect measures wall-clock time), log lines come
 * back with the dialect's `[warn]` and `[error]` prefixes, and, as the
 * interface asks, it never throws: a fault comes back in error.
 */
export class GatewayCodemodeExecutor {
  readonly #executor: ExecuteTarget
  readonly #options: GatewayCodemodeExecutorOptions

  constructor(executor: ExecuteTarget, options: GatewayCodemodeExecutorOptions = {}) {
    this.#executor = executor
    this.#options = options
  }

  async execute(code: string, providersOrFns: CodemodeProvider[] | ToolFns): Promise<CodemodeExecuteResult> {
    const providers: CodemodeProvider[] = Array.isArray(providersOrFns) ? providersOrFns : [{ name: 'codemode', fns: providersOrFns }]
    const byName = new Map(providers.map((p) => [p.name, p.fns]))
    const descriptors: ProviderDescriptor[] = providers.map((p) => {
      const d: ProviderDescriptor = { name: p.name, tools: Object.keys(p.fns), positionalArgs: true }
      if (p.prelude !== undefined) d.prelude = p.prelude
      return d
    })
    const state = { active: true }
    const dispatch = createEnvelopeDispatch(state, (provider, tool, args) => {
      const fns = byName.get(provider)
      if (!fns || !Object.hasOwn(fns, tool)) throw new ToolNotFoundError(tool)
      return fns[tool]!(...args)
    })
    try {
      const r = await this.#executor.execute({
        code,
        providers: descriptors,
        dispatch,
        countHostWaits: true,
        outbound: this.#options.outbound ?? null,
        ...(this.#options.timeout !== undefined && { timeout: this.#options.timeout }),
        ...(this.#options.modules !== undefined && { modules: this.#options.modules }),
      })
      const logs = (r.logs ?? []).map(renderLogLine)
      if (r.error !== undefined) {
        const out: CodemodeExecuteResult = { result: undefined, error: r.error, logs }
        if (ExecutionTimeoutError.matches(r.error)) out.timedOut = true
        return out
      }
      return { result: r.result, logs }
    } catch (err) {
      return { result: undefined, error: messageOf(err), logs: [] }
    } finally {
      state.active = false
    }
  }
}
