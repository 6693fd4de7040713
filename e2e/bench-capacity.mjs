// Capacity benchmark: what an execution waiting on its tools costs, and
// whether one tenant's load delays another's. The same JavaScript client
// (lib/executor-client.mjs), side by side in one run, against
//   - the gateway on its local backend (the binary given, default pool),
//   - js-executor-server.mjs (capnweb + node:vm, not a sandbox), and
//   - peers/ivm-executor-server.mjs (capnweb + a fresh isolated-vm isolate
//     per run; `make peers-deps` installs it).
//
//   node bench-capacity.mjs ../bin/gateway
//
// Steps, one after the other, each starting and stopping its servers:
//   a. tool-wait load: 64 callers on 8 connections loop over a program
//      making 3 sequential tool calls the caller answers after 50 ms;
//   b. 1,000 executions parked at once on a tool call, and the RSS of the
//      server's process tree before and while they are parked;
//   c. fairness on the gateway: tenant A's `async () => 1`, one at a time,
//      alone and while tenant B floods in four ways;
//   d. what a 128 MB memory limit holds: for five shapes of data, the most
//      values one run keeps before it gets the memory text, on the gateway
//      and on isolated-vm (node:vm has no limit);
//   e. a tenant's own load: with 8, then 32 of its programs spinning, how
//      long its trivial run on a new connection takes, and how long a
//      sibling parked on a tool call takes from the answer to its result,
//      on the gateway and on isolated-vm;
//   f. the run clock of tenant A's fixed amount of work, alone and while
//      tenant B floods the gateway with CPU-bound runs.
//
// Environment (all optional):
//   BENCH_DURATION_MS  each caller's loop in step a (5000)
//   BENCH_PARKED       executions parked in step b (1000)
//   BENCH_PARK_MS      step b's bound on parking them all (60000); it also
//                      stops once BENCH_STALL_MS (10000) pass with no new
//                      tool call after the first
//   BENCH_FAIR_MS      tenant A's window per fairness scenario (3000)
//   BENCH_STEPS        which steps to run, e.g. "a,b" (a,b,c,d,e,f)
//   BENCH_LOCAL        a YAML/JSON flow mapping merged into every gateway
//                      config's `local:` (its keys win), e.g.
//                      BENCH_LOCAL='{poolSize: 8}', so a redesigned local
//                      backend can be measured with its own keys; a key
//                      set to null is left out ('{queue: null}')
//   BENCH_JSON         a file to write every figure to, as JSON
//
// Exit status 1 when a run is invalid: any wrong answer, a fault in steps a
// or b, an execution of step b that never completed, a peer that could not
// park them all, a step-d program that answered anything but its count or
// the memory text, or a server that failed. Goals the gateway misses are
// reported, not failed: this script measures the gateway before and after
// its redesign alike.
import { spawn, execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHash, randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { RemoteExecutor } from './lib/executor-client.mjs'

const gatewayBinary = process.argv[2] ?? '../bin/gateway'
const num = (name, fallback) => {
  const v = Number(process.env[name] ?? fallback)
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} must be a positive number`)
  return v
}
const DURATION_MS = num('BENCH_DURATION_MS', 5000)
const PARKED = num('BENCH_PARKED', 1000)
const PARK_MS = num('BENCH_PARK_MS', 60000)
const STALL_MS = num('BENCH_STALL_MS', 10000)
const FAIR_MS = num('BENCH_FAIR_MS', 3000)
const STEPS = new Set((process.env.BENCH_STEPS ?? 'a,b,c,d,e,f').split(',').map((s) => s.trim()))

const results = { when: new Date().toISOString(), node: process.version, steps: {} }
const invalid = [] // reasons the run's figures cannot be trusted

// ---- processes ---------------------------------------------------------------

const children = new Set()

// start runs a server in a process group of its own (so its workers die with
// it) and resolves once it prints where it listens.
function start(cmd, args, what) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'], detached: true })
  children.add(child)
  child.on('exit', () => children.delete(child))
  return new Promise((resolve, reject) => {
    let buf = ''
    const timer = setTimeout(() => reject(new Error(`${what} did not say where it listens within 30 s`)), 30000)
    child.stdout.on('data', (d) => {
      buf += d
      const m = buf.match(/(?:gateway |^)listening on ((?:ws|http):\/\/[^\s"]+)/m)
      if (m) {
        clearTimeout(timer)
        buf = ''
        resolve({ url: m[1].replace(/^http/, 'ws').replace(/\/$/, ''), pid: child.pid, stop: () => stop(child), exited: () => hasExited(child) })
      }
    })
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      reject(new Error(`${what} exited (${code ?? signal}) before it listened`))
    })
    child.on('error', (err) => {
      clearTimeout(timer)
      reject(new Error(`${what} did not start: ${err.message}`))
    })
  })
}

const hasExited = (child) => child.exitCode !== null || child.signalCode !== null

function stop(child) {
  if (hasExited(child)) return Promise.resolve()
  const exited = new Promise((resolve) => child.once('exit', resolve))
  try {
    process.kill(-child.pid, 'SIGKILL')
  } catch {}
  return Promise.race([exited, sleep(5000)])
}

function killAll() {
  for (const child of children) {
    try {
      process.kill(-child.pid, 'SIGKILL')
    } catch {}
  }
}
process.on('exit', killAll)
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    killAll()
    process.exit(130)
  })
}

// ---- the servers -------------------------------------------------------------

const dir = mkdtempSync(join(tmpdir(), 'bench-capacity-'))
process.on('exit', () => rmSync(dir, { recursive: true, force: true }))

function newKey() {
  const key = 'cmk_bench_' + randomBytes(16).toString('hex')
  return { key, hash: 'sha256:' + createHash('sha256').update(key).digest('hex') }
}

// flowEntries splits a YAML or JSON flow mapping ("{a: 1, b: {c: 2}}") into
// its top-level entries, so BENCH_LOCAL's keys can replace ours by name.
function flowEntries(text) {
  const t = text.trim()
  if (t === '') return []
  if (!t.startsWith('{') || !t.endsWith('}')) throw new Error(`BENCH_LOCAL must be a flow mapping such as '{poolSize: 8}', got ${t}`)
  const body = t.slice(1, -1)
  const entries = []
  let depth = 0
  let quote = null
  let from = 0
  for (let i = 0; i < body.length; i++) {
    const c = body[i]
    if (quote) {
      if (c === quote && body[i - 1] !== '\\') quote = null
    } else if (c === '"' || c === "'") quote = c
    else if (c === '{' || c === '[') depth++
    else if (c === '}' || c === ']') depth--
    else if (c === ',' && depth === 0) {
      entries.push(body.slice(from, i))
      from = i + 1
    }
  }
  entries.push(body.slice(from))
  return entries.map((e) => e.trim()).filter(Boolean).map((e) => ({ key: e.slice(0, e.indexOf(':')).trim().replace(/^["']|["']$/g, ''), text: e }))
}

const benchLocal = flowEntries(process.env.BENCH_LOCAL ?? '')

// localBackend is the one backend every gateway config has: ours merged
// with BENCH_LOCAL, whose keys win; a key BENCH_LOCAL sets to null is left
// out, for a build that no longer knows it.
function localBackend(ours = {}) {
  const theirs = new Set(benchLocal.map((e) => e.key))
  const dropped = (e) => /:\s*(null|~)\s*$/.test(e.text)
  const parts = [...Object.entries(ours).filter(([k]) => !theirs.has(k)).map(([k, v]) => `${k}: ${v}`), ...benchLocal.filter((e) => !dropped(e)).map((e) => e.text)]
  return parts.length === 0 ? '{name: local, type: local}' : `{name: local, type: local, local: {${parts.join(', ')}}}`
}

function gatewayConfig({ tenants, local }) {
  return `listen: 127.0.0.1:0
log: {level: error}
limits: {maxConcurrent: 1024, maxConnections: 1024}
backends:
  - ${localBackend(local)}
tenants:
${tenants.map((t) => `  - name: ${t.name}
    backend: local
    keys: [{name: k, hash: ${t.hash}}]
    policy: ${t.policy}`).join('\n')}
routes:
  - {path: /v1/executor, kind: executor}
`
}

let configs = 0
async function startGateway(config) {
  const file = join(dir, `gateway-${++configs}.yaml`)
  writeFileSync(file, config)
  const s = await start(gatewayBinary, ['serve', '--config', file], 'the gateway')
  return { ...s, url: s.url + '/v1/executor' }
}

// One tenant with the operator's caps: the capacity steps measure the
// backend, not the tenant policy.
async function gatewayOneTenant(local) {
  const { key, hash } = newKey()
  const s = await startGateway(gatewayConfig({ tenants: [{ name: 'bench', hash, policy: '{maxConcurrent: 1024, rate: 0}' }], local }))
  return { ...s, headers: { Authorization: `Bearer ${key}` } }
}

function requirePeers() {
  if (!existsSync('peers/node_modules/isolated-vm/package.json')) {
    throw new Error('e2e/peers/node_modules is missing: run `make peers-deps` (the isolated-vm peer)')
  }
}

const servers = [
  { name: 'gateway, local backend', gateway: true, start: (local) => gatewayOneTenant(local) },
  { name: 'capnweb + node:vm', start: () => start('node', ['js-executor-server.mjs'], 'the node:vm server') },
  { name: 'capnweb + isolated-vm', start: () => start('node', ['--no-node-snapshot', 'peers/ivm-executor-server.mjs'], 'the isolated-vm server') },
]

// warmUp runs 64 trivial executions at once over clients, so that a pool
// sized for the load has started its workers before anything is measured.
const warmUp = (clients) => Promise.all(Array.from({ length: 64 }, (_, i) => clients[i % clients.length].execute({ code: 'async () => 1' })))

const connectMany = (server, n) => Promise.all(Array.from({ length: n }, () => RemoteExecutor.connect(server.url, { headers: server.headers })))
const disposeAll = (clients) => Promise.all(clients.map((c) => c.dispose().catch(() => {})))

// ---- /proc: memory and CPU of a process tree ---------------------------------------

// treeOf returns pid and every descendant of it, from /proc/*/stat.
function treeOf(pid) {
  const kids = new Map()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    let stat
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
    } catch {
      continue // it exited meanwhile
    }
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
    if (!kids.has(ppid)) kids.set(ppid, [])
    kids.get(ppid).push(Number(entry))
  }
  const tree = []
  for (const queue = [pid]; queue.length > 0;) {
    const p = queue.shift()
    tree.push(p)
    queue.push(...(kids.get(p) ?? []))
  }
  return tree
}

// rssMB sums VmRSS over the tree.
function rssMB(pid) {
  let kb = 0
  for (const p of treeOf(pid)) {
    try {
      kb += Number(readFileSync(`/proc/${p}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/)?.[1] ?? 0)
    } catch {}
  }
  return kb / 1024
}

