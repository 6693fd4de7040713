// The Vercel AI SDK: one tool that runs the model's program on the gateway,
// with the tools of an AI SDK tool set as its providers.
import { asSchema, jsonSchema, tool, type Tool, type ToolSet } from 'ai'
import { createEnvelopeDispatch } from '../envelope.js'
import { ToolNotFoundError } from '../errors.js'
import type { ExecuteTarget, ModuleMap, OutboundFetchFn } from '../types.js'
import { declareTools, isIdentifier, type JsonSchema, type ToolDeclaration } from './declarations.js'
import { renderLogLine } from './logs.js'
import { normalizeCode } from './normalize.js'

export type CreateCodeToolOptions = {
  /** The tools the program may call, as `<namespace>.<name>(input)`. */
  tools: ToolSet
  executor: ExecuteTarget
  /** The name the tools are declared under in the sandbox (default codemode). */
  namespace?: string
  /** The tool description; `{{types}}` becomes the declarations of the tools. */
  description?: string
  timeout?: number | null
  /** Where sandbox fetch goes: null (the default) blocks it. */
  outbound?: OutboundFetchFn | null
  modules?: ModuleMap
  /** Turns raw model output into the entry form (default: normalizeCode). */
  normalize?: (code: string) => string
}

export type CodeToolInput = { code: string }
export type CodeToolOutput = { result: unknown; logs: string[] }

type CodeTool = Tool<CodeToolInput, CodeToolOutput>
// What the AI SDK passes to a tool's execute: named through the tool rather
// than as ToolExecutionOptions, which v7 made generic in the tool's context.
type ExecuteOptions = Parameters<NonNullable<CodeTool['execute']>>[1]

export const DEFAULT_CODE_TOOL_DESCRIPTION = `Run a JavaScript program to reach the goal. It can call these tools:

{{types}}

Write one async arrow function, e.g. async () => { const a = await codemode.someTool({ x: 1 }); return a }.
What it returns is the result; console.log output comes back too.`

/** The JSON Schema an AI SDK tool's inputSchema stands for, when it can be read without waiting. */
function readSchema(schema: unknown): JsonSchema | undefined {
  if (schema === undefined) return undefined
  try {
    const json = asSchema(schema as Parameters<typeof asSchema>[0]).jsonSchema
    return typeof (json as PromiseLike<unknown>).then === 'function' ? undefined : (json as JsonSchema)
  } catch {
    return undefined
  }
}

/**
 * One AI SDK tool that runs the model's code on the gateway. Its
 * description declares the tools in TypeScript; its execute normalises the
 * code, runs it, and routes every tool call back to the AI SDK tool's own
 * execute (with the abort signal and messages of the outer call). A failed
 * run throws with the executor's text, which the AI SDK hands to the model.
 * Tools that need approval are left out: a running program cannot wait for it.
 */
export function createCodeTool(options: CreateCodeToolOptions): CodeTool {
  const namespace = options.namespace ?? 'codemode'
  if (!isIdentifier(namespace)) throw new TypeError(`the namespace ${JSON.stringify(namespace)} is not an identifier`)
  // A tool that needs approval cannot wait for it inside a running program,
  // so the program does not get it.
  const tools: ToolSet = Object.fromEntries(Object.entries(options.tools).filter(([, t]) => !t.needsApproval))
  const declarations: ToolDeclaration[] = Object.entries(tools).map(([name, t]) => {
    const d: ToolDeclaration = { name }
    // v7 also takes a description computed from the call's context, which
    // does not exist yet when the declarations are written.
    if (typeof t.description === 'string') d.description = t.description
    const input = readSchema(t.inputSchema)
    if (input) d.inputSchema = input
    const output = readSchema((t as { outputSchema?: unknown }).outputSchema)
    if (output) d.outputSchema = output
    return d
  })
  const types = declareTools(namespace, declarations)
  const description = (options.description ?? DEFAULT_CODE_TOOL_DESCRIPTION).split('{{types}}').join(types)
  const normalize = options.normalize ?? normalizeCode

  return tool({
    description,
    inputSchema: jsonSchema<CodeToolInput>({
      type: 'object',
      properties: { code: { type: 'string', description: 'An async arrow function in JavaScript' } },
      required: ['code'],
      additionalProperties: false,
    }),
    execute: async ({ code }: CodeToolInput, outer: ExecuteOptions): Promise<CodeToolOutput> => {
      let calls = 0
      const state = { active: true }
      const dispatch = createEnvelopeDispatch(state, async (provider, name, args) => {
        const t = provider === namespace && Object.hasOwn(tools, name) ? tools[name] : undefined
        if (!t?.execute) throw new ToolNotFoundError(name)
        // The outer call's options (messages, abort signal, and the context:
        // v6's experimental_context, v7's context) under a call id of its own.
        return t.execute(args[0] as never, { ...outer, toolCallId: `${outer.toolCallId}.${++calls}` })
      })
      try {
        const r = await options.executor.execute({
          code: normalize(code),
          providers: [{ name: namespace, tools: Object.keys(tools), positionalArgs: true }],
          dispatch,
          outbound: options.outbound ?? null,
          ...(options.timeout !== undefined && { timeout: options.timeout }),
          ...(options.modules !== undefined && { modules: options.modules }),
        }, outer.abortSignal ? { signal: outer.abortSignal } : undefined)
        const logs = (r.logs ?? []).map(renderLogLine)
        if (r.error !== undefined) throw new Error(logs.length ? `${r.error}\n\nConsole output:\n${logs.join('\n')}` : r.error)
        return { result: r.result, logs }
      } finally {
        state.active = false
      }
    },
  })
}
