// One short MCP session with the body for one onward action: spawned,
// initialized, kept alive by pings while the action runs, and ended when
// it is done. A recovery action runs when the agent's own link may be the
// thing that failed, so it never borrows the adapter's session: it makes
// its own, with the same command and principal.

import { randomUUID } from "node:crypto";
import { abortReason, isObject, Link, LinkError, toolContent } from "./link.ts";
import type { LinkConfig } from "./link.ts";

export const PROTOCOL_VERSION = "2025-06-18";
export const PROVIDER_VERSION = "0.1.0";
/** How long ending a session waits after closing stdin, and after SIGTERM. */
export const END_GRACE_MS = 1000;

export type SessionConfig = LinkConfig;

/** The body's answer to a tool call: its own result object. */
export type ToolAnswer =
  | { status: "success"; data: unknown }
  | { status: "error"; error: { reason: string; detail: string } };

/** Why a session could not be had. */
export class Unreachable extends Error {
  /** True when the signal ended the attempts: nothing was asked of the body. */
  readonly cancelled: boolean;
  constructor(message: string, cancelled: boolean) {
    super(message);
    this.cancelled = cancelled;
  }
}

export class BodySession {
  private readonly link: Link;
  private readonly config: SessionConfig;
  private pingTimer: ReturnType<typeof setInterval> | null = null;
  private pinging = false;
  /** The body's tools by name, with their input schemas. */
  readonly tools = new Map<string, Record<string, unknown>>();
  private closedDetail: string | null = null;

  private constructor(link: Link, config: SessionConfig) {
    this.link = link;
    this.config = config;
  }

  /**
   * Opens a session: spawns the command and shakes hands, again after a
   * failure with backoff (config.reconnect) as long as the next attempt
   * would start within request_timeout_ms of the first. Throws Unreachable
   * saying why; with cancelled set when the signal ended the attempts.
   */
  static async open(config: SessionConfig, signal: AbortSignal): Promise<BodySession> {
    const start = Date.now();
    const { initial_ms, max_ms } = config.reconnect;
    const tried: string[] = [];
    for (let attempt = 0; ; attempt++) {
      if (signal.aborted) throw new Unreachable(`gave up reaching the body: ${abortReason(signal)}`, true);
      let closed = "";
      const link = new Link(config.command, {
        onNotification: () => {},
        onClose: (detail) => {
          closed = detail;
        },
      });
      const s = new BodySession(link, config);
      try {
        await s.handshake(signal);
        return s;
      } catch (err) {
        const e = err instanceof LinkError ? err : new LinkError("failed", String((err as Error)?.message ?? err));
        await s.end(`reaching the body failed: ${e.detail}`);
        const stderr = link.stderrTail();
        const how = [link.exitDetail, stderr.length > 0 ? `stderr: ${stderr.slice(-3).join(" | ")}` : ""].filter((x) => x);
        if (how.length === 0 && closed && !e.detail.includes(closed)) how.push(closed);
        tried.push(e.detail + (how.length > 0 ? ` (${how.join("; ")})` : ""));
        if (e.reason === "cancelled" || signal.aborted) {
          throw new Unreachable(`gave up reaching the body: ${abortReason(signal)}`, true);
        }
        if (e.reason === "protocol_mismatch") throw new Unreachable(e.detail, false);
      }
      const bound = Math.min(max_ms, initial_ms * 2 ** Math.min(attempt, 30));
      const delay = Math.round(initial_ms + Math.random() * (bound - initial_ms));
      if (Date.now() + delay - start > config.request_timeout_ms) {
        throw new Unreachable(
          `could not reach the body with ${config.command[0]} in ${tried.length} attempt(s) over ${Date.now() - start} ms: ${tried[tried.length - 1]}`,
          false,
        );
      }
      await sleep(delay, signal);
    }
  }

  private async handshake(signal: AbortSignal): Promise<void> {
    const timeout = this.config.request_timeout_ms;
    const init = await this.link.request(
      "initialize",
      {
        protocolVersion: PROTOCOL_VERSION,
        capabilities: {},
        clientInfo: { name: "tobe-body-onward", version: PROVIDER_VERSION },
      },
      timeout,
      signal,
    );
    if (!isObject(init) || init.protocolVersion !== PROTOCOL_VERSION) {
      const got = isObject(init) ? String(init.protocolVersion) : "no result";
      throw new LinkError("protocol_mismatch", `the body speaks MCP ${got}, this provider ${PROTOCOL_VERSION}`);
    }
    this.link.notify("notifications/initialized");
    this.startHeartbeat();
    let cursor: string | undefined;
    for (let page = 0; page < 32; page++) {
      const res = await this.link.request("tools/list", cursor ? { cursor } : {}, timeout, signal);
      if (!isObject(res) || !Array.isArray(res.tools)) throw new LinkError("bad_response", "tools/list has no tools");
      for (const t of res.tools) {
        if (isObject(t) && typeof t.name === "string" && !this.tools.has(t.name)) {
          this.tools.set(t.name, isObject(t.inputSchema) ? t.inputSchema : {});
        }
      }
      cursor = typeof res.nextCursor === "string" && res.nextCursor !== "" ? res.nextCursor : undefined;
      if (!cursor) break;
    }
  }

  /**
   * Calls one of the body's tools. Resolves to the body's answer; rejects
   * with a LinkError when there is none (timeout, link_lost, cancelled:
   * the tool may have run).
   */
  async call(name: string, args: Record<string, unknown>, signal: AbortSignal): Promise<ToolAnswer> {
    const res = await this.link.request(
      "tools/call",
      { name, arguments: args, _meta: { "tobe/call_id": `onward-${randomUUID()}` } },
      this.config.request_timeout_ms,
      signal,
    );
    const parsed = JSON.parse(toolContent(res)) as Record<string, unknown>;
    if (parsed.status === "success") return { status: "success", data: parsed.data };
    const e = isObject(parsed.error) ? parsed.error : {};
    return {
      status: "error",
      error: {
        reason: typeof e.reason === "string" ? e.reason : "failed",
        detail: typeof e.detail === "string" ? e.detail : "",
      },
    };
  }

  /** Why the session closed by itself, or null while it is open. */
  get closed(): string | null {
    return this.closedDetail ?? (this.link.closed ? "the link closed" : null);
  }

  /**
   * Ends the session. The body ends a session whose link closed and
   * cancels the actions it still runs, so ending is also how a call that
   * was given up is cancelled on the body.
   */
  async end(detail = "the action is done"): Promise<void> {
    this.closedDetail ??= detail;
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.pingTimer = null;
    await this.link.end(END_GRACE_MS, detail);
  }

  private startHeartbeat(): void {
    this.pingTimer = setInterval(() => {
      if (this.pinging || this.link.closed) return;
      this.pinging = true;
      this.link
        .request("ping", undefined, this.config.request_timeout_ms)
        .catch(() => undefined) // a lost link fails the call it carries
        .finally(() => {
          this.pinging = false;
        });
    }, this.config.ping_ms);
  }
}

/** Waits ms, or until signal aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
