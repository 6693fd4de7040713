// TypeScript declarations of tools, written from their JSON Schemas, for
// the description a model reads before it writes a program.

/** The part of JSON Schema the declarations read. */
export type JsonSchema = {
  type?: string | string[]
  description?: string
  properties?: Record<string, JsonSchema>
  required?: string[]
  items?: JsonSchema | JsonSchema[]
  enum?: unknown[]
  const?: unknown
  anyOf?: JsonSchema[]
  oneOf?: JsonSchema[]
  allOf?: JsonSchema[]
  additionalProperties?: boolean | JsonSchema
  nullable?: boolean
}

/** One tool as the declarations show it. */
export type ToolDeclaration = {
  name: string
  description?: string
  inputSchema?: JsonSchema
  outputSchema?: JsonSchema
}

const IDENTIFIER_START = (c: string) => (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c === '_' || c === '$'
const IDENTIFIER_PART = (c: string) => IDENTIFIER_START(c) || (c >= '0' && c <= '9')

/** Whether name can follow a dot: ASCII letters, digits, _ and $, not starting with a digit. */
export function isIdentifier(name: string): boolean {
  return name.length > 0 && IDENTIFIER_START(name[0]!) && [...name].every(IDENTIFIER_PART)
}

const key = (name: string) => (isIdentifier(name) ? name : JSON.stringify(name))

function comment(text: string | undefined, indent: string): string {
  if (!text) return ''
  return `${indent}/** ${text.split('*/').join('* /').split('\n').join(`\n${indent} * `)} */\n`
}

/** The TypeScript type a JSON Schema describes; unknown where it says nothing the type can carry. */
export function schemaToType(schema: JsonSchema | boolean | undefined, indent = ''): string {
  if (schema === undefined || schema === true) return 'unknown'
  if (schema === false) return 'never'
  let type: string
  if (schema.const !== undefined) type = JSON.stringify(schema.const)
  else if (Array.isArray(schema.enum)) type = schema.enum.map((v) => JSON.stringify(v)).join(' | ') || 'never'
  else if (schema.anyOf ?? schema.oneOf) type = (schema.anyOf ?? schema.oneOf)!.map((s) => schemaToType(s, indent)).join(' | ')
  else if (schema.allOf) type = schema.allOf.map((s) => schemaToType(s, indent)).join(' & ')
  else if (Array.isArray(schema.type)) type = schema.type.map((t) => schemaToType({ ...schema, type: t }, indent)).join(' | ')
  else {
    switch (schema.type) {
      case 'string':
        type = 'string'
        break
      case 'number':
      case 'integer':
        type = 'number'
        break
      case 'boolean':
        type = 'boolean'
        break
      case 'null':
        type = 'null'
        break
      case 'array': {
        const items = schema.items
        type = Array.isArray(items) ? `[${items.map((s) => schemaToType(s, indent)).join(', ')}]` : `Array<${schemaToType(items, indent)}>`
        break
      }
      case 'object':
      case undefined:
        type = schema.properties || schema.type === 'object' ? objectType(schema, indent) : 'unknown'
        break
      default:
        type = 'unknown'
    }
  }
  return schema.nullable ? `${type} | null` : type
}

function objectType(schema: JsonSchema, indent: string): string {
  const inner = indent + '  '
  const required = new Set(schema.required ?? [])
  const lines = Object.entries(schema.properties ?? {}).map(
    ([name, prop]) => `${comment(prop.description, inner)}${inner}${key(name)}${required.has(name) ? '' : '?'}: ${schemaToType(prop, inner)}`,
  )
  const extra = schema.additionalProperties
  if (extra !== undefined && extra !== false) lines.push(`${inner}[key: string]: ${schemaToType(extra, inner)}`)
  return lines.length === 0 ? 'Record<string, unknown>' : `{\n${lines.join('\n')}\n${indent}}`
}

/** `declare const <namespace>: { … }` with one method per tool, taking its input and promising its output. */
export function declareTools(namespace: string, tools: readonly ToolDeclaration[]): string {
  const members = tools.map((t) => {
    const input = t.inputSchema ? `input: ${schemaToType(t.inputSchema, '  ')}` : ''
    return `${comment(t.description, '  ')}  ${key(t.name)}(${input}): Promise<${t.outputSchema ? schemaToType(t.outputSchema, '  ') : 'unknown'}>`
  })
  return `declare const ${namespace}: {\n${members.join('\n')}\n}`
}
