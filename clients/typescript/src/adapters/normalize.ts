// Model output normalisation: the contract takes an async arrow, optionally
// after static imports, and leaves turning raw model output into that form
// to the caller. Sucrase strips TypeScript; acorn finds the program's shape.
import { parse, type Node, type Program, type Statement, type ModuleDeclaration } from 'acorn'
import { transform } from 'sucrase'

/** The body of the first fenced block of a markdown answer, or the text itself when it has none. */
export function stripMarkdownFences(text: string): string {
  const lines = text.split('\n')
  const open = lines.findIndex((l) => l.trimStart().startsWith('```'))
  if (open < 0) return text
  const marker = lines[open]!.trimStart()
  let ticks = 0
  while (marker[ticks] === '`') ticks++
  const fence = '`'.repeat(ticks)
  const close = lines.findIndex((l, i) => i > open && l.trim().startsWith(fence) && l.trim().split('`').join('') === '')
  return lines.slice(open + 1, close < 0 ? undefined : close).join('\n')
}

/** The source without TypeScript's types; the source itself when it does not parse as TypeScript. */
export function stripTypes(source: string): string {
  try {
    return transform(source, { transforms: ['typescript'], disableESTransforms: true, keepUnusedImports: true }).code
  } catch {
    return source
  }
}

type Located = Node & { start: number; end: number }

function parseModule(source: string): Program | undefined {
  try {
    return parse(source, { ecmaVersion: 'latest', sourceType: 'module', allowAwaitOutsideFunction: true, allowReturnOutsideFunction: true })
  } catch {
    return undefined
  }
}

const text = (source: string, node: Located) => source.slice(node.start, node.end)

/**
 * Turns what a model wrote into the contract's entry form: its imports each
 * on a line of their own, then one async arrow on a line of its own.
 *
 * - a markdown answer gives the code of its first fenced block;
 * - TypeScript annotations are stripped;
 * - an arrow (or an `export default` of one) is kept as written;
 * - a function expression or declaration is called by a wrapping arrow;
 * - statements become the body of an async arrow, and a trailing
 *   expression statement becomes its return value.
 *
 * Code that does not parse is returned as the model wrote it (fences and
 * types stripped), so the executor reports its own syntax error.
 */
export function normalizeCode(raw: string): string {
  const source = stripTypes(stripMarkdownFences(raw).trim()).trim()
  if (source === '') return 'async () => {}'
  const program = parseModule(source)
  if (!program) return source
  const body = program.body as Array<Statement | ModuleDeclaration>
  let first = 0
  while (first < body.length && body[first]!.type === 'ImportDeclaration') first++
  const imports = body.slice(0, first).map((n) => text(source, n as Located))
  const rest = body.slice(first)
  const entry = (arrow: string) => [...imports, arrow].join('\n')
  if (rest.length === 0) return entry('async () => {}')
  if (rest.length === 1) {
    const only = rest[0]!
    let value: Located | undefined
    if (only.type === 'ExpressionStatement') value = only.expression as Located
    else if (only.type === 'ExportDefaultDeclaration') value = only.declaration as Located
    if (value?.type === 'ArrowFunctionExpression') return entry(text(source, value))
    if (value?.type === 'FunctionExpression' || (value?.type === 'FunctionDeclaration' && !(value as { id?: unknown }).id)) {
      return entry(`async () => (${text(source, value)})()`)
    }
    if (only.type === 'FunctionDeclaration' || value?.type === 'FunctionDeclaration') {
      const decl = (value ?? only) as Located & { id: { name: string } }
      return entry(`async () => {\n${text(source, decl)}\nreturn ${decl.id.name}()\n}`)
    }
  }
  const last = rest[rest.length - 1]! as Located & { type: string; expression?: Located }
  const start = (rest[0] as Located).start
  if (last.type === 'ExpressionStatement' && last.expression) {
    const before = source.slice(start, last.start)
    return entry(`async () => {\n${before}return (${text(source, last.expression)})\n}`)
  }
  return entry(`async () => {\n${source.slice(start, last.end)}\n}`)
}
