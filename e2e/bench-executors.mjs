// Benchmark program: the same JavaScript client (lib/executor-client.mjs),
// side by side in one run, against
//   - the Go executor server (`gateway serve --executor-server`, goja in
//     worker processes),
//   - js-executor-server.mjs (capnweb + node:vm, what a user might write
//     instead; not a sandbox),
//   - the gateway in front of its local backend (one hop), and
//   - the gateway in front of the Go executor server as a remote group
//     (two hops),
// and finally many connections at once through the gateway.
//
//   node bench-executors.mjs ../bin/gateway [runs]
//
// For each program it reports p50/p99 latency of one execution at a time and
// throughput with 16 executions in flight, and the ratios.
import { spawn } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHash, randomBytes } from 'node:crypto'
import { RemoteExecutor } from './lib/executor-client.mjs'

const gatewayBinary = process.argv[2] ?? '../bin/gateway'
const runs = Number(process.argv[3] ?? 2000)

function start(cmd, args) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] })
  return new Promise((resolve, reject) => {
    let buf = ''
    child.stdout.on('data', (d) => {
      buf += d
      const m = buf.match(/(?:gateway|executor server|^)\s*listening on ((?:ws|http):\/\/[^\s"]+)/m)
      if (m) resolve({ url: m[1].replace(/^http/, 'ws'), child })
    })
    child.on('exit', (code) => reject(new Error(`${cmd} exited with ${code}`)))
  })
}

const programs = {
  trivial: { code: 'async () => 1' },
  'ten-tool-calls': {
    code: 'async () => { let s = 0; for (let i = 0; i < 10; i++) s += await calc.add(i, 1); return s }',
    providers: [{ name: 'calc', tools: ['add'], positionalArgs: true }],
    dispatch: async (_p, _t, a) => {
      const [x, y] = JSON.parse(a)
      return JSON.stringify({ result: x + y })
    },
  },
}

async function measure(executor, program) {
  for (let i = 0; i < 50; i++) await executor.execute(program) // warm up
  const lat = []
  for (let i = 0; i < runs; i++) {
    const t = process.hrtime.bigint()
    const r = await executor.execute(program)
    lat.push(Number(process.hrtime.bigint() - t) / 1e3)
    if (r.error) throw new Error(r.error)
  }
  lat.sort((a, b) => a - b)
  const t0 = process.hrtime.bigint()
  let next = 0
  const worker = async () => {
    while (next++ < runs) await executor.execute(program)
  }
  await Promise.all(Array.from({ length: 16 }, worker))
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9
  return { p50: lat[Math.floor(lat.length / 2)], p99: lat[Math.floor(lat.length * 0.99)], perSecond: runs / seconds }
}

const goServer = await start(gatewayBinary, ['serve', '--executor-server', '--listen', '127.0.0.1:0', '--max-workers', '2'])
const jsServer = await start('node', ['js-executor-server.mjs'])

// Two gateways: one on its own local backend, one on goServer as a remote
// group. Both with one tenant and a fresh key.
const key = 'cmk_bench_' + randomBytes(16).toString('hex')
const hash = 'sha256:' + createHash('sha256').update(key).digest('hex')
const dir = mkdtempSync(join(tmpdir(), 'bench-'))
const config = (backend) => `listen: 127.0.0.1:0
log: {level: warn}
limits: {maxConcurrent: 1024, maxConnections: 1024}
backends:
${backend}
tenants:
  - name: bench
    backend: b
    keys: [{name: k, hash: ${hash}}]
routes:
  - {path: /v1/executor, kind: executor}
`
writeFileSync(join(dir, 'local.yaml'), config('  - {name: b, type: local, local: {queue: 512}}'))
writeFileSync(join(dir, 'remote.yaml'), config(`  - {name: b, type: remote, remote: {members: [{url: "${goServer.url}"}]}}`))
const gwLocal = await start(gatewayBinary, ['serve', '--config', join(dir, 'local.yaml')])
const gwRemote = await start(gatewayBinary, ['serve', '--config', join(dir, 'remote.yaml')])
const gwURL = (g) => g.url + '/v1/executor'
const headers = { Authorization: `Bearer ${key}` }

try {
  const go = await RemoteExecutor.connect(goServer.url)
  const js = await RemoteExecutor.connect(jsServer.url)
  const viaLocal = await RemoteExecutor.connect(gwURL(gwLocal), { headers })
  const viaRemote = await RemoteExecutor.connect(gwURL(gwRemote), { headers })
  console.log(`runs per measurement: ${runs}; node ${process.version}`)
  console.log('| program | path | p50 µs | p99 µs | executions/s (16 in flight) |')
  console.log('|---|---|---|---|---|')
  for (const [name, program] of Object.entries(programs)) {
    const g = await measure(go, program)
    const j = await measure(js, program)
    const l = await measure(viaLocal, program)
    const r = await measure(viaRemote, program)
    const row = (who, m) => console.log(`| ${name} | ${who} | ${m.p50.toFixed(0)} | ${m.p99.toFixed(0)} | ${m.perSecond.toFixed(0)} |`)
    row('JS client → Go executor server', g)
    row('JS client → JS executor server (node:vm)', j)
    row('JS client → gateway → local backend', l)
    row('JS client → gateway → Go executor server', r)
    console.log(`| ${name} | ratio Go server / JS server | ${(g.p50 / j.p50).toFixed(2)} | ${(g.p99 / j.p99).toFixed(2)} | ${(g.perSecond / j.perSecond).toFixed(2)} |`)
    console.log(`| ${name} | ratio gateway hop (gateway → server / server) | ${(r.p50 / g.p50).toFixed(2)} | ${(r.p99 / g.p99).toFixed(2)} | ${(r.perSecond / g.perSecond).toFixed(2)} |`)
  }

  // Many connections at once through the gateway: every execution must come
  // back with its own answer; nothing lost.
  const conns = Number(process.env.BENCH_CONNECTIONS ?? 200)
  const each = Number(process.env.BENCH_PER_CONNECTION ?? 50)
  const clients = await Promise.all(Array.from({ length: conns }, () => RemoteExecutor.connect(gwURL(gwLocal), { headers })))
  const lat = []
  let wrong = 0
  const t0 = process.hrtime.bigint()
  await Promise.all(clients.map(async (c, ci) => {
    for (let i = 0; i < each; i++) {
      const t = process.hrtime.bigint()
      const r = await c.execute({ code: `async () => ${ci * each + i}` })
      lat.push(Number(process.hrtime.bigint() - t) / 1e3)
      if (r.result !== ci * each + i) wrong++
    }
  }))
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9
  lat.sort((a, b) => a - b)
  console.log(`\n${conns} connections × ${each} executions through the gateway (local backend, 2 workers): ` +
    `${lat.length} answered, ${wrong} wrong, p50 ${lat[Math.floor(lat.length / 2)].toFixed(0)} µs, ` +
    `p99 ${lat[Math.floor(lat.length * 0.99)].toFixed(0)} µs, ${(lat.length / seconds).toFixed(0)} executions/s`)
  if (wrong > 0 || lat.length !== conns * each) process.exitCode = 1
  await Promise.all([...clients, go, js, viaLocal, viaRemote].map((c) => c.dispose()))
} finally {
  for (const s of [goServer, jsServer, gwLocal, gwRemote]) s.child.kill('SIGKILL')
}
process.exit(process.exitCode ?? 0)
