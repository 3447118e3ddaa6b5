// One MCP session with the body: a spawned command whose stdin and stdout
// carry newline-delimited JSON-RPC 2.0, one JSON object a line. The
// command's stderr is the body's (or ssh's) log: its last lines are kept
// for health, never parsed. Node built-ins only. The onward provider
// (../onward-provider) shares this file through a symbolic link.

import { spawn } from "node:child_process";
import { copyFileSync, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ChildProcessWithoutNullStreams } from "node:child_process";

/**
 * A line longer than this (bytes, without its newline) is dropped. A piece
 * of evidence (get_evidence) comes whole in one line: at most 16 MiB of
 * bytes, as base64 with the JSON around it.
 */
export const MAX_LINE_BYTES = 32 * 1024 * 1024;
const STDERR_LINES = 20;
const STDERR_LINE_CHARS = 500;

/** Why a request failed, as a result's error reason and detail. */
export class LinkError extends Error {
  readonly reason: string;
  readonly detail: string;
  constructor(reason: string, detail: string) {
    super(`${reason}: ${detail}`);
    this.reason = reason;
    this.detail = detail;
  }
}

export interface LinkHandlers {
  /** A notification from the body (a message with a method and no id). */
  onNotification(method: string, params: unknown): void;
  /** The session ended: the command exited, or its stdout ended. Once. */
  onClose(detail: string): void;
}

interface Pending {
  method: string;
  resolve(result: unknown): void;
  reject(err: LinkError): void;
  timer: ReturnType<typeof setTimeout>;
}

/**
 * Splits a byte stream on '\n' into lines of at most max bytes; a longer
 * line is dropped whole (up to its newline) and counted. Works on bytes so
 * a multi-byte character split across chunks is never mangled.
 */
export class LineSplitter {
  private parts: Buffer[] = [];
  private size = 0;
  private skipping = false;
  dropped = 0;
  private readonly max: number;
  private readonly onLine: (line: string) => void;

  constructor(max: number, onLine: (line: string) => void) {
    this.max = max;
    this.onLine = onLine;
  }

  push(chunk: Buffer): void {
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(0x0a, start);
      const end = nl === -1 ? chunk.length : nl;
      if (!this.skipping) {
        if (this.size + (end - start) > this.max) {
          this.skipping = true;
          this.parts = [];
          this.size = 0;
        } else if (end > start) {
          this.parts.push(chunk.subarray(start, end));
          this.size += end - start;
        }
      }
      if (nl === -1) return;
      if (this.skipping) {
        this.skipping = false;
        this.dropped++;
      } else {
        const line = Buffer.concat(this.parts, this.size).toString("utf8");
        this.parts = [];
        this.size = 0;
        this.onLine(line);
      }
      start = nl + 1;
    }
  }
}

/**
 * Reads dir's config.json, made from config.default.json on first use
 * (when the folder is writable; otherwise the defaults are read as they
 * are); undefined when neither is there. Throws on a file that is not a
 * JSON object. The adapter and the onward provider read their configs
 * alike.
 */
export function readConfigFile(dir: string): Record<string, unknown> | undefined {
  const file = join(dir, "config.json");
  const defaults = join(dir, "config.default.json");
  const fromFile = readJSON(file);
  if (fromFile !== undefined) return fromFile;
  const fromDefaults = readJSON(defaults);
  if (fromDefaults !== undefined) {
    try {
      copyFileSync(defaults, file);
    } catch {
      // A read-only folder: run from the defaults.
    }
  }
  return fromDefaults;
}

function readJSON(path: string): Record<string, unknown> | undefined {
  if (!existsSync(path)) return undefined;
  const value: unknown = JSON.parse(readFileSync(path, "utf8"));
  if (!isObject(value)) throw new TypeError(`${path}: the config is not a JSON object`);
  return value;
}

/** How to reach the body: the keys the adapter's and the provider's configs share. */
export interface LinkConfig {
  command: string[];
  request_timeout_ms: number;
  ping_ms: number;
  reconnect: { initial_ms: number; max_ms: number };
}

/**
 * Reads the shared keys from a config's layers, defaults first (reconnect
 * is merged key by key); bad throws naming a key; min bounds the numbers.
 */
