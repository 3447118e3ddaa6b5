// The adapter as a user installs it: its command is ssh to the body, whose
// sshd (Debian's OpenSSH, started here on loopback with a throwaway host
// key) runs the forced command `tobe-body stdio --principal pi` for the
// agent's key. Needs BODY_BIN (make test-adapter sets it), root (sshd logs
// in as this user) and /usr/sbin/sshd (scripts/deps.sh installs it);
// skipped by name without them.
import assert from "node:assert/strict";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { createAdapter } from "../ADAPTER.ts";
import type { EnvAdapter, Observation } from "../types.ts";

const BIN = process.env.BODY_BIN ?? "";
const skip =
  BIN === "" ? "BODY_BIN is not set (make test-adapter sets it)" :
  process.getuid?.() !== 0 ? "sshd needs root here (it logs in as this user with a forced command)" :
  !existsSync("/usr/sbin/sshd") ? "no /usr/sbin/sshd (scripts/deps.sh installs openssh-server)" : false;

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

async function stop(c: ChildProcess | undefined): Promise<void> {
  if (!c || c.exitCode !== null || c.signalCode !== null) return;
  const gone = new Promise((r) => c.once("exit", r));
  c.kill("SIGTERM");
  await gone;
}

async function waitFor<T>(what: string, f: () => T | undefined | false, ms = 20000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

async function startDaemon(config: string): Promise<void> {
  let log = "";
  daemon = spawn(BIN, ["run", "--board", "sim", "--data", data, "--config", config], { stdio: ["ignore", "ignore", "pipe"] });
  daemon.stderr!.on("data", (b) => (log += b));
  await waitFor("the daemon", () => existsSync(join(data, "agent.sock")) && log.includes("body started"));
}

test("through a real sshd: the adapter starts, calls, hears the body, and survives the daemon restarting", { skip, timeout: 120000 }, async () => {
  for (const k of ["host", "client"]) execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", k, "-f", join(tmp, k)]);
  const forced = `exec ${BIN} stdio --data ${data} --principal pi`;
  writeFileSync(join(tmp, "authorized_keys"), `restrict,command="${forced}" ${readFileSync(join(tmp, "client.pub"), "utf8")}`, { mode: 0o600 });
  const port = await freePort();
  writeFileSync(join(tmp, "sshd_config"), [
    `Port ${port}`, "ListenAddress 127.0.0.1", `HostKey ${join(tmp, "host")}`, `AuthorizedKeysFile ${join(tmp, "authorized_keys")}`,
    "PidFile none", "StrictModes no", "UsePAM no", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
    "PermitRootLogin prohibit-password", "LogLevel ERROR", "",
  ].join("\n"));
  mkdirSync("/run/sshd", { recursive: true });
  const sshd = spawn("/usr/sbin/sshd", ["-D", "-e", "-f", join(tmp, "sshd_config")], { stdio: "ignore" });
  children.push(sshd);

  const config = join(tmp, "config.json");
  writeFileSync(config, JSON.stringify({
    version: 1, monitor: { quiet: true },
    agent: { principals: [{ name: "pi", subject: "agent:pi", uid: 0, trust: "low" }] },
  }));
  await startDaemon(config);

  const a = createAdapter({
    dir: join(tmp, "adapter"),
    config: {
      command: ["ssh", "-T", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
        "-o", "LogLevel=ERROR", "-i", join(tmp, "client"), "-p", String(port), "root@127.0.0.1"],
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
  const tripped = await waitFor("the trip's observation over ssh", () => seen.find((o) => o.content.startsWith("E-stop tripped")));
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
