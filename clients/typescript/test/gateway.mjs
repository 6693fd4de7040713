// Starts the real gateway binary for a test file: GATEWAY_BIN when the Go
// test that runs these tests set it, else the repository's bin/gateway
// (make build). The gateway serves one tenant on its embedded local backend
// with a fresh key, at a free loopback port it keeps across restarts.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { mkdtempSync, writeFileSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { RemoteExecutor } from '../dist/index.js'

const repoBinary = fileURLToPath(new URL('../../../bin/gateway', import.meta.url))

export function gatewayBinary() {
  const bin = process.env.GATEWAY_BIN || repoBinary
  if (!existsSync(bin)) throw new Error(`no gateway binary at ${bin}: run make build, or the tests through go test ./clients/typescript`)
  return bin
}

export function newKey() {
  return 'cmk_' + randomBytes(32).toString('base64url')
}

export function keyHash(key) {
  return 'sha256:' + createHash('sha256').update(key).digest('hex')
}

/**
 * Starts `gateway serve`. allowedOrigins goes on the browser route (the
 * codemode.executor.v1 subprotocol); the default route answers requests
 * that offer no subprotocol. tracingEndpoint turns tracing on, exporting
 * there within 50 ms of a span's end. configFile serves that file instead
 * (on free ports, its key unknown here: key is empty).
 */
export async function startGateway({ allowedOrigins = [], tenantPolicy = '', tracingEndpoint = '', configFile = '' } = {}) {
  const key = configFile ? '' : newKey()
  const dir = mkdtempSync(join(tmpdir(), 'tsclient-gateway-'))
  const config = configFile || join(dir, 'gateway.yaml')
  if (!configFile) writeFileSync(config, `listen: 127.0.0.1:0
${tracingEndpoint ? `tracing: {enabled: true, endpoint: ${JSON.stringify(tracingEndpoint)}}\n` : ''}backends:
  - name: local
    type: local
    local: {maxWorkers: 2, minWorkers: 1}
tenants:
  - name: demo
    backend: local
    keys: [{name: test, hash: ${keyHash(key)}}]
${tenantPolicy ? `    policy: ${tenantPolicy}\n` : ''}routes:
  - path: /v1/executor
    kind: executor
  - path: /v1/executor
    kind: executor
    subprotocols: [codemode.executor.v1]
    allowedOrigins: ${JSON.stringify(allowedOrigins)}
`)
  const gw = { key, config, listen: '127.0.0.1:0', child: undefined, httpUrl: '', url: '' }
  gw.start = async () => {
    const child = spawn(gatewayBinary(), ['serve', '--config', config, '--listen', gw.listen, '--admin-listen', '127.0.0.1:0'], {
      detached: true, // its own process group, so its workers die with it
      stdio: ['ignore', 'pipe', 'pipe'],
      env: tracingEndpoint ? { ...process.env, OTEL_BSP_SCHEDULE_DELAY: '50' } : process.env,
    })
    gw.child = child
    let stderr = ''
    child.stderr.on('data', (b) => { stderr = (stderr + b).slice(-4000) })
    const address = await new Promise((resolve, reject) => {
      let out = ''
      const timer = setTimeout(() => reject(new Error(`the gateway never said where it listens:\n${stderr}`)), 30000)
      child.stdout.on('data', (b) => {
        out += b
        const m = /gateway listening on (http:\/\/\S+)/.exec(out)
        if (m) {
          clearTimeout(timer)
          resolve(m[1])
        }
      })
      child.on('exit', (code) => {
        clearTimeout(timer)
        reject(new Error(`the gateway exited with ${code}:\n${stderr}`))
      })
    })
    gw.httpUrl = address
    gw.url = address.replace(/^http/, 'ws') + '/v1/executor'
    gw.listen = new URL(address).host // a restart keeps the port
  }
  /** Kills the gateway and its workers at once. */
  gw.kill = async () => {
    const child = gw.child
    if (!child || child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    try {
      process.kill(-child.pid, 'SIGKILL')
    } catch {
      child.kill('SIGKILL')
    }
    await exited
  }
  await gw.start()
  return gw
}

/** A new gateway, and a RemoteExecutor connected to it with its key. */
export async function connectToNewGateway(options) {
  const gw = await startGateway(options)
  return { gw, executor: await RemoteExecutor.connect({ url: gw.url, apiKey: gw.key }) }
}

/** Disposes the executor and kills the gateway, whichever of them started. */
export async function stopGateway({ gw, executor }) {
  await executor?.dispose()
  await gw?.kill()
}

// The contract's part of an execute result, for whole comparisons: usage,
// the gateway's extension, must be on it and is checked by a test of its own.
export function contractPart(result) {
  const { usage, ...rest } = result
  assert.equal(typeof usage, 'object', 'the gateway reports usage')
  assert.notEqual(usage, null)
  return rest
}
