// The real capnweb JavaScript client running the interop scenarios against a server URL.
// Usage: node client.mjs ws://127.0.0.1:PORT/ [prefix,prefix,…]   (or URL=…, SCENARIOS=…)
//
// Prints one JSON line per scenario: {"scenario": name, "ok": bool, "error"?: text,
// "detail"?: any}, and exits 1 if any scenario failed (2 on a usage error). A scenario runs when
// its name starts with one of the comma-separated prefixes; with none given, all run. Each
// scenario opens its own session, so one failure cannot spoil the next.
import { RpcPromise, RpcTarget, newWebSocketRpcSession } from "capnweb";
import { namedValues, receivedValues, diff, errorFields } from "./values.mjs";
import { scenarioArgs } from "./cli.mjs";

const { url, prefixes, selected: runs } = scenarioArgs("client.mjs");
const SCENARIO_TIMEOUT_MS = Number(process.env.SCENARIO_TIMEOUT_MS ?? 15000);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class Failure extends Error {}
function check(cond, message, detail) {
  if (!cond) {
    const f = new Failure(message);
    f.detail = detail;
    throw f;
  }
}
function same(got, want, what) {
  const d = diff(got, want);
  check(d === "", `${what}: ${d}`);
}
async function rejects(promise, what) {
  try {
    const v = await promise;
    check(false, `${what}: resolved instead of rejecting`, String(v));
  } catch (e) {
    if (e instanceof Failure) throw e;
    return e;
  }
}
async function waitFor(cond, ms, what) {
  const end = Date.now() + ms;
  while (!(await cond())) {
    check(Date.now() < end, `${what} within ${ms} ms`);
    await sleep(20);
  }
}

// A callback whose calls and release (capnweb disposes an exported function once the peer
// releases every reference to it) can be watched.
function watched(fn) {
  const cb = (...args) => { cb.calls++; return fn(...args); };
  cb.calls = 0;
  cb.released = false;
  cb[Symbol.dispose] = () => { cb.released = true; };
  return cb;
}

const scenarios = [];
const scenario = (name, fn) => scenarios.push({ name, fn });

for (const name of Object.keys(namedValues())) {
  scenario(`echo/${name}`, async (api) => {
    same(await api.echo(namedValues()[name]), receivedValues()[name], "echo");
  });
  scenario(`expect/${name}`, async (api) => {
    const verdict = await api.expect(name, namedValues()[name]);
    check(verdict === "ok", `server decoded it differently: ${verdict}`);
  });
  scenario(`value/${name}`, async (api) => {
    same(await api.value(name), receivedValues()[name], "server's value");
  });
  scenario(`callback_value/${name}`, async (api) => {
    const verdict = await api.roundTripViaCallback((v) => v, name);
    check(verdict === "ok", `value sent to the callback and back: ${verdict}`);
  });
}

scenario("call/add", async (api) => {
  check((await api.add(2, 3)) === 5, "add(2, 3) !== 5");
});

scenario("callback/once", async (api) => {
  const cb = watched((s) => s + "!");
  const r = await api.callCallback(cb, "x");
  check(r === "x!", "result", r);
  check(cb.calls === 1, `callback ran ${cb.calls} times, want 1`);
  await waitFor(() => cb.released, 5000, "server releases the callback after the call");
});

scenario("callback/async", async (api) => {
  const cb = watched(async (s) => { await sleep(50); return s.toUpperCase(); });
  check((await api.callCallback(cb, "later")) === "LATER", "async callback result");
});

scenario("callback/many", async (api) => {
  const cb = watched((i) => i * 2);
  const r = await api.callMany(cb, 100);
  same(r, Array.from({ length: 100 }, (_, i) => i * 2), "results");
  check(cb.calls === 100, `callback ran ${cb.calls} times, want 100`);
  await waitFor(() => cb.released, 5000, "server releases the callback after the call");
});

