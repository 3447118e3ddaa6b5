// The adapter against the real body: `tobe-body run --board sim` with this
// user as an agent, reached through `tobe-body stdio` as an SSH forced
// command would run it. BODY_BIN names the binary (make test-adapter
// builds it and sets it); without it these tests are skipped by name.
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { createAdapter } from "../ADAPTER.ts";
import type { EnvAdapter, Observation } from "../types.ts";
import { startBody, stop, waitFor } from "./body.ts";

const BIN = process.env.BODY_BIN ?? "";
const skip = BIN === "" ? "BODY_BIN is not set (make test-adapter sets it to the binary it builds)" : false;

const tmp = mkdtempSync(join(tmpdir(), "body-adapter-real-"));
const data = join(tmp, "data");
const config = join(tmp, "config.json");
let daemon: ChildProcess | undefined;
const adapters: EnvAdapter[] = [];
after(async () => {
  await Promise.all(adapters.map((a) => a.stop()));
  await stopDaemon();
  rmSync(tmp, { recursive: true, force: true });
});

async function startDaemon(): Promise<void> {
  daemon = await startBody(BIN, data, config);
}

async function stopDaemon(): Promise<void> {
  const d = daemon;
  daemon = undefined;
  await stop(d);
}

function content(r: { content: string }): any {
  return JSON.parse(r.content);
}

test("the adapter drives the real body on the sim board through tobe-body stdio, and survives its restart", { skip, timeout: 120000 }, async () => {
  writeFileSync(config, JSON.stringify({
    version: 1,
    monitor: { quiet: true },
    agent: { principals: [{ name: "pi", subject: "agent:pi", uid: process.getuid!(), trust: "low" }] },
  }));
  await startDaemon();
  const a = createAdapter({
    dir: join(tmp, "adapter"),
    config: {
      command: [BIN, "stdio", "--data", data, "--principal", "pi"],
      request_timeout_ms: 10000,
      ping_ms: 500,
      reconnect: { initial_ms: 100, max_ms: 1000 },
    },
  });
  adapters.push(a);
  const started = await a.start();
  assert.equal(content(started).status, "success", started.content);
  assert.equal(a.health().status, "online");

  const modes = Object.fromEntries(a.getActions().map((x) => [x.action, x.mode]));
  for (const name of ["body_status", "list_channels", "self_state", "estop_status", "capabilities", "action_result"]) {
    assert.equal(modes[name], "observe", name);
  }
  for (const name of ["estop_trip", "gpio_set", "gpio_pulse", "audio_tone", "body_notify"]) {
    assert.equal(modes[name], "interact", name);
  }
  for (const name of Object.keys(modes)) {
    assert.ok(!/reset|grant|approv|backup/.test(name), `an agent has ${name}`);
  }

  const status = content(await a.observe({ call_id: "s1", action: "body_status" }));
  assert.equal(status.status, "success");
  assert.equal(status.data.board, "sim");
  const firstPid = status.data.pid;

  // R2 at the session's low trust: refused, with its reason.
  const relay = await a.interact({ call_id: "r1", action: "gpio_set", params: { target: "gpio.relay1", state: "on" } });
  assert.equal(relay.call_id, "r1");
  const rc = content(relay);
  assert.equal(rc.status, "error", relay.content);
  assert.equal(rc.error.reason, "risk_exceeds_trust");

  // Tripping the e-stop is anyone's: the body pushes the trip at once, and
  // the adapter hands it on as its own observation.
  const seen: Observation[] = [];
  const unsubscribe = a.subscribe((o) => seen.push(o));
  const trip = content(await a.interact({ call_id: "t1", action: "estop_trip", params: {} }));
  assert.equal(trip.status, "success");
  const tripped = await waitFor("the trip's observation", () => seen.find((o) => String(o.content).startsWith("E-stop tripped")));
  assert.equal(tripped.attention, "max");
  assert.equal(tripped.adapter_id, a.id);
  assert.equal(tripped.adapter_name, a.name);
  assert.equal(tripped.source, "estop.main");
  unsubscribe();

  // The daemon restarts: the link drops, the adapter reconnects.
  await stopDaemon();
  await waitFor("health degraded", () => a.health().status === "degraded");
  await startDaemon();
  await waitFor("health online again", () => a.health().status === "online");
  const again = content(await a.observe({ call_id: "s2", action: "body_status" }));
  assert.equal(again.status, "success");
  assert.notEqual(again.data.pid, firstPid, "a new daemon answers");

  const stopped = await a.stop();
  assert.equal(content(stopped).status, "success");
  assert.equal(a.health().status, "stopped");
});