// cpuSeconds sums user + system time over the tree, reaped children included.
function cpuSeconds(pid) {
  let ticks = 0
  for (const p of treeOf(pid)) {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8')
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ') // f[0] is field 3, state
      ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]) // utime stime cutime cstime
    } catch {}
  }
  return ticks / 100 // USER_HZ is 100 on Linux
}

// ---- figures -------------------------------------------------------------------

const pct = (sorted, q) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))])
const ms = (v) => (Number.isNaN(v) ? '–' : v >= 100 ? v.toFixed(0) : v.toFixed(1))
const fix = (v, d = 2) => (Number.isFinite(v) ? v.toFixed(d) : '–')
const now = () => performance.now()

// within resolves to what p resolves to, or to `late` once ms pass.
function within(p, msLeft, late) {
  let timer
  return Promise.race([p, new Promise((resolve) => { timer = setTimeout(() => resolve(late), Math.max(0, msLeft)) })]).finally(() => clearTimeout(timer))
}

function table(head, rows) {
  console.log(`| ${head.join(' | ')} |`)
  console.log(`|${head.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`)
  for (const r of rows) console.log(`| ${r.join(' | ')} |`)
  console.log()
}

// ---- a. tool-wait load -----------------------------------------------------------------

const TOOL_WAIT = {
  code: 'async () => { let s = 0; for (let i = 0; i < 3; i++) s += await t.wait(i); return s }',
  providers: [{ name: 't', tools: ['wait'] }],
}

