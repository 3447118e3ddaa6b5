// The official TypeScript SDK's Client, as it comes, stays connected to a
// body while it idles: the body pings it when it has been silent for half
// of agent.heartbeat_ms, the SDK answers on its own, and a tool call after
// twenty heartbeats of silence (and after a minute of it) is served on the
// same session. Over `tobe-body stdio` as a forced command runs it, and
// through a real sshd with that forced command (root and /usr/sbin/sshd,
// else skipped by name). The long idles run side by side.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { bodyForTheseTests, connect, HEARTBEAT_MS, idle, noBin, resultOf, sshSkip } from "./rig.ts";

const rig = bodyForTheseTests("idle");

/** Connects through command, idles for ms, then calls self_state. */
async function idleThenCall(command: () => string[], ms: number): Promise<void> {
  const { client, closed } = await connect(command());
  try {
    const before = resultOf(await client.callTool({ name: "self_state", arguments: {} }));
    assert.equal(before.status, "success");
    await idle(ms);
    assert.equal(closed(), false, "the body ended the session while the client idled");
    const self = resultOf(await client.callTool({ name: "self_state", arguments: {} }));
    assert.equal(self.status, "success", JSON.stringify(self));
    assert.ok(self.data.self.level, "self_state names the body's level");
  } finally {
    await client.close();
  }
  const ended = (await rig.body.cli("ledger", "events", "--json", "--type", "action.session_ended"))
    .split("\n").filter((l) => l.includes("unanswered_ping"));
  assert.deepEqual(ended, [], "no session was lost to an unanswered ping");
}

describe("the SDK's Client idles on the body", { concurrency: true }, () => {
  test(`over tobe-body stdio: ${20 * HEARTBEAT_MS} ms (20 heartbeats) idle, then self_state`, { skip: noBin, timeout: 60000 },
    () => idleThenCall(() => rig.body.stdio, 20 * HEARTBEAT_MS));
  test(`through sshd's forced command: ${20 * HEARTBEAT_MS} ms (20 heartbeats) idle, then self_state`, { skip: sshSkip, timeout: 60000 },
    () => idleThenCall(() => rig.sshCommand, 20 * HEARTBEAT_MS));
  test("over tobe-body stdio: a minute idle, then self_state", { skip: noBin, timeout: 120000 },
    () => idleThenCall(() => rig.body.stdio, 60000));
  test("through sshd's forced command: a minute idle, then self_state", { skip: sshSkip, timeout: 120000 },
    () => idleThenCall(() => rig.sshCommand, 60000));
});