export function readLinkConfig(
  layers: Array<Record<string, unknown> | undefined>,
  bad: (key: string, want: string) => never,
  min: { request_timeout_ms: number; ping_ms: number; reconnect: number },
): LinkConfig {
  const merged: Record<string, unknown> = Object.assign({}, ...layers);
  const reconnect: Record<string, unknown> = Object.assign({}, ...layers.map((l) => (isObject(l?.reconnect) ? l.reconnect : {})));
  const int = (v: unknown, key: string, least: number): number =>
    typeof v === "number" && Number.isInteger(v) && v >= least ? v : bad(key, `an integer >= ${least}`);
  const c: LinkConfig = {
    command:
      Array.isArray(merged.command) &&
      merged.command.length > 0 &&
      merged.command.every((a) => typeof a === "string" && a !== "")
        ? [...(merged.command as string[])]
        : bad("command", "a non-empty array of non-empty strings"),
    request_timeout_ms: int(merged.request_timeout_ms, "request_timeout_ms", min.request_timeout_ms),
    ping_ms: int(merged.ping_ms, "ping_ms", min.ping_ms),
    reconnect: {
      initial_ms: int(reconnect.initial_ms, "reconnect.initial_ms", min.reconnect),
      max_ms: int(reconnect.max_ms, "reconnect.max_ms", min.reconnect),
    },
  };
  if (c.reconnect.max_ms < c.reconnect.initial_ms) bad("reconnect.max_ms", "at least reconnect.initial_ms");
  return c;
}

