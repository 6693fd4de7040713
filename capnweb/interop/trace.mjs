// Records the exact WebSocket frames the real capnweb client exchanges with a server while it
// runs a fixed list of steps, one at a time. Run against the JS server and the Go server, the
// two traces must match frame for frame: same messages, same ids, same JSON text.
// Usage: node trace.mjs ws://127.0.0.1:PORT/
// Output: one JSON line per frame, {"step", "dir": "C->S"|"S->C", "frame": text}; exit 1 if a
// step failed.
import { WebSocket as WsWebSocket } from "ws";
import { namedValues } from "./values.mjs";

let step = "connect";
const log = (dir, frame) => console.log(JSON.stringify({ step, dir, frame: String(frame) }));

// Every socket capnweb opens logs what crosses it.
class TracingWebSocket extends WsWebSocket {
  constructor(...args) {
    super(...args);
    this.addEventListener("message", (e) => log("S->C", e.data));
  }
  send(data, ...rest) {
    log("C->S", data);
    return super.send(data, ...rest);
  }
}
globalThis.WebSocket = TracingWebSocket;
const { newWebSocketRpcSession } = await import("capnweb");

const url = process.argv[2] ?? process.env.URL;
if (!url) {
  console.error("usage: node trace.mjs ws://host:port/");
  process.exit(2);
}
const api = newWebSocketRpcSession(url);
const settle = () => new Promise((r) => setTimeout(r, 50)); // let releases cross before the next step

// Values whose encoding does not depend on object key order: a Go server echoes a received
// object with its keys sorted, where JS keeps insertion order; both are valid.
const traced = ["string_unicode", "negzero", "nan", "inf", "ninf", "max_safe", "tiny", "huge", "undefined",
  "bigint_negative", "date", "date_before_epoch", "bytes", "arraybuffer", "array_nested", "array_mixed",
  "error", "error_code", "error_typed"];

const steps = {
  add: () => api.add(1, 2),
  callCallback: () => api.callCallback((x) => x + 1, 1),
  callMany: () => api.callMany((i) => i * 2, 3),
  throwWithCode: () => api.throwWithCode("boom", "E_BOOM").catch((e) => e.code),
  callbackThrows: () => api.callbackThrows(() => { const e = new RangeError("no"); e.code = "E_CB"; throw e; }),
  counter: async () => { const c = api.makeCounter(10); const r = [await c.increment(5), await c.value()]; c[Symbol.dispose](); return r; },
  promiseArgument: async () => { const p = api.add(1, 2); const r = await api.add(p, 10); p[Symbol.dispose](); return r; },
  propertyArgument: async () => { const v = api.echo({ k: 5 }); const r = await api.add(v.k, 1); v[Symbol.dispose](); return r; },
  keep: async () => { const cb = (x) => x * 3; await api.keepCallback(cb); const r = await api.callKept(2); await api.releaseKept(); return r; },
  // Not traced: promise.map(), which a JS server answers with ["promise",-N] per element and
  // a Go server with the values themselves; both are valid (client.mjs checks the result).
};
for (const name of traced) steps[`echo/${name}`] = () => api.echo(namedValues()[name]);
for (const name of traced) steps[`value/${name}`] = () => api.value(name);

let failed = false;
for (const [name, run] of Object.entries(steps)) {
  step = name;
  try {
    await run();
  } catch (e) {
    console.error(`step ${name} failed: ${e?.stack ?? e}`);
    failed = true;
  }
  await settle();
}
step = "dispose";
api[Symbol.dispose]();
await settle();
process.exit(failed ? 1 : 0);
