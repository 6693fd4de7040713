// The package as an application gets it (README.md's Connect): npm pack of
// this folder (dist/ built), installed into a new npm project, which takes
// the package's dependencies from the npm registry. The READMEs' first
// snippet, saved as app.mjs, runs against the gateway of `make run`
// (config.example.yaml, on free ports) and prints what its comment says;
// CommonJS require()s it, or hears the one sentence an older Node.js gets.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startGateway } from './gateway.mjs'

const pkgDir = fileURLToPath(new URL('..', import.meta.url))
const readme = fileURLToPath(new URL('../../../README.md', import.meta.url))
const exampleConfig = fileURLToPath(new URL('../../../config.example.yaml', import.meta.url))
const { version } = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'))

function run(cmd, args, cwd) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, timeout: 120000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')}: ${err.message}\n${stdout}\n${stderr}`))
      else resolve(stdout)
    })
  })
}

let dir, app, gw
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tsclient-package-'))
  await run('npm', ['pack', '--silent', '--pack-destination', dir], pkgDir)
  app = join(dir, 'app')
  await run('mkdir', [app])
  await run('npm', ['init', '-y'], app)
  await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', join(dir, `codemode-gateway-client-${version}.tgz`)], app)
  gw = await startGateway({ configFile: exampleConfig })
})
after(async () => {
  await gw?.kill()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

for (const [name, path] of [['README.md', readme], ['clients/typescript/README.md', join(pkgDir, 'README.md')]]) {
  test(`package: ${name}'s snippet, as app.mjs in a new npm project, prints what its comment says`, async () => {
    const snippet = readFileSync(path, 'utf8').match(/```js\n([\s\S]*?)```/)?.[1]
    assert.ok(snippet, 'the README has a js block')
    const printed = snippet.match(/^console\.log\(.*\)\n\/\/ (.*)$/m)?.[1]
    assert.ok(printed, 'the snippet prints, with the output in the comment below')
    const local = "url: 'ws://127.0.0.1:8080/v1/executor'"
    assert.ok(snippet.includes(local), 'the snippet connects to make run')
    writeFileSync(join(app, 'app.mjs'), snippet.replace(local, `url: ${JSON.stringify(gw.url)}`))
    assert.equal(await run('node', ['app.mjs'], app), printed + '\n')
  })
}

// The adapters for ai and MCP import their optional peers, which this
// project has not installed.
test('package: CommonJS require()s it, or is told to import it', async () => {
  const entries = ['', '/codemode', '/normalize']
  const script = `for (const e of ${JSON.stringify(entries)}) console.log(e || '.', Object.keys(require('@codemode-gateway/client' + e)).length > 0)`
  assert.equal(await run('node', ['-e', script], app), entries.map((e) => `${e || '.'} true`).join('\n') + '\n')
  assert.equal(await run('node', ['-e', "console.log(typeof require('@codemode-gateway/client').RemoteExecutor)"], app), 'function\n')
  // What a Node.js without require() of ES modules (before 20.19) does.
  const old = `try { require('@codemode-gateway/client/normalize') } catch (e) { console.log(e.message) }`
  assert.equal(await run('node', ['--no-experimental-require-module', '-e', old], app),
    "@codemode-gateway/client/normalize is an ES module package: use import, or await import('@codemode-gateway/client/normalize') from CommonJS (require() of it needs Node.js 20.19 or later)\n")
})