// toolWaitLoad: 64 callers over 8 connections, each looping for DURATION_MS;
// every dispatch is answered after 50 ms with its argument plus the caller's
// own offset, so a crossed answer shows as a wrong sum. Runs still in
// flight when the loop ends are waited for (up to 60 s more).
async function toolWaitLoad(server) {
  const clients = await connectMany(server, 8)
  const callers = 64
  const lat = []
  const f = { thrown: 0, errors: 0, wrong: 0, unfinished: 0, codes: {} }
  const execOnce = async (client, k) => {
    const offset = k + 1
    const r = await client.execute({
      ...TOOL_WAIT,
      timeout: 30000,
      dispatch: (_p, _t, a) => new Promise((resolve) => setTimeout(() => resolve(JSON.stringify({ result: JSON.parse(a) + offset })), 50)),
    })
    if (r.error !== undefined) f.errors++
    else if (r.result !== 3 + 3 * offset) f.wrong++
  }
  await warmUp(clients)

  const cpu0 = cpuSeconds(server.pid)
  const client0 = process.cpuUsage()
  const t0 = now()
  const loopEnd = t0 + DURATION_MS
  const hardEnd = loopEnd + 60000
  let last = t0
  const caller = async (k) => {
    const client = clients[k % clients.length]
    while (now() < loopEnd) {
      const t = now()
      const done = await within(execOnce(client, k).then(() => true, (err) => {
        f.thrown++
        f.codes[err?.code ?? 'other'] = (f.codes[err?.code ?? 'other'] ?? 0) + 1
        return true
      }), hardEnd - t, false)
      if (!done) {
        f.unfinished++
        return
      }
      last = now()
      lat.push(last - t)
    }
  }
  await Promise.all(Array.from({ length: callers }, (_, k) => caller(k)))
  const cpu = cpuSeconds(server.pid) - cpu0
  const client = process.cpuUsage(client0)
  const wall = (now() - t0) / 1000
  await disposeAll(clients)
  lat.sort((x, y) => x - y)
  const seconds = (last - t0) / 1000
  return {
    runs: lat.length, perSecond: lat.length / seconds, p50: pct(lat, 0.5), p99: pct(lat, 0.99), cpuMsPerRun: (cpu * 1000) / lat.length,
    clientCpu: (client.user + client.system) / 1e6 / wall, loadavg: loadavg()[0], ...f,
  }
}

async function stepToolWait() {
  console.log(`## a. Tool-wait load\n\n64 callers on 8 connections, each looping for ${DURATION_MS / 1000} s over \`${TOOL_WAIT.code}\`; ` +
    'each tool call answered after 50 ms (ideal: ~150 ms per run, ~430 executions/s). Runs still in flight at the end are waited for; ' +
    'executions/s counts every run over the time to the last answer. Server CPU is the whole process tree (gateway and workers).\n')
  const rows = []
  for (const s of servers) {
    const server = await s.start({})
    try {
      rows.push({ name: s.name, gateway: !!s.gateway, ...(await toolWaitLoad(server)) })
    } finally {
      await server.stop()
    }
  }
  const faults = (r) => r.thrown + r.errors + r.wrong + r.unfinished
  table(['server', 'runs', 'executions/s', 'p50 ms', 'p99 ms', 'server CPU ms/run', 'client CPU', 'load avg', 'faults (thrown / error / wrong / unfinished)'],
    rows.map((r) => [r.name, r.runs, r.perSecond.toFixed(0), ms(r.p50), ms(r.p99), fix(r.cpuMsPerRun), `${(r.clientCpu * 100).toFixed(0)}%`, fix(r.loadavg, 1),
      `${faults(r)} (${r.thrown} / ${r.errors} / ${r.wrong} / ${r.unfinished})`]))
  const gw = rows.find((r) => r.gateway)
  const peers = rows.filter((r) => !r.gateway)
  const fastest = peers.reduce((a, b) => (b.perSecond > a.perSecond ? b : a))
  const quickest = peers.reduce((a, b) => (b.p50 < a.p50 ? b : a))
  const ratioRate = gw.perSecond / fastest.perSecond
  const ratioP50 = gw.p50 / quickest.p50
  table(['ratio', 'value', 'goal', 'met'], [
    [`gateway ÷ best peer, executions/s (${fastest.name})`, fix(ratioRate), '≥ 1', ratioRate >= 1 && faults(gw) === 0 ? 'yes' : 'no'],
    [`gateway ÷ best peer, p50 (${quickest.name})`, fix(ratioP50), '≤ 1.2', ratioP50 <= 1.2 && faults(gw) === 0 ? 'yes' : 'no'],
  ])
  for (const r of rows) {
    if (faults(r) > 0) invalid.push(`a: ${r.name}: ${r.thrown} thrown ${JSON.stringify(r.codes)}, ${r.errors} errors, ${r.wrong} wrong, ${r.unfinished} unfinished`)
  }
  results.steps.toolWait = { rows, ratioRate, ratioP50 }
}

// ---- b. executions parked at once --------------------------------------------------------

const PARK_LOCAL = { queue: 2048 }
const PARK = { code: 'async () => (await t.park()) + 1', providers: [{ name: 't', tools: ['park'] }] }

