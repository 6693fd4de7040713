// Measures capnweb round trips per second from the real JavaScript client to a server URL.
// Usage: node bench.mjs ws://127.0.0.1:PORT/ MODE [seconds] [inflight]
//   MODE small:    add(1, 2)
//   MODE callback: callCallback(cb, 1), whose server calls cb once before answering
// inflight is how many calls are kept outstanding on the one session (default 1: sequential
// round trips). After a short warm-up it prints one JSON line:
//   {"mode", "inflight", "calls", "seconds", "callsPerSec", "usPerCall", "totalCalls"}
import { WebSocket } from "ws";
import { newWebSocketRpcSession } from "capnweb";

if (typeof globalThis.WebSocket === "undefined") globalThis.WebSocket = WebSocket;

const [url, mode, secondsArg, inflightArg] = process.argv.slice(2);
const seconds = Number(secondsArg ?? 2);
const inflight = Number(inflightArg ?? 1);
if (!url || !["small", "callback"].includes(mode) || !(seconds > 0) || !(inflight >= 1)) {
  console.error("usage: node bench.mjs ws://host:port/ small|callback [seconds] [inflight]");
  process.exit(2);
}

const api = newWebSocketRpcSession(url);
const cb = (x) => x + 1;
const once = mode === "small"
  ? async () => { if ((await api.add(1, 2)) !== 3) throw new Error("add(1, 2) !== 3"); }
  : async () => { if ((await api.callCallback(cb, 1)) !== 2) throw new Error("callCallback(cb, 1) !== 2"); };

// Runs `inflight` loops of back-to-back calls until the deadline; returns calls completed.
async function run(ms) {
  const deadline = performance.now() + ms;
  let calls = 0;
  const loop = async () => {
    while (performance.now() < deadline) {
      await once();
      calls++;
    }
  };
  await Promise.all(Array.from({ length: inflight }, loop));
  return calls;
}

try {
  const warmup = await run(Math.min(500, seconds * 250)); // JIT, connection, server caches
  const start = performance.now();
  const calls = await run(seconds * 1000);
  const elapsed = (performance.now() - start) / 1000;
  console.log(JSON.stringify({
    mode, inflight, calls, seconds: elapsed,
    callsPerSec: calls / elapsed, usPerCall: (elapsed * 1e6) / calls * inflight,
    totalCalls: warmup + calls, // with the warm-up: what the server served on this session
  }));
  api[Symbol.dispose]();
  process.exit(0);
} catch (e) {
  console.error(`bench failed: ${e?.stack ?? e}`);
  process.exit(1);
}
