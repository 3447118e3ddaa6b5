// The provider as onward uses it, against the real body: `tobe-body run
// --board sim` with this user as the agent's principal, reached through
// `tobe-body stdio` as an SSH forced command would run it. BODY_BIN names
// the binary (make test-adapter builds it and sets it); without it these
// tests are skipped by name.
import assert from "node:assert/strict";
import { execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { CALL_PERSON, createProvider, MAKE_SAFE, stepKey } from "../index.ts";
import { startBody, stop, waitFor } from "../../body-adapter/test/body.ts";
import { Onward, Pi } from "./onward.ts";

const BIN = process.env.BODY_BIN ?? "";
const skip = BIN === "" ? "BODY_BIN is not set (make test-adapter sets it to the binary it builds)" : false;

const tmp = mkdtempSync(join(tmpdir(), "onward-provider-real-"));
const data = join(tmp, "data");
const config = join(tmp, "config.json");
let daemon: ChildProcess | undefined;
after(async () => {
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

/** Runs the CLI as the local administrator (this user). */
function cli(...args: string[]): string {
  return execFileSync(BIN, [...args, "--data", data, "--config", config], { encoding: "utf8" });
}

/** The ledger's events of a type, as JSON. */
function events(type: string): Array<{ seq: number; event_type: string; payload: Record<string, any> }> {
  return cli("ledger", "events", "--json", "--type", type)
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l));
}

/** The runner's proposals of an idempotency key. */
function proposals(key: string): number {
  return events("action.proposed").filter((e) => e.payload?.invocation?.idempotency_key === key).length;
}

function estop(): { latched: boolean; trips: number; why?: string } {
  return JSON.parse(cli("estop", "status", "--json"));
}

function setUp(more: Record<string, unknown> = {}, dir = "provider") {
  const pi = new Pi();
  const onward = new Onward(pi);
  createProvider(pi, {
    dir: join(tmp, dir),
    config: {
      command: [BIN, "stdio", "--data", data, "--principal", "pi"],
      request_timeout_ms: 10000,
      ping_ms: 500,
      reconnect: { initial_ms: 100, max_ms: 1000 },
      ...more,
    },
  });
  return { pi, onward };
}

test("call-person and make-safe on the sim board: results, once per invocation (also after the body restarts), timed", { skip, timeout: 180000 }, async (t) => {
  writeFileSync(
    config,
    JSON.stringify({
      version: 1,
      monitor: { quiet: true },
      agent: { principals: [{ name: "pi", subject: "agent:pi", uid: process.getuid!(), trust: "high" }] },
    }),
  );
  await startDaemon();
  const { pi, onward } = setUp();
  await pi.emitLifecycle("session_start");

  // Without grants the body refuses the signals: failed, with the reasons.
  const refused = await onward.run(CALL_PERSON, { text: "The agent is stuck." }, { invocationId: "inv-refused" });
  assert.ok(refused.ran);
  assert.equal(refused.result.kind, "failed", refused.result.message);
  assert.match(refused.result.message ?? "", /notify: refused \(no_grant/);
  assert.match(refused.result.message ?? "", /tone on [a-z0-9.]+: refused \(no_grant/);
  assert.match(refused.result.message ?? "", /light on gpio\.led: refused \(no_grant/);

  // An ordinary grant for each signal.
  for (const [cap, scope] of [["body.notify", "home"], ["audio.tone", "*"], ["gpio.pulse", "gpio.led"]]) {
    cli("grant", "add", "--subject", "agent:pi", "--capability", cap, "--scope", scope, "--reason", "onward recovery");
  }
  const text = "The agent on the workbench failed 5 times (529 overloaded) and stopped; please have a look.";
  const called = await onward.run(CALL_PERSON, { text }, { invocationId: "inv-call-1" });
  assert.ok(called.ran);
  t.diagnostic(`call-person: ${called.result.kind} in ${called.ms.toFixed(0)} ms: ${called.result.message}`);
  assert.equal(called.result.kind, "completed", called.result.message);
  assert.match(called.result.message ?? "", /notify: verified .*tone on [a-z0-9.]+: verified .*light on gpio\.led: verified/);
  const notified = events("body.notified").filter((e) => e.payload.message === text);
  assert.equal(notified.length, 1);
  assert.equal(notified[0].payload.attention, "high");
  assert.equal(notified[0].payload.by, "agent:pi");
  const proposed = events("action.proposed").find((e) => e.payload?.invocation?.idempotency_key === stepKey("inv-call-1", "notify"));
  assert.ok(proposed, "the notify's proposal carries the invocation's key");
  assert.match(proposed.payload.invocation.note, /rule body-recovery, episode episode-1, session session-1, invocation inv-call-1/);

  // The same invocation again: the recorded result, nothing done twice.
  const again = await onward.run(CALL_PERSON, { text }, { invocationId: "inv-call-1" });
  assert.ok(again.ran);
  assert.equal(again.result.kind, "completed", again.result.message);
  assert.match(again.result.message ?? "", /recorded at the first call/);
  assert.equal(events("body.notified").filter((e) => e.payload.message === text).length, 1);
  for (const step of ["notify", "tone", "light"]) assert.equal(proposals(stepKey("inv-call-1", step)), 1, step);

  // An aborted signal: cancelled, and nothing reaches the body.
  const ac = new AbortController();
  ac.abort(new Error("the user pressed escape"));
  const aborted = await onward.run(CALL_PERSON, { text: "never sent" }, { invocationId: "inv-aborted", signal: ac.signal });
  assert.ok(aborted.ran);
  assert.equal(aborted.result.kind, "cancelled");
  const abortedSafe = await onward.run(MAKE_SAFE, {}, { invocationId: "inv-aborted-safe", signal: ac.signal });
  assert.ok(abortedSafe.ran);
  assert.equal(abortedSafe.result.kind, "cancelled");
  assert.equal(events("body.notified").filter((e) => e.payload.message === "never sent").length, 0);
  assert.equal(proposals(stepKey("inv-aborted", "notify")), 0);
  assert.equal(estop().latched, false, "an aborted make-safe stops nothing");

  // Aborted while the body acts: the call is cancelled on the body (its
  // notifications/cancelled cancels the action the call runs, the reason
  // caller_cancelled, before the session ends), and the result is unknown,
  // since the body had been asked.
  const mid = new AbortController();
  const midRun = onward.run(CALL_PERSON, { text: "aborted while the light is on" }, { invocationId: "inv-mid", signal: mid.signal });
  await waitFor("the light's proposal", () => proposals(stepKey("inv-mid", "light")) === 1, 10000);
  mid.abort(new Error("the deadline passed"));
  const midResult = await midRun;
  assert.ok(midResult.ran);
  assert.equal(midResult.result.kind, "unknown", midResult.result.message);
  assert.match(midResult.result.message ?? "", /notify: verified/);
  const cancelledOnTheBody = await waitFor("the light cancelled on the body", () =>
    events("action.").find((e) => e.payload?.invocation?.idempotency_key === stepKey("inv-mid", "light") && e.event_type === "action.cancelled"),
  );
  t.diagnostic(`aborted mid-call: ${midResult.result.message}; on the body: ${JSON.stringify(cancelledOnTheBody.payload.result?.reason ?? cancelledOnTheBody.payload)}`);
  assert.equal(cancelledOnTheBody.payload.result?.reason, "caller_cancelled");

  // make-safe: a relay is on; the call trips the e-stop, and the body
  // reports it latched with every output read back at its safe level.
  cli("do", "gpio.set", "gpio.relay1", "state=on");
  const safe = await onward.run(MAKE_SAFE, {}, { invocationId: "inv-safe-1", failure: { kind: "crash_loop", text: "the agent crashed 5 times in 2 minutes" } });
  assert.ok(safe.ran);
  t.diagnostic(`make-safe: ${safe.result.kind} in ${safe.ms.toFixed(0)} ms from the call to the result: ${safe.result.message}`);
  console.log(`make-safe on the sim board: ${safe.result.kind} in ${safe.ms.toFixed(1)} ms from the call to the result: ${safe.result.message}`);
  assert.equal(safe.result.kind, "stopped", safe.result.message);
  assert.match(safe.result.message ?? "", /latched \(requested by agent:pi: crash_loop\)/);
  assert.match(safe.result.message ?? "", /RELAY1 low/);
  const st = estop();
  assert.equal(st.latched, true);
  assert.equal(st.why, "requested by agent:pi: crash_loop");
  const trips = events("estop.tripped");
  const rec = trips[trips.length - 1].payload;
  assert.equal(rec.all_safe, true);
  assert.equal(rec.key, stepKey("inv-safe-1", "make-safe"));
  assert.match(rec.note, /onward tobe-body.make-safe: rule body-recovery, episode episode-1, session session-1, invocation inv-safe-1/);
  for (const o of rec.outputs) assert.equal(o.read_back, o.safe, `${o.name} read back ${o.read_back}, safe ${o.safe}`);
  console.log(`  the body's record: latched, ${rec.outputs.length} outputs read back safe (${rec.outputs.map((o: any) => `${o.name} ${o.read_back}`).join(", ")}), safe ${(rec.latency_ns / 1e6).toFixed(3)} ms after the request reached the e-stop`);

  // A person resets it at the device; the body restarts; the same
  // invocations come again, from a pi that restarted too: nothing is
  // done twice, and the recorded results come back.
  cli("estop", "reset");
  const tripsBefore = estop().trips;
  await stopDaemon();
  await startDaemon();
  const fresh = setUp();
  await fresh.pi.emitLifecycle("session_start");
  const safeAgain = await fresh.onward.run(MAKE_SAFE, {}, { invocationId: "inv-safe-1" });
  assert.ok(safeAgain.ran);
  assert.equal(safeAgain.result.kind, "stopped", safeAgain.result.message);
  assert.match(safeAgain.result.message ?? "", /a repeat of invocation inv-safe-1: the body stopped once.*latched now: no, a person has reset it since/);
  assert.equal(estop().latched, false, "the repeat did not trip the e-stop the person reset");
  assert.equal(events("estop.tripped").length, trips.length, "no new trip was recorded");
  const callAgain = await fresh.onward.run(CALL_PERSON, { text }, { invocationId: "inv-call-1" });
  assert.ok(callAgain.ran);
  assert.equal(callAgain.result.kind, "completed", callAgain.result.message);
  assert.equal(events("body.notified").filter((e) => e.payload.message === text).length, 1);
  void tripsBefore;

  // The board's own LED as the light (as on a board with none wired):
  // light.blink on light.act, verified off afterwards.
  cli("grant", "add", "--subject", "agent:pi", "--capability", "light.blink", "--scope", "light.act", "--reason", "onward recovery");
  const own = setUp({ light_target: "light.act", tone: false }, "provider-led");
  await own.pi.emitLifecycle("session_start");
  const lit = await own.onward.run(CALL_PERSON, { text: "The board's LED calls." }, { invocationId: "inv-led" });
  assert.ok(lit.ran);
  assert.equal(lit.result.kind, "completed", lit.result.message);
  assert.match(lit.result.message ?? "", /light on light\.act: verified \(act read back low\)/);
  const blink = events("action.proposed").find((e) => e.payload?.invocation?.idempotency_key === stepKey("inv-led", "light"));
  assert.equal(blink?.payload?.invocation?.capability, "light.blink");
  assert.deepEqual(blink?.payload?.invocation?.params, { period_ms: "500", count: "6" });
});

test("a body whose daemon is down: unknown, with the stdio bridge's own words", { skip, timeout: 60000 }, async () => {
  await stopDaemon();
  const pi = new Pi();
  const onward = new Onward(pi);
  createProvider(pi, {
    dir: join(tmp, "provider2"),
    config: { command: [BIN, "stdio", "--data", data, "--principal", "pi"], request_timeout_ms: 1000, reconnect: { initial_ms: 100, max_ms: 400 } },
  });
  await pi.emitLifecycle("session_start");
  const r = await onward.run(MAKE_SAFE, {}, { invocationId: "inv-down" });
  assert.ok(r.ran);
  assert.equal(r.result.kind, "unknown");
  assert.match(r.result.message ?? "", /could not reach the body .*agent\.sock/);
});
