// What the tests against the real binary share: starting the body on the
// sim board, stopping a process, and waiting for a condition.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";

/** Waits until f gives something truthy (polling every 20 ms), or throws after ms. */
export async function waitFor<T>(what: string, f: () => T | undefined | false | Promise<T | undefined | false>, ms = 20000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Stops a process with SIGTERM and waits for it; nothing when it is gone. */
export async function stop(c: ChildProcess | undefined): Promise<void> {
  if (!c || c.exitCode !== null || c.signalCode !== null) return;
  const gone = new Promise((r) => c.once("exit", r));
  c.kill("SIGTERM");
  await gone;
}

/**
 * Starts `BIN run --board sim` with its data in data and its config file,
 * and waits until its agent socket is there and it says it started. A
 * daemon that exits with an error prints its log.
 */
export async function startBody(bin: string, data: string, config: string): Promise<ChildProcess> {
  const daemon = spawn(bin, ["run", "--board", "sim", "--data", data, "--config", config], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  daemon.stderr!.on("data", (b) => (log += b));
  daemon.on("exit", (code) => {
    if (code !== 0 && code !== null) console.error(`the daemon exited ${code}:\n${log}`);
  });
  await waitFor("the daemon's agent socket", () => existsSync(join(data, "agent.sock")) && log.includes("body started"));
  return daemon;
}