// parkedLoad starts PARKED executions over 10 connections, each awaiting
// one tool call that is answered only once all have called (or the step's
// bound passes, or no new call came for STALL_MS); it samples the RSS of
// the server's process tree before and while they wait, then answers and
// checks every answer.
async function parkedLoad(server) {
  const clients = await connectMany(server, 10)
  await warmUp(clients)
  await sleep(500)
  const before = rssMB(server.pid)

  let parked = 0
  let lastPark
  let release
  const released = new Promise((resolve) => { release = resolve })
  const f = { thrown: 0, errors: 0, wrong: 0, codes: {} }
  const t0 = now()
  const runs = Array.from({ length: PARKED }, (_, i) => clients[i % clients.length].execute({
    ...PARK,
    timeout: 300000,
    dispatch: async () => {
      parked++
      lastPark = now()
      await released
      return JSON.stringify({ result: i })
    },
  }).then((r) => {
    if (r.error !== undefined) f.errors++
    else if (r.result !== i + 1) f.wrong++
    else return true
  }, (err) => {
    f.thrown++
    f.codes[err?.code ?? 'other'] = (f.codes[err?.code ?? 'other'] ?? 0) + 1
  }))

  let ended = 'all parked'
  while (parked < PARKED) {
    if (now() - t0 > PARK_MS) { ended = `step bound ${PARK_MS / 1000} s`; break }
    // A server may set all the runs up before the first reaches its tool
    // call, so the stall bound starts with the first call.
    if (parked > 0 && now() - lastPark > STALL_MS) { ended = `none new for ${STALL_MS / 1000} s`; break }
    if (f.thrown + f.errors > 0 && parked + f.thrown + f.errors >= PARKED) { ended = 'the rest failed'; break }
    await sleep(20)
  }
  const parkSeconds = (now() - t0) / 1000
  const atOnce = parked
  await sleep(300) // let the server settle into the parked state
  const during = rssMB(server.pid)

  release()
  const done = await within(Promise.all(runs), 120000, null)
  const completed = done === null ? '?' : done.filter(Boolean).length
  await disposeAll(clients)
  return { atOnce, ended, parkSeconds, before, during, growth: during - before, perRun: (during - before) / Math.max(1, atOnce), completed, ...f }
}

async function stepParked() {
  console.log(`## b. ${PARKED} executions parked at once\n\nEach runs \`${PARK.code}\` and awaits its tool call, which is answered only once all ${PARKED} have called ` +
    `(or after ${PARK_MS / 1000} s, or ${STALL_MS / 1000} s without a new call once the first came). RSS is the server process and all its descendants ` +
    `(/proc VmRSS), before the load (connections open, warmed up) and while parked. The gateway's backend: \`${localBackend(PARK_LOCAL)}\` (a queue so that no run is refused).\n`)
  const rows = []
  for (const s of servers) {
    const server = await s.start(PARK_LOCAL)
    try {
      rows.push({ name: s.name, gateway: !!s.gateway, ...(await parkedLoad(server)) })
    } finally {
      await server.stop()
    }
  }
  table(['server', 'parked at once', 'time to park s', 'RSS before MB', 'RSS parked MB', 'growth MB', 'MB per parked run', 'completed', 'faults (thrown / error / wrong)'],
    rows.map((r) => [r.name, `${r.atOnce} of ${PARKED}${r.atOnce < PARKED ? ` (${r.ended})` : ''}`, fix(r.parkSeconds, 1), r.before.toFixed(0), r.during.toFixed(0),
      r.growth.toFixed(0), r.atOnce === PARKED ? fix(r.perRun, 3) : '–', `${r.completed} of ${PARKED}`, `${r.thrown} / ${r.errors} / ${r.wrong}`]))
  const gw = rows.find((r) => r.gateway)
  const met = gw.atOnce === PARKED && gw.completed === PARKED && gw.growth <= 1024
  console.log(`Goal: every one parks and completes, the gateway's growth ≤ 1 GB: ${met ? 'met' : 'not met'} ` +
    `(${gw.atOnce} parked, ${gw.completed} completed, +${gw.growth.toFixed(0)} MB).\n`)
  for (const r of rows) {
    // The peers are the yardstick: one that cannot park them all leaves
    // nothing to compare with.
    if (!r.gateway && r.atOnce !== PARKED) invalid.push(`b: ${r.name} parked only ${r.atOnce} of ${PARKED} (${r.ended})`)
    if (r.completed !== PARKED || r.thrown + r.errors + r.wrong > 0) invalid.push(`b: ${r.name} completed ${r.completed} of ${PARKED}, faults ${r.thrown}/${r.errors}/${r.wrong} ${JSON.stringify(r.codes)}`)
  }
  results.steps.parked = { rows, met }
}

// ---- c. fairness ----------------------------------------------------------------------------

const BUSY_1S = 'async () => { const end = Date.now() + 1000; while (Date.now() < end) {} return 1 }'
const BUSY_20MS = 'async () => { const end = Date.now() + 20; while (Date.now() < end) {} return 1 }'
const HANDLER = 'async () => ({ fetch: () => new Response("x") })'
const B_CAP = 64
const B_HANDLES = 8

// A flood is tenant B's load: start(clients, counts) begins it and resolves
// once B is at its cap (or has tried for 3 s); it must stop when `stopped`
// is set, or when its connections are disposed.
const floods = {
  'CPU-bound runs of 1 s, B at its concurrency cap': {
    describe: `${B_CAP} callers loop over \`${BUSY_1S}\``,
    start(clients, c, state) {
      for (let k = 0; k < B_CAP; k++) {
        loop(state, async () => {
          const r = await clients[k % clients.length].execute({ code: BUSY_1S, timeout: 5000 })
          r.error === undefined ? c.ok++ : c.errors++
        }, c)
      }
      return sleep(500)
    },
  },
  'runs parked on tool calls B never answers, B at its cap': {
    describe: `${B_CAP} runs of \`async () => await t.never()\`, timeout 60 s, whose dispatch never answers`,
    start(clients, c, state) {
      for (let k = 0; k < B_CAP; k++) {
        clients[k % clients.length].execute({
          code: 'async () => await t.never()', providers: [{ name: 't', tools: ['never'] }], timeout: 60000,
          dispatch: () => { c.parked++; return new Promise(() => {}) },
        }).then(() => c.ok++, (err) => countFault(c, err, state))
      }
      return waitFor(() => c.parked >= B_CAP, 3000)
    },
  },
  'B holds its max retained executions and keeps invoking them': {
    describe: `${B_HANDLES} runs of \`${HANDLER}\` with retainHandles, each handle invoked again 50 ms after its last answer ` +
      '(a handle that closes is replaced by a new run)',
    start(clients, c, state) {
      for (let k = 0; k < B_HANDLES; k++) {
        const client = clients[k % clients.length]
        loop(state, async () => {
          const r = await client.execute({ code: HANDLER, retainHandles: true, timeout: 5000 })
          if (r.executionId === undefined) {
            c.errors++
            return sleep(50)
          }
          c.granted++
          while (!state.stopped) {
            const res = await client.invokeHandle(r.executionId, 'fetch', { url: 'http://bench.invalid/' })
            res.status === 200 ? c.invocations++ : c.errors++
            await sleep(50)
          }
        }, c, 50)
      }
      return waitFor(() => c.granted >= B_HANDLES, 3000)
    },
  },
  'B keeps the queue full': {
    describe: `${4 * B_CAP} callers loop over \`${BUSY_20MS}\`; a refused call retries after 25 ms`,
    start(clients, c, state) {
      for (let k = 0; k < 4 * B_CAP; k++) {
        loop(state, async () => {
          const r = await clients[k % clients.length].execute({ code: BUSY_20MS, timeout: 5000 })
          r.error === undefined ? c.ok++ : c.errors++
        }, c, 25)
      }
      return sleep(500)
    },
  },
}

