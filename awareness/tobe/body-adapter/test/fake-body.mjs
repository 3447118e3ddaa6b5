#!/usr/bin/env node
// A fake `tobe-body stdio` for the adapter's tests: MCP 2025-06-18 over
// newline-delimited JSON-RPC 2.0 on stdin/stdout, logs on stderr only,
// behaving as the body's side of the protocol is specified. Flags:
//
//   --state FILE       counts starts in FILE; drain returns "shared" and
//                      "drain-<n>" for the n-th start
//   --silence-ms N     end the session after N ms without a message (2000)
//   --test-tools       also offer the test's tools: __push (observe: sends
//                      its arguments as an observation), __hang (observe:
//                      never answers), __bigline (observe: a 33 MiB line,
//                      then the answer), __exit (interact: exits at once)
//   --exit-after-ms N  exit N ms after the handshake
//   --stubborn         ignore stdin's end and SIGTERM (only SIGKILL ends it)
//   --no-pong          never answer ping
//   --version V        protocolVersion to answer initialize with

import { existsSync, readFileSync, writeFileSync } from "node:fs";

const args = process.argv.slice(2);
const flag = (name) => args.includes(name);
const value = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : dflt;
};

const log = (msg) => process.stderr.write(`fake-body[${process.pid}]: ${msg}\n`);
const send = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");

let generation = 1;
const stateFile = value("--state", "");
if (stateFile) {
  generation = existsSync(stateFile) ? Number(readFileSync(stateFile, "utf8")) + 1 : 1;
  writeFileSync(stateFile, String(generation));
}

const stubborn = flag("--stubborn");
if (stubborn) process.on("SIGTERM", () => log("SIGTERM ignored"));

const silenceMs = Number(value("--silence-ms", "2000"));
let silenceTimer = null;
const heard = () => {
  if (silenceTimer) clearTimeout(silenceTimer);
  silenceTimer = setTimeout(() => {
    log(`session silent for ${silenceMs} ms: ending it, running actions cancelled`);
    process.exit(0);
  }, silenceMs);
};

const obj = (properties = {}, required = []) => ({ type: "object", properties, required, additionalProperties: false });
const observeTool = (name, description, inputSchema = obj()) => ({
  name,
  description,
  inputSchema,
  annotations: { readOnlyHint: true },
});
const interactTool = (name, description, inputSchema, extra = {}) => ({
  name,
  description,
  inputSchema,
  annotations: { readOnlyHint: false, ...extra },
});

const tools = [
  observeTool("body_status", "The body's status: version, uptime, clock, e-stop, channels."),
  observeTool("list_channels", "Every channel: kind, direction, who holds it."),
  observeTool("self_state", "The body's own health: temperature, power, load, degradation."),
  observeTool("estop_status", "Whether the e-stop is latched, since when and why."),
  observeTool("events", "Recent events from the ledger.", obj({ since: { type: "string" }, limit: { type: "integer" } })),
  observeTool("drain", "Observations pushed while no one read them.", obj()),
  observeTool("capabilities", "What the body can do, with each capability's risk and targets."),
  observeTool("action_result", "An action's result by its id.", obj({ action_id: { type: "string" } }, ["action_id"])),
  observeTool("get_evidence", "A piece of evidence: its record, then its image or sound.", obj({ id: { type: "string" } }, ["id"])),
  interactTool("estop_trip", "Trip the e-stop: every output to its safe state.", obj({ reason: { type: "string" } }), {
    destructiveHint: false,
    idempotentHint: true,
  }),
  interactTool(
    "gpio_set",
    "Set a GPIO output.",
    obj({ target: { enum: ["lamp", "relay1"] }, value: { type: "boolean" } }, ["target", "value"]),
  ),
  interactTool(
    "gpio_pulse",
    "Pulse a GPIO output.",
    obj({ target: { enum: ["lamp"] }, ms: { type: "integer" } }, ["target", "ms"]),
  ),
  interactTool(
    "audio_tone",
    "Play a tone.",
    obj({ target: { enum: ["speaker"] }, hz: { type: "number" }, ms: { type: "integer" } }, ["target"]),
  ),
  interactTool("audio_play", "Play a stored sound.", obj({ target: { enum: ["speaker"] }, sound: { type: "string" } }, ["target"])),
  interactTool("body_notify", "Show a notice on the body.", obj({ target: { enum: ["display"] }, text: { type: "string" } }, ["target"])),
];
if (flag("--test-tools")) {
  tools.push(
    observeTool("__push", "Test: push the arguments as an observation.", { type: "object" }),
    observeTool("__hang", "Test: never answer."),
    observeTool("__bigline", "Test: a 33 MiB line, then the answer."),
    observeTool("__mediumline", "Test: an answer of a 3 MiB line."),
    interactTool("__exit", "Test: exit at once.", obj()),
  );
}

/** The bytes of the fake body's one piece of evidence. */
export const EVIDENCE_BYTES = [0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 0xff, 0xd9];

const ok = (data) => ({ content: [{ type: "text", text: JSON.stringify({ status: "success", data }) }] });
const refused = (reason, detail) => ({
  content: [{ type: "text", text: JSON.stringify({ status: "error", error: { reason, detail } }) }],
  isError: true,
});

