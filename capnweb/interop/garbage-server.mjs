// A raw ws server (no capnweb on this side) that answers a capnweb client's first message
// with malformed frames, to check that the client aborts the session: an ["abort", …] frame,
// then close code 3000. The URL path names the case: ws://127.0.0.1:PORT/<case>.
// Usage: node garbage-server.mjs [port]
// The first stdout line is the port; then one JSON line per connection when it closes:
//   {"case", "received": [frames the client sent], "code", "reason"}
import http from "node:http";
import { WebSocketServer } from "ws";
import { malformedEitherWay, nested } from "./malformed.mjs";

// What to send once the client's first message arrived. The client's first push is its
// import 1, so "resolve 1" answers it.
const cases = {
  ...malformedEitherWay,
  not_an_array: ['{"resolve":1}'],
  resolve_without_value: ['["resolve",1]'],
  push_to_unknown_import: [JSON.stringify(["push", ["pipeline", 77, [], []]])],
  unknown_special_value: [JSON.stringify(["resolve", 1, ["frobnicate", 1]])],
  unescaped_array: [JSON.stringify(["resolve", 1, [1, 2]])],
  too_deep: [JSON.stringify(["resolve", 1, nested(300)])],
  bigint_too_long: [JSON.stringify(["resolve", 1, ["bigint", "9".repeat(20000)]])],
};

const httpServer = http.createServer((req, res) => { res.writeHead(404); res.end(); });
const wss = new WebSocketServer({ server: httpServer });
wss.on("connection", (ws, req) => {
  const name = (req.url ?? "/").slice(1);
  const frames = cases[name];
  const received = [];
  let sent = false;
  ws.on("message", (data) => {
    received.push(data.toString());
    if (!sent && frames) {
      sent = true;
      for (const f of frames) ws.send(f, { binary: Buffer.isBuffer(f) });
    }
  });
  ws.on("error", () => {});
  ws.on("close", (code, reason) => {
    console.log(JSON.stringify({ case: name, received, code, reason: reason.toString() }));
  });
  if (!frames) ws.close(4004, `unknown case ${name}`);
});

const port = Number(process.argv[2] ?? process.env.PORT ?? 0);
httpServer.listen(port, "127.0.0.1", () => {
  process.stdout.write(`${httpServer.address().port}\n`);
});
process.on("SIGTERM", () => process.exit(0));
