// The adapter as a user installs it: its command is ssh to the body, whose
// sshd (Debian's OpenSSH, started here on loopback with a throwaway host
// key) runs the forced command `tobe-body stdio --principal pi` for the
// agent's key. Needs BODY_BIN (make test-adapter sets it), root (sshd logs
// in as this user) and /usr/sbin/sshd (scripts/deps.sh installs it);
// skipped by name without them.
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { createAdapter } from "../ADAPTER.ts";
import type { EnvAdapter, Observation } from "../types.ts";
import { startBody, stop, waitFor } from "./body.ts";
import { sshdSkip, startSshd } from "./sshd.ts";

const BIN = process.env.BODY_BIN ?? "";
const skip = sshdSkip(BIN);

const tmp = mkdtempSync(join(tmpdir(), "body-adapter-ssh-"));
const data = join(tmp, "data");
const children: ChildProcess[] = [];
const adapters: EnvAdapter[] = [];
let daemon: ChildProcess | undefined;
after(async () => {
  await Promise.all(adapters.map((a) => a.stop()));
  await stop(daemon);
  for (const c of children) await stop(c);
  rmSync(tmp, { recursive: true, force: true });
});

async function startDaemon(config: string): Promise<void> {
  daemon = await startBody(BIN, data, config);
}

test("through a real sshd: the adapter starts, calls, hears the body, and survives the daemon restarting", { skip, timeout: 120000 }, async () => {
  const ssh = await startSshd(tmp, `exec ${BIN} stdio --data ${data} --principal pi`);
  children.push(ssh.sshd);

  const config = join(tmp, "config.json");
  writeFileSync(config, JSON.stringify({
    version: 1, monitor: { quiet: true },
    agent: { principals: [{ name: "pi", subject: "agent:pi", uid: 0, trust: "low" }] },
  }));
  await startDaemon(config);

  const a = createAdapter({
    dir: join(tmp, "adapter"),
    config: {
      command: ssh.command,
      request_timeout_ms: 10000, ping_ms: 500, reconnect: { initial_ms: 100, max_ms: 1000 },
    },
  });
  adapters.push(a);
  const started = await a.start();
  assert.equal(JSON.parse(started.content).status, "success", started.content);
  const status = JSON.parse((await a.observe({ call_id: "s1", action: "body_status" })).content);
  assert.equal(status.status, "success");
  assert.equal(status.data.board, "sim");

  const seen: Observation[] = [];
  a.subscribe((o) => seen.push(o));
  assert.equal(JSON.parse((await a.interact({ call_id: "t1", action: "estop_trip", params: {} })).content).status, "success");
  const tripped = await waitFor("the trip's observation over ssh", () => seen.find((o) => String(o.content).startsWith("E-stop tripped")));
  assert.equal(tripped.attention, "max");

  await stop(daemon);
  await waitFor("degraded", () => a.health().status === "degraded");
  await startDaemon(config);
  await waitFor("online again", () => a.health().status === "online");
  const again = JSON.parse((await a.observe({ call_id: "s2", action: "body_status" })).content);
  assert.equal(again.status, "success");
  assert.notEqual(again.data.pid, status.data.pid);
  await a.stop();
});