const observation = (id, content, attention = "medium") => ({
  id,
  source: "body/test",
  actor: "signal",
  content,
  trust: "medium",
  attention,
  timestamp: new Date().toISOString(),
});

function callTool(id, name, params) {
  const args = params?.arguments ?? {};
  const callId = params?._meta?.["tobe/call_id"];
  switch (name) {
    case "body_status":
      return send({ jsonrpc: "2.0", id, result: ok({ pid: process.pid, generation, call_id: callId, version: "0.0.0-fake" }) });
    case "list_channels":
      return send({ jsonrpc: "2.0", id, result: ok({ channels: [{ name: "lamp", kind: "gpio", direction: "out" }] }) });
    case "self_state":
      return send({ jsonrpc: "2.0", id, result: ok({ degradation: "normal" }) });
    case "estop_status":
      return send({ jsonrpc: "2.0", id, result: ok({ latched: false }) });
    case "events":
      return send({ jsonrpc: "2.0", id, result: ok({ events: [] }) });
    case "capabilities":
      return send({ jsonrpc: "2.0", id, result: ok({ capabilities: [] }) });
    case "action_result":
      return send({ jsonrpc: "2.0", id, result: ok({ action_id: args.action_id, state: "done" }) });
    case "get_evidence":
      // ev-ok may be looked at; any other is refused as the body refuses
      // a session without evidence.view.
      if (args.id !== "ev-ok") return send({ jsonrpc: "2.0", id, result: refused("no_grant", `no grant lets agent:test use evidence.view on camera.front`) });
      return send({
        jsonrpc: "2.0",
        id,
        result: {
          content: [
            { type: "text", text: JSON.stringify({ status: "success", data: { id: "ev-ok", width: 4, height: 3, media_type: "image/jpeg" } }) },
            { type: "image", data: Buffer.from(EVIDENCE_BYTES).toString("base64"), mimeType: "image/jpeg" },
          ],
        },
      });
    case "drain":
      return send({
        jsonrpc: "2.0",
        id,
        result: ok({
          observations: [observation("shared", "seen by every drain"), observation(`drain-${generation}`, `drained at start ${generation}`)],
          dropped: 0,
        }),
      });
    case "estop_trip":
      return send({ jsonrpc: "2.0", id, result: ok({ latched: true }) });
    case "gpio_set":
      return send({
        jsonrpc: "2.0",
        id,
        result: refused("risk_exceeds_trust", "gpio_set on relay1 is risk high; the principal tobe-agent is trusted to medium"),
      });
    case "gpio_pulse":
    case "audio_tone":
    case "audio_play":
    case "body_notify":
      return send({ jsonrpc: "2.0", id, result: ok({ action_id: `act-${id}`, state: "running" }) });
    case "__push":
      send({ jsonrpc: "2.0", method: "notifications/tobe/observation", params: args });
      return send({ jsonrpc: "2.0", id, result: ok({ pushed: args.id }) });
    case "__hang":
      return;
    case "__bigline": {
      const big = observation("big", "x".repeat(33 * 1024 * 1024));
      send({ jsonrpc: "2.0", method: "notifications/tobe/observation", params: big });
      return send({ jsonrpc: "2.0", id, result: ok({ sent: "33 MiB" }) });
    }
    case "__mediumline":
      // A result as large as a clip's: 3 MiB of base64.
      return send({ jsonrpc: "2.0", id, result: ok({ data: "A".repeat(3 * 1024 * 1024) }) });
    case "__exit":
      log("exiting on __exit");
      return process.exit(3);
    default:
      return send({ jsonrpc: "2.0", id, error: { code: -32602, message: `Unknown tool: ${name}` } });
  }
}

function onMessage(msg) {
  heard();
  const { id, method, params } = msg;
  if (method === undefined) return; // A response to nothing we asked.
  if (id === undefined) {
    if (method === "notifications/initialized") {
      log("initialized");
      const after = value("--exit-after-ms", "");
      if (after) setTimeout(() => process.exit(4), Number(after));
    }
    return;
  }
  switch (method) {
    case "initialize":
      return send({
        jsonrpc: "2.0",
        id,
        result: {
          protocolVersion: value("--version", "2025-06-18"),
          capabilities: { tools: {} },
          serverInfo: { name: "tobe-body", version: "0.0.0-fake" },
        },
      });
    case "ping":
      if (flag("--no-pong")) return;
      return send({ jsonrpc: "2.0", id, result: {} });
    case "tools/list":
      return send({ jsonrpc: "2.0", id, result: { tools } });
    case "tools/call":
      return callTool(id, params?.name, params);
    default:
      return send({ jsonrpc: "2.0", id, error: { code: -32601, message: `Method not found: ${method}` } });
  }
}

let buf = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buf += chunk;
  let nl;
  while ((nl = buf.indexOf("\n")) >= 0) {
    const line = buf.slice(0, nl);
    buf = buf.slice(nl + 1);
    if (!line.trim()) continue;
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      log("a line that is not JSON");
      send({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } });
      continue;
    }
    onMessage(msg);
  }
});
process.stdin.on("end", () => {
  if (stubborn) {
    log("stdin ended; staying");
    setInterval(() => {}, 1000);
    return;
  }
  log("stdin ended");
  process.exit(0);
});
process.stdout.on("error", () => process.exit(0));
log(`started (generation ${generation})`);
heard();
