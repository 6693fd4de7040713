// Sends malformed frames to a capnweb server over a raw ws socket (no capnweb on this side) and
// checks that the server aborts each such session — an ["abort", …] frame, then close code
// 3000 — while a well-behaved session opened before, and one opened after, keep working.
// Usage: node garbage.mjs ws://127.0.0.1:PORT/ [prefix,…]   (or URL=…, SCENARIOS=…)
// OVERSIZE_BYTES=n adds the case "garbage/oversized": one frame of n bytes, which the server
// must refuse (close 1009 from its read limit, or an abort and 3000).
// Output: one JSON line per scenario, as client.mjs; exit 1 if any failed.
import { WebSocket } from "ws";
import { newWebSocketRpcSession } from "capnweb";
import { scenarioArgs } from "./cli.mjs";
import { malformedEitherWay, nested } from "./malformed.mjs";

const { url, selected } = scenarioArgs("garbage.mjs");
const WAIT_MS = 5000;

const push = (expr) => JSON.stringify(["push", expr]);

// Each case is the frames to send, in order, on a fresh connection.
const cases = {
  ...malformedEitherWay,
  empty_frame: [""],
  not_an_array: ['{"push":1}'],
  number: ["42"],
  empty_array: ["[]"],
  push_without_expression: ['["push"]'],
  pull_bad_id_type: ['["pull","1"]'],
  release_more_than_held: [push(["pipeline", 0, ["add"], [1, 2]]), '["release",1,5]'],
  push_to_unknown_import: [push(["pipeline", 77, ["add"], [1, 2]])],
  unescaped_array_argument: [push(["pipeline", 0, ["add"], [[1, 2], 3]])],
  unknown_special_value: [push(["pipeline", 0, ["echo"], [["frobnicate", 1]]])],
  too_deep: [push(["pipeline", 0, ["echo"], [nested(300)]])],
  bigint_too_long: [push(["pipeline", 0, ["echo"], [["bigint", "9".repeat(20000)]]])],
};
const oversize = Number(process.env.OVERSIZE_BYTES ?? 0);
if (oversize > 0) cases.oversized = [push(["pipeline", 0, ["echo"], ["x".repeat(oversize)]])];

// sendGarbage sends the frames and collects what the server says until it closes.
function sendGarbage(frames) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url);
    const received = [];
    const timer = setTimeout(() => {
      ws.terminate();
      resolve({ closed: false, received });
    }, WAIT_MS);
    ws.on("open", () => {
      for (const f of frames) ws.send(f, { binary: Buffer.isBuffer(f) });
    });
    ws.on("message", (data) => received.push(data.toString()));
    ws.on("error", () => {});
    ws.on("close", (code, reason) => {
      clearTimeout(timer);
      resolve({ closed: true, code, reason: reason.toString(), received });
    });
  });
}

async function garbageCase(name, frames) {
  const r = await sendGarbage(frames);
  const detail = { code: r.code, reason: r.reason, received: r.received };
  if (!r.closed) return { ok: false, error: `server kept the session open ${WAIT_MS} ms after garbage`, detail };
  if (name === "oversized") {
    const ok = r.code === 1009 || r.code === 3000;
    return ok ? { ok, detail } : { ok, error: `close code ${r.code}, want 1009 or 3000`, detail };
  }
  const last = r.received.length ? JSON.parse(r.received.at(-1)) : null;
  if (!Array.isArray(last) || last[0] !== "abort") return { ok: false, error: "no abort frame before the close", detail };
  if (r.code !== 3000) return { ok: false, error: `close code ${r.code}, want 3000`, detail };
  return { ok: true, detail };
}

let failed = 0;
const report = (name, r) => {
  if (!r.ok) failed++;
  console.log(JSON.stringify({ scenario: name, ...r }));
};

// A healthy session opened before the garbage must survive all of it.
const before = newWebSocketRpcSession(url);
let beforeOk = true;
try {
  if ((await before.add(1, 2)) !== 3) beforeOk = false;
} catch {
  beforeOk = false;
}

for (const [name, frames] of Object.entries(cases)) {
  const full = `garbage/${name}`;
  if (!selected(full)) continue;
  try {
    report(full, await garbageCase(name, frames));
  } catch (e) {
    report(full, { ok: false, error: `unexpected: ${e?.stack ?? e}` });
  }
}

if (selected("garbage/others_unaffected")) {
  const r = { ok: true };
  try {
    if (!beforeOk) throw new Error("the healthy session failed before any garbage was sent");
    if ((await before.add(2, 2)) !== 4) throw new Error("session opened before the garbage gave a wrong answer");
    const after = newWebSocketRpcSession(url);
    try {
      if ((await after.add(3, 3)) !== 6) throw new Error("session opened after the garbage gave a wrong answer");
    } finally {
      after[Symbol.dispose]();
    }
  } catch (e) {
    r.ok = false;
    r.error = String(e?.message ?? e);
  }
  report("garbage/others_unaffected", r);
}
before[Symbol.dispose]();
process.exit(failed ? 1 : 0);
