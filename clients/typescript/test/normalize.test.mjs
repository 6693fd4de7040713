// normalizeCode on many generated inputs: it never throws, and whatever it
// returns that parses is the entry form (imports, then one arrow).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { parse } from 'acorn'
import { normalizeCode, stripMarkdownFences } from '../dist/adapters/normalize.js'

const fragments = ['```', '```ts\n', '\n```', 'async ', '() => ', '{', '}', '(', ')', 'x', ': number', ' as any', '<T>', 'const y = 1\n',
  'return y\n', 'import { a } from "m"\n', 'interface I { n: number }\n', 'function f() { return 1 }\n', 'export default ', 'await g()\n',
  '"', '`', '/*', '*/', '\n', ';', 'type T = string\n', 'enum E { A }\n', 'x + 1', '// note\n']

// A small seeded generator, so a failure names an input that repeats.
function* inputs(count, seed) {
  let s = seed
  const next = () => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648
  for (let i = 0; i < count; i++) {
    let text = ''
    const n = 1 + Math.floor(next() * 12)
    for (let j = 0; j < n; j++) text += fragments[Math.floor(next() * fragments.length)]
    yield text
  }
}

const parseModule = (code) => parse(code, { ecmaVersion: 'latest', sourceType: 'module' })

test('normalizeCode never throws, and its parsable output is imports then one arrow', () => {
  let entries = 0
  for (const raw of inputs(3000, 16)) {
    const code = normalizeCode(raw)
    assert.equal(typeof code, 'string', JSON.stringify(raw))
    let program
    try {
      program = parseModule(code)
    } catch {
      continue // left for the executor to report as a syntax error
    }
    const body = program.body.filter((n) => n.type !== 'ImportDeclaration')
    assert.ok(program.body.slice(0, program.body.length - body.length).every((n) => n.type === 'ImportDeclaration'), `imports first: ${JSON.stringify(code)}`)
    assert.equal(body.length, 1, `one statement after the imports: ${JSON.stringify(raw)} -> ${JSON.stringify(code)}`)
    assert.equal(body[0].type, 'ExpressionStatement', JSON.stringify(code))
    assert.equal(body[0].expression.type, 'ArrowFunctionExpression', JSON.stringify(code))
    entries++
  }
  assert.ok(entries > 300, `only ${entries} inputs gave the entry form`)
})

test('stripMarkdownFences takes the first fenced block, a longer fence included', () => {
  assert.equal(stripMarkdownFences('intro\n```js\na\n```\n```js\nb\n```'), 'a')
  assert.equal(stripMarkdownFences('````ts\nconst s = "```"\n````'), 'const s = "```"')
  assert.equal(stripMarkdownFences('```\nunclosed'), 'unclosed')
  assert.equal(stripMarkdownFences('no fence'), 'no fence')
})