function countFault(c, err, state) {
  if (state.stopped) return // what disposing the connections does to B's calls
  const code = err?.code ?? 'other'
  c.faults[code] = (c.faults[code] ?? 0) + 1
}

// loop runs body until the scenario stops; a fault is counted and, with
// backoffMs, retried after that pause.
async function loop(state, body, c, backoffMs = 0) {
  while (!state.stopped) {
    try {
      await body()
    } catch (err) {
      countFault(c, err, state)
      if (state.stopped) return
      if (backoffMs > 0) await sleep(backoffMs)
      else if (err?.code !== 'QUEUE_OVERFLOW') return
      else await sleep(5)
    }
  }
}

async function waitFor(cond, msMax) {
  const end = now() + msMax
  while (!cond() && now() < end) await sleep(20)
}

// tenantA runs `async () => 1` one at a time for FAIR_MS. A run still out
// at the end is given 5 s more, then counted as unfinished with the time it
// had waited (a lower bound, shown with ≥).
async function tenantA(client) {
  const lat = []
  let unfinished = 0
  let wrong = 0
  let thrown = 0
  const end = now() + FAIR_MS
  while (now() < end) {
    const t = now()
    const r = await within(client.execute({ code: 'async () => 1', timeout: 5000 }).catch(() => 'thrown'), end + 5000 - t, 'late')
    lat.push(now() - t)
    if (r === 'late') { unfinished++; break }
    if (r === 'thrown') thrown++
    else if (r.result !== 1) wrong++
  }
  lat.sort((x, y) => x - y)
  return { runs: lat.length - unfinished, unfinished, wrong, thrown, p50: pct(lat, 0.5), p99: pct(lat, 0.99), max: lat[lat.length - 1] }
}

// fairnessScenario: a fresh gateway with tenants a and b; B's flood, then
// A's window, then B's connections disposed. The whole scenario has a
// deadline; past it the gateway is killed and the scenario reported as cut.
async function fairnessScenario(name, flood) {
  const ka = newKey()
  const kb = newKey()
  const policy = `{maxConcurrent: ${B_CAP}, maxHandles: ${B_HANDLES}, rate: 0}`
  const gw = await startGateway(gatewayConfig({ tenants: [{ name: 'a', hash: ka.hash, policy }, { name: 'b', hash: kb.hash, policy }], local: {} }))
  const state = { stopped: false }
  const c = { ok: 0, errors: 0, parked: 0, granted: 0, invocations: 0, faults: {} }
  let bClients = []
  let aClient
  let b = null
  const run = async () => {
    aClient = await RemoteExecutor.connect(gw.url, { headers: { Authorization: `Bearer ${ka.key}` } })
    for (let i = 0; i < 5; i++) await aClient.execute({ code: 'async () => 1' }) // warm up
    // Tenant B is another application: its flood runs in a process of its
    // own, so that its callbacks never delay A's in one event loop.
    if (flood) b = await startFlood(name, gw.url, kb.key)
    return tenantA(aClient)
  }
  const deadline = FAIR_MS + 20000
  const a = await within(run().catch((err) => ({ failed: String(err?.message ?? err) })), deadline, null)
  state.stopped = true
  if (b) Object.assign(c, await b.stop())
  await disposeAll([...bClients, ...(aClient ? [aClient] : [])])
  await gw.stop()
  if (a?.failed) invalid.push(`c: the scenario "${name}" failed: ${a.failed}`)
  return { name, a: a ?? { cut: true }, b: c, cut: a === null || !!a.failed }
}

async function stepFairness() {
  console.log(`## c. Fairness: two tenants on one default local backend\n\nTenants a and b on the gateway, each \`{maxConcurrent: ${B_CAP}, maxHandles: ${B_HANDLES}, rate: 0}\`, ` +
    `one backend ${localBackend({})}. Tenant A runs \`async () => 1\` one at a time for ${FAIR_MS / 1000} s while B floods; each scenario on a fresh gateway. ` +
    'A run of A still out when its window ends is given 5 s more and then counted as unfinished at the time it had waited (≥).\n')
  for (const [name, flood] of Object.entries(floods)) console.log(`- ${name}: ${flood.describe}`)
  console.log()
  const rows = [await fairnessScenario('no load (baseline)', null)]
  for (const [name, flood] of Object.entries(floods)) rows.push(await fairnessScenario(name, flood))
  const lower = (r, v) => (r.a.unfinished > 0 && v >= r.a.max ? '≥ ' : '') + ms(v)
  table(['what B does', 'A runs', 'A unfinished', 'A p50 ms', 'A p99 ms', 'A max ms', 'A p99 < 50 ms', 'B: ok / errors / parked / handles granted / invocations', 'B faults'],
    rows.map((r) => r.cut ? [r.name, '–', '–', '–', '–', '–', 'no (scenario cut at its deadline)', '', ''] : [
      r.name, r.a.runs, r.a.unfinished, lower(r, r.a.p50), lower(r, r.a.p99), lower(r, r.a.max), r.a.p99 < 50 && r.a.unfinished === 0 ? 'yes' : 'no',
      `${r.b.ok} / ${r.b.errors} / ${r.b.parked} / ${r.b.granted} / ${r.b.invocations}`,
      Object.entries(r.b.faults).map(([k, v]) => `${k} ${v}`).join(', ') || '0',
    ]))
  for (const r of rows) {
    if (!r.cut && (r.a.wrong > 0 || r.a.thrown > 0)) invalid.push(`c: tenant A had ${r.a.wrong} wrong answers and ${r.a.thrown} faults under "${r.name}"`)
  }
  results.steps.fairness = rows
}

