// The deadman with the official TypeScript SDK's Client: an agent process
// (pulse-client.ts) asks for a long pulse of the LED, and while it runs the
// process is stopped (SIGSTOP), as a hung or suspended agent is. Nothing
// answers the body's pings then, and the body must end the session, cancel
// the pulse and leave the LED safe within its heartbeat and one ping's
// timeout (half the heartbeat) of the stop. What the body did is read as
// its administrator reads it: the ledger's records through the admin
// socket. Over `tobe-body stdio`, and through a real sshd with that forced
// command (root and /usr/sbin/sshd, else skipped by name).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { describe, test, type TestContext } from "node:test";
import { fileURLToPath } from "node:url";
import { bodyForTheseTests, HEARTBEAT_MS, noBin, sshSkip } from "./rig.ts";

const client = fileURLToPath(new URL("pulse-client.ts", import.meta.url));
const rig = bodyForTheseTests("deadman", (b) =>
  b.cli("grant", "add", "--subject", "agent:pi", "--capability", "gpio.pulse", "--scope", "gpio.led", "--reason", "the deadman test"));

async function frozenDuringPulse(t: TestContext, command: string[]): Promise<void> {
  const events = rig.body.follow("action.");
  // The agent as its own node process (the one running these tests, with
  // tsx to load TypeScript), its stderr here.
  const agent = spawn(process.execPath, ["--import", "tsx", client, ...command], { stdio: ["ignore", "pipe", "inherit"] });
  const exited = once(agent, "exit");
  try {
    const lines = createInterface({ input: agent.stdout! })[Symbol.asyncIterator]();
    assert.equal((await lines.next()).value, "connected");
    const running = await events.next("the pulse running", (e) =>
      e.event_type === "action.running" && e.payload.invocation?.target === "gpio.led" && !seenBefore(e));
    const id: string = running.payload.invocation.action_id;
    ours.add(id);

    const stoppedAt = Date.now();
    agent.kill("SIGSTOP");
    const ended = await events.next("the session's end", (e) => e.event_type === "action.session_ended" && (e.payload.cancelled ?? []).includes(id));
    const done = await events.next("the pulse's end", (e) => e.payload.invocation?.action_id === id &&
      ["action.cancelled", "action.failed", "action.succeeded", "action.compensated", "action.unknown"].includes(e.event_type));
    const endedIn = Date.parse(ended.occurred_at) - stoppedAt;
    const doneIn = Date.parse(done.occurred_at) - stoppedAt;
    t.diagnostic(`stopped the agent; the body ended its session (${ended.payload.why}) ${endedIn} ms later and recorded the pulse ${done.payload.status} ${doneIn} ms later: ${JSON.stringify(done.payload.result)}`);

    assert.ok(["unanswered_ping", "silent"].includes(ended.payload.why), `why ${ended.payload.why}`);
    const bound = HEARTBEAT_MS + HEARTBEAT_MS / 2; // the window, and one ping's timeout
    assert.ok(endedIn <= bound, `the session ended ${endedIn} ms after the stop, want within ${bound} ms`);
    assert.equal(done.event_type, "action.cancelled", JSON.stringify(done.payload));
    assert.ok(doneIn <= bound, `the pulse was cancelled ${doneIn} ms after the stop, want within ${bound} ms`);
    assert.equal(done.payload.result.reason, "session_ended");
    assert.deepEqual(done.payload.result.verification, { result: "verified", evidence: "led read back low" });
  } finally {
    agent.kill("SIGCONT");
    agent.kill("SIGKILL");
    await exited;
  }
}

// The actions of the tests before: each test waits for a pulse of its own.
const ours = new Set<string>();
function seenBefore(e: { payload: Record<string, any> }): boolean {
  return ours.has(e.payload.invocation?.action_id);
}

describe("an SDK client stopped while its pulse runs", () => {
  test("over tobe-body stdio: the session ends, the pulse is cancelled, the LED reads back low", { skip: noBin, timeout: 60000 },
    (t) => frozenDuringPulse(t, rig.body.stdio));
  test("through sshd's forced command: the session ends, the pulse is cancelled, the LED reads back low", { skip: sshSkip, timeout: 60000 },
    (t) => frozenDuringPulse(t, rig.sshCommand));
});
