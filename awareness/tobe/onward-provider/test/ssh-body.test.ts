// The provider as a user installs it: its command is ssh to the body,
// whose sshd runs the forced command `tobe-body stdio --principal pi` for
// the agent's key. Needs BODY_BIN, root and /usr/sbin/sshd, as the
// adapter's test through sshd; skipped by name without them.
import assert from "node:assert/strict";
import { execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { startBody, stop } from "../../body-adapter/test/body.ts";
import { sshdSkip, startSshd } from "../../body-adapter/test/sshd.ts";
import { CALL_PERSON, createProvider, MAKE_SAFE } from "../index.ts";
import { Onward, Pi } from "./onward.ts";

const BIN = process.env.BODY_BIN ?? "";
const skip = sshdSkip(BIN);
const tmp = mkdtempSync(join(tmpdir(), "onward-provider-ssh-"));
const data = join(tmp, "data");
const config = join(tmp, "config.json");
const children: ChildProcess[] = [];
after(async () => {
  for (const c of children.reverse()) await stop(c);
  rmSync(tmp, { recursive: true, force: true });
});

function cli(...args: string[]): string {
  return execFileSync(BIN, [...args, "--data", data, "--config", config], { encoding: "utf8" });
}

test("through a real sshd: call-person, then make-safe timed from the call to the result, once per invocation", { skip, timeout: 120000 }, async (t) => {
  const ssh = await startSshd(tmp, `exec ${BIN} stdio --data ${data} --principal pi`);
  children.push(ssh.sshd);
  writeFileSync(config, JSON.stringify({
    version: 1, monitor: { quiet: true },
    agent: { principals: [{ name: "pi", subject: "agent:pi", uid: 0, trust: "high" }] },
  }));
  children.push(await startBody(BIN, data, config));
  for (const [cap, scope] of [["body.notify", "home"], ["audio.tone", "*"], ["gpio.pulse", "gpio.led"]]) {
    cli("grant", "add", "--subject", "agent:pi", "--capability", cap, "--scope", scope);
  }

  const pi = new Pi();
  const onward = new Onward(pi);
  createProvider(pi, {
    dir: join(tmp, "provider"),
    config: { command: ssh.command, request_timeout_ms: 10000, ping_ms: 500, reconnect: { initial_ms: 100, max_ms: 1000 } },
  });
  await pi.emitLifecycle("session_start");

  const called = await onward.run(CALL_PERSON, { text: "Over ssh: the agent needs a person." }, { invocationId: "ssh-call" });
  assert.ok(called.ran);
  assert.equal(called.result.kind, "completed", called.result.message);
  t.diagnostic(`call-person over ssh: ${called.result.kind} in ${called.ms.toFixed(0)} ms`);

  cli("do", "gpio.set", "gpio.relay1", "state=on");
  const safe = await onward.run(MAKE_SAFE, {}, { invocationId: "ssh-safe", failure: { kind: "provider_error", text: "529" } });
  assert.ok(safe.ran);
  console.log(`make-safe over ssh on the sim board: ${safe.result.kind} in ${safe.ms.toFixed(1)} ms from the call to the result: ${safe.result.message}`);
  assert.equal(safe.result.kind, "stopped", safe.result.message);
  assert.match(safe.result.message ?? "", /RELAY1 low/);
  const st = JSON.parse(cli("estop", "status", "--json"));
  assert.equal(st.latched, true);
  assert.equal(st.why, "requested by agent:pi: provider_error");

  const again = await onward.run(MAKE_SAFE, {}, { invocationId: "ssh-safe" });
  assert.ok(again.ran);
  assert.equal(again.result.kind, "stopped");
  assert.match(again.result.message ?? "", /a repeat of invocation ssh-safe/);
  assert.equal(JSON.parse(cli("estop", "status", "--json")).trips, st.trips, "the repeat tripped nothing");
});