// startFlood runs tenant B's flood in a child process (this script with
// --flood) and resolves once B is at its load; stop() ends the flood and
// resolves with B's counts.
function startFlood(name, url, key) {
  const child = spawn(process.execPath, [new URL(import.meta.url).pathname, '--flood', name, url, key],
    { stdio: ['pipe', 'pipe', 'inherit'], detached: true })
  children.add(child)
  child.on('exit', () => children.delete(child))
  let buf = ''
  const lines = []
  let wake = () => {}
  child.stdout.on('data', (d) => {
    buf += d
    let i
    while ((i = buf.indexOf('\n')) >= 0) {
      lines.push(buf.slice(0, i))
      buf = buf.slice(i + 1)
      wake()
    }
  })
  const nextLine = (msMax) => new Promise((resolve) => {
    if (lines.length > 0) return resolve(lines.shift())
    const timer = setTimeout(() => resolve(null), msMax)
    wake = () => { clearTimeout(timer); wake = () => {}; resolve(lines.shift()) }
  })
  return nextLine(15000).then((line) => {
    if (line !== 'flood ready') throw new Error(`tenant B's flood did not start (${line})`)
    return {
      async stop() {
        child.stdin.end()
        const counts = await nextLine(15000)
        await stop(child)
        try {
          return JSON.parse(counts)
        } catch {
          invalid.push(`c: tenant B's flood "${name}" reported no counts`)
          return {}
        }
      },
    }
  })
}

// floodChild is the --flood mode: B's flood against url with key, until
// its stdin ends; then it prints B's counts as one JSON line.
async function floodChild(name, url, key) {
  const flood = floods[name]
  if (!flood) throw new Error(`no flood named ${name}`)
  const state = { stopped: false }
  const c = { ok: 0, errors: 0, parked: 0, granted: 0, invocations: 0, faults: {} }
  const clients = await Promise.all(Array.from({ length: 8 }, () => RemoteExecutor.connect(url, { headers: { Authorization: `Bearer ${key}` } })))
  await flood.start(clients, c, state)
  process.stdout.write('flood ready\n')
  await new Promise((resolve) => {
    process.stdin.on('end', resolve)
    process.stdin.resume()
  })
  state.stopped = true
  await disposeAll(clients)
  process.stdout.write(JSON.stringify(c) + '\n')
  process.exit(0)
}

// ---- d. what a memory limit holds -------------------------------------------------------------

// Each program keeps n values of one shape live and returns how many it
// kept; the last one parses records from JSON text it built, as a program
// does with a tool's answer.
const HOLD_MB = 128
const HOLD = [
  ['small object `{i, s}`', (n) => `async () => { const k = []; for (let i = 0; i < ${n}; i++) k.push({ i, s: 'abc' }); return k.length }`],
  ['number in an array', (n) => `async () => { const k = []; for (let i = 0; i < ${n}; i++) k.push(i * 1.5); return k.length }`],
  ["short string (`'item-' + i`)", (n) => `async () => { const k = []; for (let i = 0; i < ${n}; i++) k.push('item-' + i); return k.length }`],
  ['Map entry, number to number', (n) => `async () => { const m = new Map(); for (let i = 0; i < ${n}; i++) m.set(i, i); return m.size }`],
  ['record parsed from JSON', (n) => `async () => { const text = JSON.stringify(Array.from({ length: ${n} }, (_, i) => ({ id: i, name: 'n' + i, ok: true }))); return JSON.parse(text).length }`],
]
const holdMemoryText = `Execution ran out of memory at its ${HOLD_MB} MB limit. Work through the data in smaller pieces and keep only what you return.`

// mostHeld finds the largest n whose program returns n rather than the
// memory text: doubling from 16,384, then halving the gap until the
// failing n is within 10 % of the held one. A server whose process died
// under a program (V8 ends the whole process on some heap exhaustions
// rather than disposing the isolate) did not hold it: the death is
// counted and the server restarted. Any other answer ends the search and
// is returned as its failure.
async function mostHeld(conn, program) {
  let deaths = 0
  const held = async (n) => {
    let r
    try {
      r = await conn.client.execute({ code: program(n), timeout: 30000 })
    } catch (err) {
      // A dying process closes its connections before it exits, so it
      // is given 5 s to be gone.
      await waitFor(conn.server.exited, 5000)
      if (!conn.server.exited()) throw new Error(`thrown: ${err?.message ?? err}`)
      deaths++
      await conn.restart()
      return false
    }
    if (r.error === undefined && r.result === n) return true
    if (r.error === holdMemoryText) return false
    throw new Error(r.error ?? `returned ${JSON.stringify(r.result)} for ${n}`)
  }
  let lo = 0
  let hi = 0
  try {
    for (let n = 16384; hi === 0; n *= 2) {
      if (n > 2 ** 28) return { lo, deaths, failure: `still held ${lo}` }
      if (await held(n)) lo = n
      else hi = n
    }
    while (hi > lo * 1.1) {
      const mid = Math.round(Math.sqrt(Math.max(lo, 1) * hi))
      if (await held(mid)) lo = mid
      else hi = mid
    }
  } catch (err) {
    return { lo, deaths, failure: err.message }
  }
  return { lo, hi, deaths }
}

// connection is one client of a server that restart replaces, server and
// all, once its process died.
async function connection(s) {
  const conn = {}
  conn.restart = async () => {
    await conn.server?.stop()
    conn.server = await s.start({})
    conn.client = (await connectMany(conn.server, 1))[0]
  }
  await conn.restart()
  return conn
}

