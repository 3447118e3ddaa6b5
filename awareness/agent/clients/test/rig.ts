// What the tests here share: a body on the sim board with a short
// heartbeat and an agent principal for this user, the official SDK's
// client connected to it as a user connects one, and the ledger's events
// as the admin CLI follows them. Starting the body and sshd are the
// adapter's (body-adapter/test).
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { after, before } from "node:test";
import { startBody, stop } from "../../../tobe/body-adapter/test/body.ts";
import { sshdSkip, startSshd } from "../../../tobe/body-adapter/test/sshd.ts";

export const BIN = process.env.BODY_BIN ?? "";
export const noBin = BIN === "" ? "BODY_BIN is not set (make test-adapter sets it to the binary it builds)" : false;

/**
 * The body's agent.heartbeat_ms in these tests: it pings a session silent
 * for half of it and waits the other half for the answer.
 */
export const HEARTBEAT_MS = 1000;

/** Why the tests through sshd are skipped here, or false. */
export const sshSkip = sshdSkip(BIN);

/** The body of a file's tests, and the command that reaches it through sshd. */
export interface Rig {
  readonly body: Body;
  /** ssh's argv to the forced command `tobe-body stdio` (when not sshSkip). */
  readonly sshCommand: string[];
}

/**
 * A body on the sim board (startSimBody) for the tests of the file that
 * calls it, and, unless sshSkip, a real sshd on loopback whose forced
 * command is its bridge: started before those tests (setUp runs on the
 * body first), stopped after them.
 */
export function bodyForTheseTests(name: string, setUp?: (b: Body) => Promise<unknown>): Rig {
  let body: Body | undefined;
  let ssh: Awaited<ReturnType<typeof startSshd>> | undefined;
  before(async () => {
    if (noBin) return;
    body = await startSimBody(name);
    await setUp?.(body);
    if (!sshSkip) ssh = await startSshd(body.tmp, `exec ${body.stdio.join(" ")}`);
  });
  after(async () => {
    await stop(ssh?.sshd);
    await body?.close();
  });
  return {
    get body() { return body!; },
    get sshCommand() { return ssh!.command; },
  };
}

/** The principal every test's client is, as the forced command names it. */
export const PRINCIPAL = "pi";

/** A ledger event as `ledger events --json` prints it. */
export interface LedgerEvent {
  seq: number;
  event_type: string;
  channel_id?: string;
  occurred_at: string;
  payload: Record<string, any>;
}

export interface Body {
  data: string;
  /** The argv of `tobe-body stdio` for the principal. */
  stdio: string[];
  /**
   * Runs a client command as the local administrator (this user), its
   * stdout the result. Never synchronously: the clients of the test's own
   * process must go on answering the body's pings meanwhile.
   */
  cli(...args: string[]): Promise<string>;
  /** Follows the ledger's events of types (`ledger events --follow`). */
  follow(...types: string[]): Events;
  /** A directory of the test's own beside the body's. */
  tmp: string;
  close(): Promise<void>;
}

/**
 * Starts `tobe-body run --board sim` in a new directory, with
 * agent.heartbeat_ms at HEARTBEAT_MS and this user as the agent
 * principal PRINCIPAL (subject agent:pi) at high trust.
 */
export async function startSimBody(name: string): Promise<Body> {
  const tmp = mkdtempSync(join(tmpdir(), `agent-clients-${name}-`));
  const data = join(tmp, "data");
  const config = join(tmp, "config.json");
  writeFileSync(config, JSON.stringify({
    version: 1,
    monitor: { quiet: true },
    agent: { heartbeat_ms: HEARTBEAT_MS, principals: [{ name: PRINCIPAL, subject: "agent:pi", uid: process.getuid!(), trust: "high" }] },
  }));
  const daemon = await startBody(BIN, data, config);
  const followers: ChildProcess[] = [];
  return {
    data,
    tmp,
    stdio: [BIN, "stdio", "--data", data, "--principal", PRINCIPAL],
    cli: async (...args) => (await run(BIN, [...args, "--data", data, "--config", config], { encoding: "utf8" })).stdout,
    follow(...types) {
      const c = spawn(BIN, ["ledger", "events", "--follow", "--json", ...types.flatMap((t) => ["--type", t]), "--data", data],
        { stdio: ["ignore", "pipe", "inherit"] });
      followers.push(c);
      return new Events(c);
    },
    async close() {
      for (const c of followers) await stop(c);
      await stop(daemon);
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}

const run = promisify(execFile);

/** The events a `ledger events --follow --json` prints, as they come. */
export class Events {
  readonly seen: LedgerEvent[] = [];
  private waiters: Array<() => void> = [];

  constructor(c: ChildProcess) {
    createInterface({ input: c.stdout! }).on("line", (line) => {
      this.seen.push(JSON.parse(line));
      for (const w of this.waiters.splice(0)) w();
    });
  }

  /** The first event f matches, when it comes; throws after ms. */
  async next(what: string, f: (e: LedgerEvent) => boolean, ms = 20000): Promise<LedgerEvent> {
    const end = Date.now() + ms;
    for (;;) {
      const e = this.seen.find(f);
      if (e) return e;
      const left = end - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}; seen: ${this.seen.map((e) => e.event_type).join(", ")}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }
}

/**
 * The official SDK's client as it comes (no options), connected through
 * command: `tobe-body stdio`, or ssh to a forced command.
 */
export async function connect(command: string[]): Promise<{ client: Client; closed: () => boolean }> {
  const client = new Client({ name: "tobe-body-agent-clients", version: "0.1.0" });
  let closed = false;
  client.onclose = () => (closed = true);
  await client.connect(new StdioClientTransport({ command: command[0], args: command.slice(1) }));
  return { client, closed: () => closed };
}

/** A tool's result text as JSON: {status, data} or {status, error}. */
export function resultOf(r: unknown): any {
  const content = (r as { content: Array<{ type: string; text: string }> }).content;
  return JSON.parse(content[0].text);
}

/** Waits ms without a word to the body: what the tests here are about. */
export function idle(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
