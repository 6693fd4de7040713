// MCP: providers and a dispatch built from an MCP client's tool list, so a
// program can call the tools of any MCP server.
import { createEnvelopeDispatch } from '../envelope.js'
import { ToolNotFoundError } from '../errors.js'
import type { ProviderDescriptor, ToolDispatchFn } from '../types.js'
import { declareTools, isIdentifier, type JsonSchema } from './declarations.js'

/** The part of an MCP client (@modelcontextprotocol/sdk's Client) this adapter uses. */
export interface McpToolClient {
  listTools(params?: { cursor?: string }): Promise<{
    tools: Array<{ name: string; description?: string; inputSchema: object; outputSchema?: object }>
    nextCursor?: string
  }>
  callTool(params: { name: string; arguments?: Record<string, unknown> }): Promise<Record<string, unknown>>
}

/** Tools as a program sees them: a provider to declare, a dispatch, and their declarations for the model. */
export type ToolSource = {
  providers: ProviderDescriptor[]
  dispatch: ToolDispatchFn
  /** TypeScript declarations of the tools, for the model's prompt. */
  declarations: string
}

/** The text of a failed call's content. */
function contentText(content: unknown): string {
  if (!Array.isArray(content)) return ''
  return content
    .filter((c): c is { type: 'text'; text: string } => c?.type === 'text' && typeof c.text === 'string')
    .map((c) => c.text)
    .join('\n')
}

/**
 * What an MCP tool result gives the program: its structured content when
 * the server sent one, else its text (parsed when it is JSON), else the
 * content list itself. A result marked isError throws its text, so the
 * program's proxy rethrows it where the call was made.
 */
export function mcpResultValue(result: Record<string, unknown>): unknown {
  if (result.isError === true) throw new Error(contentText(result.content) || 'The MCP tool failed.')
  if (result.structuredContent !== undefined) return result.structuredContent
  if ('toolResult' in result) return result.toolResult
  const content = result.content
  if (Array.isArray(content) && content.length > 0 && content.every((c) => c?.type === 'text')) {
    const text = contentText(content)
    try {
      return JSON.parse(text)
    } catch {
      return text
    }
  }
  return content
}

/**
 * Lists the client's tools (every page) and returns them as one provider
 * named name: the dispatch forwards a call of a listed tool to the server,
 * its single argument as the tool's arguments, and answers any other name
 * with the not-found text without asking the server.
 */
export async function mcpToolSource(client: McpToolClient, name = 'mcp'): Promise<ToolSource> {
  if (!isIdentifier(name)) throw new TypeError(`the provider name ${JSON.stringify(name)} is not an identifier`)
  const tools: Awaited<ReturnType<McpToolClient['listTools']>>['tools'] = []
  let cursor: string | undefined
  for (let page = 0; page < 1000; page++) {
    const listed = await client.listTools(cursor === undefined ? undefined : { cursor })
    tools.push(...listed.tools)
    cursor = listed.nextCursor
    if (!cursor) break
  }
  const known = new Set(tools.map((t) => t.name))
  const dispatch = createEnvelopeDispatch({ active: true }, async (provider, tool, args) => {
    if (provider !== name || !known.has(tool)) throw new ToolNotFoundError(tool)
    const input = args[0]
    const params: { name: string; arguments?: Record<string, unknown> } = { name: tool }
    if (input !== undefined && input !== null) params.arguments = input as Record<string, unknown>
    return mcpResultValue(await client.callTool(params))
  })
  return {
    providers: [{ name, tools: [...known], positionalArgs: true }],
    dispatch,
    declarations: declareTools(
      name,
      tools.map((t) => ({
        name: t.name,
        ...(t.description !== undefined && { description: t.description }),
        inputSchema: t.inputSchema as JsonSchema,
        ...(t.outputSchema !== undefined && { outputSchema: t.outputSchema as JsonSchema }),
      })),
    ),
  }
}

/** Several tool sources as one: their providers side by side, calls routed by provider name. */
export function combineToolSources(...sources: ToolSource[]): ToolSource {
  const route = new Map<string, ToolDispatchFn>()
  for (const s of sources) for (const p of s.providers) route.set(p.name, s.dispatch)
  const missing = createEnvelopeDispatch({ active: true }, (_p, tool) => {
    throw new ToolNotFoundError(tool)
  })
  return {
    providers: sources.flatMap((s) => s.providers),
    dispatch: (provider, tool, argsJson) => (route.get(provider) ?? missing)(provider, tool, argsJson),
    declarations: sources.map((s) => s.declarations).join('\n\n'),
  }
}