async function stepMemoryHolds() {
  console.log(`## d. What a ${HOLD_MB} MB memory limit holds\n\nFor each shape, the most values one run keeps live and returns the count of, ` +
    'before its answer is the memory text (within 10 %). The gateway runs them on goja under its default limit; the peer on V8 in an isolate ' +
    `with \`memoryLimit: ${HOLD_MB}\` (capnweb + node:vm has no limit). Bytes per value is the limit over that count, a run's other ` +
    'memory (its runtime, the array\'s growth) included. "Process deaths" counts the programs that ended the server\'s whole process ' +
    'instead of one run; the server was restarted after each.\n')
  const measured = servers.filter((s) => s.gateway || s.name.includes('isolated-vm'))
  const rows = HOLD.map(([shape]) => ({ shape, held: [] }))
  for (const s of measured) {
    const conn = await connection(s)
    try {
      for (const [i, [, program]] of HOLD.entries()) {
        const r = await mostHeld(conn, program)
        rows[i].held.push(r)
        if (r.failure) invalid.push(`d: ${s.name}: ${rows[i].shape}: ${r.failure}`)
      }
      await disposeAll([conn.client])
    } finally {
      await conn.server.stop()
    }
  }
  const count = (h) => (h.failure ? NaN : h.lo)
  table(['shape', ...measured.flatMap((s) => [`${s.name}: values held`, 'bytes per value', 'process deaths']), 'gateway ÷ isolated-vm, values held'],
    rows.map((r) => [r.shape, ...r.held.flatMap((h) => [Number.isNaN(count(h)) ? '–' : h.lo.toLocaleString('en-US'), fix((HOLD_MB * 2 ** 20) / count(h), 0), h.deaths]),
      fix(count(r.held[0]) / count(r.held[1]))]))
  results.steps.memoryHolds = { limitMB: HOLD_MB, servers: measured.map((s) => s.name), rows }
}

// ---- e. a tenant's own load ----------------------------------------------------------------

const SPINNERS = [8, 32]
const SIBLINGS_PARKED = 8
const SIBLING_SAMPLES = 12
const SPIN = { code: 'async () => { await s.started(); const end = Date.now() + 60000; while (Date.now() < end) {} return 1 }', providers: [{ name: 's', tools: ['started'] }] }
const SIBLING = { code: 'async () => (await t.wait()) + 1', providers: [{ name: 't', tools: ['wait'] }] }

// ownLoad: K programs of one tenant spin (each says when it started);
// meanwhile the same tenant's trivial run on a new connection (connect
// included) is timed, and so is the time from answering a tool call of a
// sibling parked beside the spinners to that sibling's result. The
// spinners are cut when their connection is disposed.
async function ownLoad(server, k) {
  const [spinClient, parkClient] = await connectMany(server, 2)
  await warmUp([spinClient])
  let started = 0
  const spinning = Array.from({ length: k }, () => spinClient.execute({ ...SPIN, timeout: 120000, dispatch: async () => { started++; return '{"result":1}' } }).catch(() => {}))
  const releases = []
  const parked = Array.from({ length: SIBLINGS_PARKED }, (_, i) => new Promise((resolve) => {
    parkClient.execute({ ...SIBLING, timeout: 120000, dispatch: () => new Promise((answer) => { releases[i] = answer }) })
      .then((r) => resolve({ r, at: now() }), (err) => resolve({ err, at: now() }))
  }))
  await waitFor(() => started >= k && releases.filter(Boolean).length >= SIBLINGS_PARKED, 20000)
  const f = { spinning: started, parked: releases.filter(Boolean).length, wrong: 0, thrown: 0 }
  await sleep(300) // every spinner well into its loop
  const trivial = []
  for (let i = 0; i < SIBLING_SAMPLES; i++) {
    const t = now()
    const r = await within((async () => {
      const c = await RemoteExecutor.connect(server.url, { headers: server.headers })
      try {
        return await c.execute({ code: 'async () => 1', timeout: 10000 })
      } finally {
        c.dispose().catch(() => {})
      }
    })().catch(() => 'thrown'), 15000, 'late')
    trivial.push(now() - t)
    if (r === 'thrown' || r === 'late') f.thrown++
    else if (r.result !== 1) f.wrong++
    await sleep(100)
  }
  const answers = []
  for (let i = 0; i < SIBLINGS_PARKED && releases[i]; i++) {
    const t = now()
    releases[i](JSON.stringify({ result: i }))
    const { r, at } = await within(parked[i], 15000, { late: true, at: now() })
    answers.push(at - t)
    if (!r || r.result !== i + 1) f.wrong++
    await sleep(50)
  }
  await disposeAll([spinClient, parkClient])
  await within(Promise.all(spinning), 5000, null)
  trivial.sort((x, y) => x - y)
  answers.sort((x, y) => x - y)
  return { k, trivialP50: pct(trivial, 0.5), trivialMax: trivial[trivial.length - 1], answerP50: pct(answers, 0.5), answerMax: answers[answers.length - 1], ...f }
}

async function stepOwnLoad() {
  console.log(`## e. A tenant's own load\n\nK programs of one tenant spin (\`${SPIN.code}\`); meanwhile the same tenant's \`async () => 1\` on a new connection ` +
    `(connect included, ${SIBLING_SAMPLES} one after another), and ${SIBLINGS_PARKED} of its runs parked on a tool call beside the spinners, answered one at a time: ` +
    'the time from the answer to the run\'s result. The gateway has two tenants, each `{maxConcurrent: 64, rate: 0}`, on the default local backend; the peers serve one.\n')
  const rows = []
  for (const s of servers.filter((x) => !x.name.includes('node:vm'))) {
    for (const k of SPINNERS) {
      const server = s.gateway ? await gatewayTwoTenants() : await s.start({})
      try {
        rows.push({ name: s.name, gateway: !!s.gateway, ...(await ownLoad(server, k)) })
      } finally {
        await server.stop()
      }
    }
  }
  const goal = (k) => (k <= 8 ? 100 : 250)
  table(['server', 'spinners', 'trivial p50 ms', 'trivial max ms', 'answer p50 ms', 'answer max ms', `goal (≤ 100 ms at 8, ≤ 250 at 32)`, 'faults (wrong / thrown)'],
    rows.map((r) => [r.name, `${r.spinning} of ${r.k}`, ms(r.trivialP50), ms(r.trivialMax), ms(r.answerP50), ms(r.answerMax),
      r.gateway ? (r.trivialMax <= goal(r.k) && r.answerMax <= goal(r.k) ? 'met' : 'not met') : '', `${r.wrong} / ${r.thrown}`]))
  const ratios = []
  for (const k of SPINNERS) {
    const gw = rows.find((r) => r.gateway && r.k === k)
    const ivm = rows.find((r) => !r.gateway && r.k === k)
    if (gw && ivm) ratios.push([`${k} spinners: gateway ÷ isolated-vm, trivial p50 / answer p50`, `${fix(gw.trivialP50 / ivm.trivialP50)} / ${fix(gw.answerP50 / ivm.answerP50)}`])
  }
  table(['ratio', 'value'], ratios)
  for (const r of rows) {
    if (r.spinning < r.k || r.parked < SIBLINGS_PARKED) invalid.push(`e: ${r.name}: only ${r.spinning} of ${r.k} spinners and ${r.parked} of ${SIBLINGS_PARKED} siblings started`)
    if (r.wrong + r.thrown > 0) invalid.push(`e: ${r.name} with ${r.k} spinners: ${r.wrong} wrong, ${r.thrown} thrown`)
  }
  results.steps.ownLoad = rows
}

