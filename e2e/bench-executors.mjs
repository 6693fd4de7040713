// Benchmark program: the same JavaScript client (lib/executor-client.mjs)
// against the Go executor server (`gateway serve --executor-server`, goja in
// worker processes) and against js-executor-server.mjs (capnweb + node:vm,
// what a user might write instead; not a sandbox), side by side in one run.
//
//   node bench-executors.mjs ../bin/gateway [runs]
//
// For each program it reports p50/p99 latency of one execution at a time and
// throughput with 16 executions in flight, and the ratios Go/JS.
import { spawn } from 'node:child_process'
import { RemoteExecutor } from './lib/executor-client.mjs'

const gatewayBinary = process.argv[2] ?? '../bin/gateway'
const runs = Number(process.argv[3] ?? 2000)

function start(cmd, args) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] })
  return new Promise((resolve, reject) => {
    let buf = ''
    child.stdout.on('data', (d) => {
      buf += d
      const m = buf.match(/listening on (ws:\/\/\S+)/)
      if (m) resolve({ url: m[1], child })
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

const goServer = await start(gatewayBinary, ['serve', '--executor-server', '--listen', '127.0.0.1:0', '--pool-size', '2'])
const jsServer = await start('node', ['js-executor-server.mjs'])
try {
  const go = await RemoteExecutor.connect(goServer.url)
  const js = await RemoteExecutor.connect(jsServer.url)
  console.log(`runs per measurement: ${runs}; node ${process.version}`)
  console.log('| program | server | p50 µs | p99 µs | executions/s (16 in flight) |')
  console.log('|---|---|---|---|---|')
  for (const [name, program] of Object.entries(programs)) {
    const g = await measure(go, program)
    const j = await measure(js, program)
    const row = (who, m) => console.log(`| ${name} | ${who} | ${m.p50.toFixed(0)} | ${m.p99.toFixed(0)} | ${m.perSecond.toFixed(0)} |`)
    row('Go (goja, worker processes)', g)
    row('JS (capnweb + node:vm)', j)
    console.log(`| ${name} | ratio Go/JS | ${(g.p50 / j.p50).toFixed(2)} | ${(g.p99 / j.p99).toFixed(2)} | ${(g.perSecond / j.perSecond).toFixed(2)} |`)
  }
  await go.dispose()
  await js.dispose()
} finally {
  goServer.child.kill('SIGKILL')
  jsServer.child.kill('SIGKILL')
}
process.exit(0)