scenario("callback/concurrent", async (api) => {
  // Every call waits until all n have arrived, so this passes only if the server really has
  // all n calls in flight at once.
  const n = 20;
  let arrived = 0;
  let openGate;
  const gate = new Promise((r) => { openGate = r; });
  const timeout = sleep(5000).then(() => { throw new Failure(`only ${arrived} of ${n} callback calls in flight at once`); });
  const cb = watched(async (i) => {
    if (++arrived === n) openGate();
    await Promise.race([gate, timeout]);
    return i * 10;
  });
  timeout.catch(() => {});
  const r = await api.callConcurrently(cb, n);
  same(r, Array.from({ length: n }, (_, i) => i * 10), "results");
});

scenario("callback/kept_after_return", async (api) => {
  const cb = watched((x) => x * 3);
  check((await api.keepCallback(cb)) === "kept", "keepCallback result");
  await sleep(200);
  check(!cb.released, "the server released a callback it duplicated");
  check((await api.callKept(3)) === 9, "first callKept");
  check((await api.callKept(4)) === 12, "second callKept");
  check(cb.calls === 2, `callback ran ${cb.calls} times, want 2`);
  check(!cb.released, "released before releaseKept");
  check((await api.releaseKept()) === "released", "releaseKept result");
  await waitFor(() => cb.released, 5000, "server releases the duplicate");
});

scenario("errors/throw_with_code", async (api) => {
  const e = await rejects(api.throwWithCode("boom", "E_BOOM"), "throwWithCode");
  check(e instanceof Error, "rejection is not an Error", String(e));
  check(e.message === "boom", `message ${JSON.stringify(e.message)}`);
  check(e.code === "E_BOOM", `code ${JSON.stringify(e.code)}`, errorFields(e));
  check((await api.add(1, 1)) === 2, "session unusable after a thrown error");
});

scenario("errors/callback_throws", async (api) => {
  const cb = watched(() => {
    const e = new RangeError("callback failed");
    e.code = "E_CALLBACK";
    throw e;
  });
  const r = await api.callbackThrows(cb);
  check(r && r.threw === true, "server did not see the callback throw", r);
  check(r.message === "callback failed", `message ${JSON.stringify(r.message)}`, r);
  check(r.code === "E_CALLBACK", `code ${JSON.stringify(r.code)}`, r);
  check(r.name === "RangeError", `name ${JSON.stringify(r.name)}`, r);
});

scenario("errors/callback_throws_string", async (api) => {
  const r = await api.callbackThrows(() => { throw "just a string"; });
  check(r && r.threw === true && r.thrown === "just a string", "server did not see the thrown string", r);
});

scenario("errors/unknown_method", async (api) => {
  await rejects(api.noSuchMethod(1), "calling a method the server does not have");
  check((await api.add(1, 1)) === 2, "session unusable after an unknown method");
});

scenario("pipelining/counter", async (api) => {
  const c = api.makeCounter(10); // not awaited: the calls below pipeline on the promise
  check((await c.increment(5)) === 15, "first increment");
  check((await c.increment(2)) === 17, "second increment");
  check((await c.value()) === 17, "value");
  c[Symbol.dispose]();
});

scenario("pipelining/promise_argument", async (api) => {
  const p = api.add(1, 2);
  check((await api.add(p, 10)) === 13, "add(add(1,2),10) !== 13");
  p[Symbol.dispose]();
});

scenario("pipelining/property_argument", async (api) => {
  const v = api.echo({ k: 5 });
  check((await api.add(v.k, 1)) === 6, "add(echo({k:5}).k, 1) !== 6");
  v[Symbol.dispose]();
});

scenario("pipelining/stub_passed_back", async (api) => {
  const c = await api.makeCounter(0);
  check((await api.incrementVia(c, 4)) === 4, "incrementVia");
  check((await c.increment(1)) === 5, "increment after passing the stub back");
  c[Symbol.dispose]();
});

