// The command line the interop clients share: node <script> URL [prefix,…] (or URL=…,
// SCENARIOS=…), the server to test and the prefixes of the scenario names to run (all when none
// is given). Importing it also installs ws as the global WebSocket, which capnweb reads and
// Node 20 lacks.
import { WebSocket } from "ws";

if (typeof globalThis.WebSocket === "undefined") globalThis.WebSocket = WebSocket;

// scenarioArgs reads the command line of script, exiting 2 with its usage when no URL is given.
// selected(name) says whether the scenario called name runs.
export function scenarioArgs(script) {
  const url = process.argv[2] ?? process.env.URL;
  const prefixes = (process.argv[3] ?? process.env.SCENARIOS ?? "").split(",").filter(Boolean);
  if (!url) {
    console.error(`usage: node ${script} ws://host:port/ [scenario-prefix,…]`);
    process.exit(2);
  }
  const selected = (name) => prefixes.length === 0 || prefixes.some((p) => name.startsWith(p));
  return { url, prefixes, selected };
}