/** What an aborted signal says, as text. */
export function abortReason(signal: AbortSignal): string {
  const r: unknown = signal.reason;
  if (r instanceof Error) return r.name === "TimeoutError" ? `the deadline passed (${r.message})` : r.message;
  return r === undefined ? "aborted" : String(r);
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function errorContent(reason: string, detail: string): string {
  return JSON.stringify({ status: "error", error: { reason, detail } });
}

/**
 * The text of a tools/call result: the body's own result object
 * ({"status":"success",...} or {"status":"error",...}) as it was sent, or
 * an error object saying what was wrong with the result.
 */
export function toolContent(result: unknown): string {
  if (!isObject(result) || !Array.isArray(result.content)) {
    return errorContent("bad_response", "the body's tools/call result has no content");
  }
  const text = result.content.find((c: unknown) => isObject(c) && c.type === "text" && typeof c.text === "string") as
    | { text: string }
    | undefined;
  if (!text) return errorContent("bad_response", "the body's tools/call result has no text content");
  let parsed: unknown;
  try {
    parsed = JSON.parse(text.text);
  } catch {
    parsed = undefined;
  }
  if (isObject(parsed) && (parsed.status === "success" || parsed.status === "error")) {
    // The body's own result: handed on exactly as it was sent.
    return text.text;
  }
  if (result.isError === true) return errorContent("failed", text.text.slice(0, 2000));
  return errorContent("bad_response", "the body's tools/call text is not a result object");
}

/** One spawned command and the JSON-RPC session over its stdio. */
export class Link {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly handlers: LinkHandlers;
  private readonly pending = new Map<number, Pending>();
  private readonly stdout: LineSplitter;
  private readonly stderrLines: string[] = [];
  private stderrPartial = "";
  private nextId = 1;
  private closedDetail: string | null = null;
  /** Malformed lines (not JSON, or not JSON-RPC) seen and ignored. */
  malformed = 0;
  readonly exited: Promise<void>;
  private exitedFlag = false;
  private processExited = false;
  /** How the command ended, once it has; null while it runs. */
  exitDetail: string | null = null;
  private ending: Promise<void> | undefined;

  constructor(command: readonly string[], handlers: LinkHandlers) {
    this.handlers = handlers;
    this.stdout = new LineSplitter(MAX_LINE_BYTES, (line) => this.onLine(line));
    this.child = spawn(command[0], command.slice(1), {
      stdio: ["pipe", "pipe", "pipe"],
      windowsHide: true,
    });
    let exitedResolve!: () => void;
    this.exited = new Promise<void>((resolve) => {
      exitedResolve = resolve;
    });
    this.child.on("error", (err: NodeJS.ErrnoException) => {
      // A spawn failure (ENOENT, EACCES) emits 'error', no 'exit', then
      // 'close' once its pipes are closed.
      this.close(`could not run ${command[0]}: ${err.message}`);
    });
    // 'close' comes after 'exit', once the command's stdio is closed too:
    // only then is nothing of it left.
    this.child.on("close", () => {
      this.exitedFlag = true;
      this.child.stdin.destroy();
      // The handles' own close callbacks run on the next turn of the loop.
      setImmediate(exitedResolve);
    });
    this.child.on("exit", (code, signal) => {
      this.processExited = true;
      this.exitDetail = signal ? `the command ended by ${signal}` : `the command exited with code ${code}`;
      this.close(this.exitDetail);
    });
    // Writes after the far end went away fail with EPIPE: that is a close.
    this.child.stdin.on("error", (err) => this.close(`writing to the command failed: ${err.message}`));
    this.child.stdout.on("data", (chunk: Buffer) => this.stdout.push(chunk));
    this.child.stdout.on("end", () => this.close("the command's output ended"));
    this.child.stdout.on("error", () => this.close("reading the command's output failed"));
    this.child.stderr.setEncoding("utf8");
    this.child.stderr.on("data", (chunk: string) => this.onStderr(chunk));
    this.child.stderr.on("error", () => {});
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get closed(): boolean {
    return this.closedDetail !== null;
  }

  get hasExited(): boolean {
    return this.exitedFlag;
  }

  /** Lines over MAX_LINE_BYTES dropped so far. */
  get droppedLines(): number {
    return this.stdout.dropped;
  }

  /** The command's last stderr lines, oldest first. */
  stderrTail(): string[] {
    const tail = this.stderrLines.slice();
    if (this.stderrPartial) tail.push(this.stderrPartial.slice(0, STDERR_LINE_CHARS));
    return tail;
  }

  /**
   * Sends a request; resolves to its result, rejects with a LinkError. An
   * aborted signal gives up on it (reason cancelled) and tells the body,
   * as a timeout does; one aborted before the call sends nothing.
   */
  request(method: string, params: unknown, timeoutMs: number, signal?: AbortSignal): Promise<unknown> {
    if (this.closedDetail !== null) {
      return Promise.reject(new LinkError("link_lost", this.closedDetail));
    }
    if (signal?.aborted) {
      return Promise.reject(new LinkError("cancelled", `${method} was not sent: ${abortReason(signal)}`));
    }
    const id = this.nextId++;
    return new Promise<unknown>((resolve, reject) => {
      const giveUp = (reason: string, err: LinkError): void => {
        const p = this.pending.get(id);
        if (!p) return;
        this.pending.delete(id);
        clearTimeout(p.timer);
        signal?.removeEventListener("abort", onAbort);
        // Tell the body to stop working on it; it may have acted already.
        this.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: id, reason } });
        reject(err);
      };
      const onAbort = (): void =>
        giveUp("aborted", new LinkError("cancelled", `${method} was cancelled while the body had it: ${abortReason(signal!)}`));
      const timer = setTimeout(
        () => giveUp("timeout", new LinkError("timeout", `no answer to ${method} from the body in ${timeoutMs} ms`)),
        timeoutMs,
      );
      const settle = <T,>(f: (v: T) => void) => (v: T): void => {
        signal?.removeEventListener("abort", onAbort);
        f(v);
      };
      this.pending.set(id, { method, resolve: settle(resolve), reject: settle(reject), timer });
      signal?.addEventListener("abort", onAbort, { once: true });
      const msg: Record<string, unknown> = { jsonrpc: "2.0", id, method };
      if (params !== undefined) msg.params = params;
      this.send(msg);
    });
  }

  notify(method: string, params?: unknown): void {
    const msg: Record<string, unknown> = { jsonrpc: "2.0", method };
    if (params !== undefined) msg.params = params;
    this.send(msg);
  }

  /**
   * Ends the command: closes its stdin, then SIGTERM after graceMs, then
   * SIGKILL after graceMs more. Resolves when it has exited.
   */
  end(graceMs: number, detail = "closed by the adapter"): Promise<void> {
    this.ending ??= this.doEnd(graceMs, detail);
    return this.ending;
  }

  private async doEnd(graceMs: number, detail: string): Promise<void> {
    this.close(detail);
    if (this.exitedFlag) return;
    try {
      this.child.stdin.end();
    } catch {
      // Already destroyed.
    }
    if (await this.waitExit(graceMs)) return;
    if (!this.processExited) this.child.kill("SIGTERM");
    if (await this.waitExit(graceMs)) return;
    if (!this.processExited) this.child.kill("SIGKILL");
    if (await this.waitExit(graceMs)) return;
    // Exited, but something else holds its stdio open: let go of it.
    this.child.stdout.destroy();
    this.child.stderr.destroy();
    this.child.stdin.destroy();
    await this.exited;
  }

  private waitExit(ms: number): Promise<boolean> {
    if (this.exitedFlag) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), ms);
      this.exited.then(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  private send(msg: Record<string, unknown>): void {
    if (this.closedDetail !== null || !this.child.stdin.writable) return;
    try {
      this.child.stdin.write(JSON.stringify(msg) + "\n");
    } catch (err) {
      this.close(`writing to the command failed: ${(err as Error).message}`);
    }
  }

  private close(detail: string): void {
    if (this.closedDetail !== null) return;
    this.closedDetail = detail;
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      this.pending.delete(id);
      p.reject(new LinkError("link_lost", `the link to the body closed during ${p.method}: ${detail}`));
    }
    // A command whose output ended but which still runs is ended too, so a
    // reconnect never leaves it behind.
    if (!this.exitedFlag) {
      try {
        this.child.stdin.end();
      } catch {
        // Already destroyed.
      }
    }
    this.handlers.onClose(detail);
  }

  private onStderr(chunk: string): void {
    const text = this.stderrPartial + chunk;
    const lines = text.split("\n");
    this.stderrPartial = (lines.pop() ?? "").slice(-STDERR_LINE_CHARS * 4);
    for (const raw of lines) {
      const line = raw.replace(/\r$/, "").slice(0, STDERR_LINE_CHARS);
      if (!line) continue;
      this.stderrLines.push(line);
      if (this.stderrLines.length > STDERR_LINES) this.stderrLines.shift();
    }
  }

  private onLine(raw: string): void {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line.trim() === "") return;
    let msg: unknown;
    try {
      msg = JSON.parse(line);
    } catch {
      this.malformed++;
      return;
    }
    if (typeof msg !== "object" || msg === null || Array.isArray(msg)) {
      this.malformed++;
      return;
    }
    const m = msg as Record<string, unknown>;
    const hasId = typeof m.id === "number" || typeof m.id === "string";
    if (typeof m.method === "string") {
      if (hasId) {
        this.onServerRequest(m.id as number | string, m.method);
      } else {
        try {
          this.handlers.onNotification(m.method, m.params);
        } catch {
          // A handler's failure is not the protocol's.
        }
      }
      return;
    }
    if (!hasId) {
      this.malformed++;
      return;
    }
    const p = this.pending.get(m.id as number);
    if (!p) return; // Late (timed out) or not ours.
    this.pending.delete(m.id as number);
    clearTimeout(p.timer);
    if (m.error !== undefined) {
      const e = (typeof m.error === "object" && m.error !== null ? m.error : {}) as Record<string, unknown>;
      const code = typeof e.code === "number" ? e.code : 0;
      const message = typeof e.message === "string" ? e.message : "error without a message";
      const reason = code === -32602 ? "invalid_params" : code === -32601 ? "not_found" : "failed";
      p.reject(new LinkError(reason, `${p.method}: ${message} (${code})`));
      return;
    }
    p.resolve(m.result);
  }

  /** Requests from the body: ping is answered, anything else is unknown. */
  private onServerRequest(id: number | string, method: string): void {
    if (method === "ping") {
      this.send({ jsonrpc: "2.0", id, result: {} });
      return;
    }
    this.send({ jsonrpc: "2.0", id, error: { code: -32601, message: `method not found: ${method}` } });
  }
}