scenario("pipelining/map", async (api) => {
  // promise.map() sends a remap expression that the server runs on each element.
  const names = await api.list().map((item) => api.lookup(item.id));
  same(names, ["name#1", "name#2", "name#3"], "mapped results");
});

scenario("pipelining/local_promise_argument", async (api) => {
  // Sent as ["promise",-N] and resolved afterwards; the server must wait for it.
  const later = new RpcPromise(new Promise((r) => setTimeout(() => r(5), 30)));
  check((await api.add(later, 1)) === 6, "add(<promise of 5>, 1) !== 6");
});

scenario("pipelining/target_argument", async (api) => {
  // A JS object passed by reference: the server calls its method.
  let disposed = false;
  class LocalCounter extends RpcTarget {
    increment(by) { return 1000 + by; }
    [Symbol.dispose]() { disposed = true; }
  }
  check((await api.incrementVia(new LocalCounter(), 1)) === 1001, "incrementVia(a JS counter)");
  await waitFor(() => disposed, 5000, "server releases the JS object after the call");
});

scenario("pipelining/promise_in_result", async (api) => {
  const r = await api.promiseInside();
  same(r, { now: 1, later: 5 }, "result");
});

scenario("pipelining/many_in_flight", async (api) => {
  const n = 500;
  const r = await Promise.all(Array.from({ length: n }, (_, i) => api.add(i, i)));
  same(r, Array.from({ length: n }, (_, i) => 2 * i), "results");
});

scenario("close/server_mid_call", async (api) => {
  const e = await rejects(api.closeMidCall(), "closeMidCall");
  const msg = String(e?.message ?? e);
  check(msg.includes("Peer closed WebSocket: 4000 closeMidCall"), `pending call failed with ${JSON.stringify(msg)}`);
  const later = await rejects(api.add(1, 2), "a call after the server closed");
  return { pending: msg, later: String(later?.message ?? later) };
});

scenario("close/client_mid_call", async (api) => {
  const pending = api.hang();
  // Calls on one object are delivered in order: once sessionId() answers, hang() is running.
  const id = await api.sessionId();
  api[Symbol.dispose]();
  const e = await rejects(pending, "the pending call after the client ended the session");
  const observer = newWebSocketRpcSession(url);
  try {
    let end = null;
    await waitFor(async () => (end = await observer.sessionEnd(id)) !== null, 5000,
      "server notices the session ended");
    return { pending: String(e?.message ?? e), serverSaw: end };
  } finally {
    observer[Symbol.dispose]();
  }
});

async function runOne({ name, fn }) {
  const api = newWebSocketRpcSession(url);
  let timer;
  try {
    const detail = await Promise.race([
      fn(api),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Failure(`timed out after ${SCENARIO_TIMEOUT_MS} ms`)), SCENARIO_TIMEOUT_MS);
      }),
    ]);
    return { scenario: name, ok: true, ...(detail === undefined ? {} : { detail }) };
  } catch (e) {
    const out = { scenario: name, ok: false, error: e instanceof Failure ? e.message : `unexpected: ${e?.stack ?? e}` };
    if (e?.detail !== undefined) out.detail = e.detail;
    return out;
  } finally {
    clearTimeout(timer);
    try { api[Symbol.dispose](); } catch {}
  }
}

const selected = scenarios.filter((s) => runs(s.name));
if (selected.length === 0) {
  console.error(`no scenario matches ${JSON.stringify(prefixes)}`);
  process.exit(2);
}
let failed = 0;
for (const s of selected) {
  const r = await runOne(s);
  if (!r.ok) failed++;
  let line;
  try { line = JSON.stringify(r); } catch { line = JSON.stringify({ scenario: r.scenario, ok: r.ok, error: r.error, detail: String(r.detail) }); }
  console.log(line);
}
process.exit(failed ? 1 : 0);