// gatewayTwoTenants is the gateway with tenants a and b on the default
// local backend; the caller is tenant a.
async function gatewayTwoTenants() {
  const ka = newKey()
  const kb = newKey()
  const policy = '{maxConcurrent: 64, rate: 0}'
  const gw = await startGateway(gatewayConfig({ tenants: [{ name: 'a', hash: ka.hash, policy }, { name: 'b', hash: kb.hash, policy }], local: {} }))
  return { ...gw, headers: { Authorization: `Bearer ${ka.key}` } }
}

// ---- f. the run clock under another tenant's load ----------------------------------------------

const WORK = 'async () => { let x = 0; for (let i = 0; i < 3e6; i++) x += i % 7; return 1 }'
const CLOCK_RUNS = 8

// runClockUnderLoad: tenant A's program that computes a fixed amount of
// work, CLOCK_RUNS times one after another, alone and then while tenant B
// floods with CPU-bound runs at its cap; the run clock and the CPU each
// run reports (the usage extension).
async function runClockUnderLoad() {
  const ka = newKey()
  const kb = newKey()
  const policy = `{maxConcurrent: ${B_CAP}, maxHandles: ${B_HANDLES}, rate: 0}`
  const gw = await startGateway(gatewayConfig({ tenants: [{ name: 'a', hash: ka.hash, policy }, { name: 'b', hash: kb.hash, policy }], local: {} }))
  try {
    const a = await RemoteExecutor.connect(gw.url, { headers: { Authorization: `Bearer ${ka.key}` } })
    const measure = async () => {
      const rows = []
      for (let i = 0; i < CLOCK_RUNS; i++) {
        const t = now()
        const r = await a.execute({ code: WORK, timeout: 60000 })
        if (r.result !== 1 || !r.usage) throw new Error(`tenant A's run answered ${JSON.stringify(r)}`)
        rows.push({ wall: now() - t, clock: r.usage.runClockMs, cpu: r.usage.cpuMs })
      }
      const mean = (k) => rows.reduce((s, r) => s + r[k], 0) / rows.length
      return { wall: mean('wall'), clock: mean('clock'), cpu: mean('cpu') }
    }
    await measure() // warm up
    const alone = await measure()
    const b = await startFlood('CPU-bound runs of 1 s, B at its concurrency cap', gw.url, kb.key)
    let loaded
    try {
      loaded = await measure()
    } finally {
      await b.stop()
    }
    await disposeAll([a])
    return { alone, loaded }
  } finally {
    await gw.stop()
  }
}

async function stepRunClock() {
  console.log(`## f. The run clock under another tenant's load\n\nTenant A runs \`${WORK}\` ${CLOCK_RUNS} times one after another, alone and then while tenant B ` +
    `runs ${B_CAP} CPU-bound programs of 1 s at once (its cap), on the default local backend; means of what each run reports.\n`)
  const r = await runClockUnderLoad()
  table(['tenant A', 'wall ms', 'run clock ms', 'CPU ms'], [
    ['alone', ms(r.alone.wall), ms(r.alone.clock), ms(r.alone.cpu)],
    ['beside B\'s flood', ms(r.loaded.wall), ms(r.loaded.clock), ms(r.loaded.cpu)],
  ])
  const ratio = r.loaded.clock / r.alone.clock
  table(['ratio', 'value', 'goal', 'met'], [['run clock beside B ÷ alone', fix(ratio), '≤ 1.05', Math.abs(ratio - 1) <= 0.05 ? 'yes' : 'no']])
  results.steps.runClock = { ...r, ratio }
}

// ---- the run -----------------------------------------------------------------------------------

if (process.argv[2] === '--flood') {
  await floodChild(process.argv[3], process.argv[4], process.argv[5])
}

try {
  if (STEPS.has('a') || STEPS.has('b') || STEPS.has('e')) requirePeers()
  let version = '?'
  try {
    version = execFileSync(gatewayBinary, ['version'], { encoding: 'utf8' }).trim().replace(/\n/g, '; ')
  } catch {}
  results.gateway = version
  console.log(`# Capacity benchmark\n\n${results.when}; node ${process.version}; ${cpus().length} × ${cpus()[0]?.model.trim()}; gateway: ${version}; ` +
    `local backend: ${localBackend({})}${benchLocal.length ? ' (BENCH_LOCAL)' : ''}\n`)
  if (STEPS.has('a')) await stepToolWait()
  if (STEPS.has('b')) await stepParked()
  if (STEPS.has('c')) await stepFairness()
  if (STEPS.has('d')) await stepMemoryHolds()
  if (STEPS.has('e')) await stepOwnLoad()
  if (STEPS.has('f')) await stepRunClock()
} catch (err) {
  invalid.push(`the run failed: ${err?.stack ?? err}`)
} finally {
  killAll()
}
results.invalid = invalid
if (process.env.BENCH_JSON) writeFileSync(process.env.BENCH_JSON, JSON.stringify(results, null, 2))
if (invalid.length > 0) {
  console.log('INVALID RUN:')
  for (const reason of invalid) console.log(`- ${reason}`)
  process.exit(1)
}
process.exit(0)
