// A capnweb server built on the real JavaScript library, serving the interop test API on
// 127.0.0.1. Usage: node server.mjs [port]   (or PORT=…; default 0 picks a free port).
// The first stdout line is the port it listens on; logs go to stderr.
//
// Every connection gets its own TestApi (per-session state such as a kept callback). The Go
// test server in interop_test.go implements the same methods with the same meaning, so one
// client scenario list runs against either.
import http from "node:http";
import { WebSocket, WebSocketServer } from "ws";
import { RpcPromise, RpcTarget, newWebSocketRpcSession } from "capnweb";
import { namedValues, receivedValues, diff, errorFields } from "./values.mjs";

// capnweb reads the global WebSocket even for a socket handed to it by ws (research note,
// section 9); Node 20 has none.
if (typeof globalThis.WebSocket === "undefined") globalThis.WebSocket = WebSocket;

// Why each session ended, by session id, for sessionEnd(id) asked over another session.
const sessionEnds = new Map();
let nextSessionId = 1;

class Counter extends RpcTarget {
  #n;
  constructor(start) { super(); this.#n = start; }
  increment(by) { this.#n += by; return this.#n; }
  value() { return this.#n; }
}

class TestApi extends RpcTarget {
  #id;
  #ws;
  #kept;
  constructor(id, ws) { super(); this.#id = id; this.#ws = ws; }

  sessionId() { return this.#id; }
  // The reason session id ended as this server saw it, or null while it is alive.
  sessionEnd(id) { return sessionEnds.has(id) ? sessionEnds.get(id) : null; }

  echo(v) { return v; }
  add(a, b) { return a + b; }
  value(name) {
    const all = namedValues();
    if (!(name in all)) throw new RangeError(`no value named ${name}`);
    return all[name];
  }
  // "ok" when v is exactly the value of that name as received, else where it differs.
  expect(name, v) {
    const all = receivedValues();
    if (!(name in all)) throw new RangeError(`no value named ${name}`);
    return diff(v, all[name]) || "ok";
  }

  async callCallback(cb, arg) { return await cb(arg); }
  async callMany(cb, n) {
    const out = [];
    for (let i = 0; i < n; i++) out.push(await cb(i));
    return out;
  }
  async callConcurrently(cb, n) {
    const calls = [];
    for (let i = 0; i < n; i++) calls.push(cb(i));
    return await Promise.all(calls);
  }
  // Sends value(name) to cb, which must return it unchanged; "ok" or where it differs.
  async roundTripViaCallback(cb, name) {
    const want = receivedValues()[name]; // -0 comes back as 0 after two trips, too
    const got = await cb(this.value(name));
    return diff(got, want) || "ok";
  }
  keepCallback(cb) {
    if (this.#kept) this.#kept[Symbol.dispose]();
    this.#kept = cb.dup();
    return "kept";
  }
  async callKept(arg) {
    if (!this.#kept) throw new Error("no kept callback");
    return await this.#kept(arg);
  }
  releaseKept() {
    if (!this.#kept) throw new Error("no kept callback");
    this.#kept[Symbol.dispose]();
    this.#kept = undefined;
    return "released";
  }
  async callbackThrows(cb) {
    try {
      const result = await cb();
      return { threw: false, result };
    } catch (e) {
      return { threw: true, ...errorFields(e) };
    }
  }
  throwWithCode(message, code) {
    const e = new Error(message);
    e.code = code;
    throw e;
  }

  makeCounter(start) { return new Counter(start); }
  list() { return [{ id: 1 }, { id: 2 }, { id: 3 }]; }
  lookup(id) { return `name#${id}`; }
  // A result holding a promise that settles later: sent as ["promise",-N], then a resolve.
  promiseInside() {
    return { now: 1, later: new RpcPromise(new Promise((r) => setTimeout(() => r(5), 20))) };
  }
  async incrementVia(counter, by) { return await counter.increment(by); }

  // Closes this session's socket (code 4000, reason "closeMidCall") while the call is pending.
  closeMidCall() {
    setTimeout(() => this.#ws.close(4000, "closeMidCall"), 20);
    return new Promise(() => {});
  }
  // Never settles; the caller ends the session while it waits.
  hang() { return new Promise(() => {}); }
}

const httpServer = http.createServer((req, res) => { res.writeHead(404); res.end(); });
const wss = new WebSocketServer({ server: httpServer });
wss.on("connection", (ws) => {
  const id = nextSessionId++;
  const peer = newWebSocketRpcSession(ws, new TestApi(id, ws));
  peer.onRpcBroken((err) => {
    if (!sessionEnds.has(id)) sessionEnds.set(id, String(err?.message ?? err));
  });
  ws.on("close", (code, reason) => {
    if (!sessionEnds.has(id)) sessionEnds.set(id, `closed ${code} ${reason}`);
  });
});

const port = Number(process.argv[2] ?? process.env.PORT ?? 0);
httpServer.listen(port, "127.0.0.1", () => {
  process.stdout.write(`${httpServer.address().port}\n`);
});
process.on("SIGTERM", () => process.exit(0));
