// ToBe Awareness adapter for a tobe-body: connects to the body over a
// command that speaks MCP on its stdio (normally `ssh` to the body, where a
// forced command runs `tobe-body stdio`), offers the body's tools as
// actions, hands the body's pushed observations to ToBe, keeps the session
// alive with a ping heartbeat, and reconnects when the link drops.
//
// Runtime code uses Node built-ins only.

import { createHash, randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { errorContent, isObject, Link, LinkError, readConfigFile, readLinkConfig, toolContent } from "./link.ts";
import { ACTORS, LEVELS } from "./types.ts";
import type {
  AdapterAction,
  AdapterCallResult,
  AdapterHealth,
  AdapterRequest,
  EnvAdapter,
  HealthStatus,
  Level,
  Observation,
  ObservationListener,
} from "./types.ts";

export const PROTOCOL_VERSION = "2025-06-18";
export const ADAPTER_VERSION = "0.1.0";
/** How long stop() waits after closing stdin, and again after SIGTERM. */
export const STOP_GRACE_MS = 1000;
/** What the body kept of an event, as its observation names it. */
interface EvidenceRef {
  id: string;
  sha256?: string;
  media_type?: string;
  seq?: number;
}

/** How many observation ids are remembered to deliver each once. */
const SEEN_IDS = 4096;
/** How many pages of tools/list are read at most. */
const MAX_TOOL_PAGES = 32;

const HERE = dirname(fileURLToPath(import.meta.url));

export interface Config {
  id: string;
  name: string;
  command: string[];
  request_timeout_ms: number;
  ping_ms: number;
  reconnect: { initial_ms: number; max_ms: number };
  autoStart: boolean;
  permission: Level;
}

/** The same values as config.default.json, for when it cannot be read. */
export const DEFAULT_CONFIG: Config = {
  id: "body",
  name: "tobe-body",
  command: ["ssh", "-T", "-o", "BatchMode=yes", "tobe@tobe-body.local"],
  request_timeout_ms: 10000,
  ping_ms: 1000,
  reconnect: { initial_ms: 500, max_ms: 30000 },
  autoStart: true,
  permission: "medium",
};

export interface AdapterOptions {
  /** Values over the ones read from config.json (or the defaults). */
  config?: Partial<Config>;
  /**
   * The adapter's folder, where config.json and config.default.json live
   * (default: this file's folder). When config.json is missing,
   * config.default.json is copied to it if the folder is writable.
   */
  dir?: string;
}

const ID_RE = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;

/**
 * Reads the config: the defaults, then dir's config.json (made from
 * config.default.json on first use), then options.config. Throws a
 * TypeError naming the key on a value of the wrong kind.
 */
export function loadConfig(options: AdapterOptions = {}): Config {
  const fromFile = readConfigFile(options.dir ?? HERE);
  const layers = [DEFAULT_CONFIG as unknown as Record<string, unknown>, fromFile, options.config as Record<string, unknown> | undefined];
  const merged: Record<string, unknown> = Object.assign({}, ...layers);
  const bad = (key: string, want: string): never => {
    throw new TypeError(`body-adapter config: ${key} must be ${want}`);
  };
  const c: Config = {
    id: typeof merged.id === "string" && ID_RE.test(merged.id) ? merged.id : bad("id", `a string matching ${ID_RE}`),
    name: typeof merged.name === "string" && merged.name !== "" ? merged.name : bad("name", "a non-empty string"),
    ...readLinkConfig(layers, bad, { request_timeout_ms: 1, ping_ms: 1, reconnect: 1 }),
    autoStart: typeof merged.autoStart === "boolean" ? merged.autoStart : bad("autoStart", "a boolean"),
    permission: LEVELS.includes(merged.permission as Level)
      ? (merged.permission as Level)
      : bad("permission", LEVELS.join(", ")),
  };
  return c;
}

/** Now in Unix milliseconds: ToBe v0.2.0's times. */
function now(): number {
  return Date.now();
}

/** The data of a successful tools/call result, or undefined. */
function toolData(result: unknown): unknown {
  try {
    const parsed = JSON.parse(toolContent(result));
    return parsed.status === "success" ? (parsed.data ?? parsed) : undefined;
  } catch {
    return undefined;
  }
}

export class BodyAdapter implements EnvAdapter {
  readonly id: string;
  readonly name: string;
  readonly autoStart: boolean;
  readonly permission: Level;
  private readonly config: Config;

  private status: HealthStatus = "stopped";
  private since = now();
  private lastEventAt: number | undefined;
  private detail: string | undefined;

  private link: Link | null = null;
  /** Links being ended, awaited by stop(). */
  private readonly ending = new Set<Promise<void>>();
  private ready = false;
  private running = false;
  private connecting: Promise<AdapterCallResult> | null = null;
  private lost = false;
  private attempt = 0;
  private reconnectTimer: ReturnType<typeof setTimeout> | null = null;
  private pingTimer: ReturnType<typeof setInterval> | null = null;
  private pingInFlight = false;
  private serverInfo: Record<string, unknown> = {};
  private actions: AdapterAction[] = [];
  private modes = new Map<string, "observe" | "interact">();
  private readonly listeners = new Set<ObservationListener>();
  private readonly seen = new Set<string>();
  private droppedLines = 0;
  private droppedObservations = 0;

  constructor(config: Config) {
    this.config = config;
    this.id = config.id;
    this.name = config.name;
    this.autoStart = config.autoStart;
    this.permission = config.permission;
  }

  // --- EnvAdapter ---

  async start(args?: Record<string, unknown>): Promise<AdapterCallResult> {
    const callId = typeof args?.call_id === "string" ? args.call_id : "start";
    try {
      if (this.running && this.ready) {
        return this.result(callId, "start", JSON.stringify({ status: "success", data: this.summary() }));
      }
      if (this.running && this.connecting) return await this.withCallId(this.connecting, callId);
      if (this.running) {
        // Waiting to reconnect: try now.
        this.clearReconnect();
      }
      this.running = true;
      this.setStatus("starting", "connecting to the body");
      return await this.withCallId(this.connect(), callId);
    } catch (err) {
      return this.result(callId, "start", errorContent("failed", String((err as Error)?.message ?? err)));
    }
  }

  async stop(): Promise<AdapterCallResult> {
    try {
      this.running = false;
      this.clearReconnect();
      this.stopHeartbeat();
      this.ready = false;
      const link = this.link;
      this.link = null;
      if (link) this.endLink(link, "stopped by the adapter");
      while (this.ending.size > 0) await Promise.all([...this.ending]);
      if (this.connecting) await this.connecting.catch(() => undefined);
      this.setStatus("stopped", undefined);
      return this.result("stop", "stop", JSON.stringify({ status: "success", data: { status: "stopped" } }));
    } catch (err) {
      return this.result("stop", "stop", errorContent("failed", String((err as Error)?.message ?? err)));
    }
  }

  observe(req: AdapterRequest): Promise<AdapterCallResult> {
    return this.call("observe", req);
  }

  interact(req: AdapterRequest): Promise<AdapterCallResult> {
    return this.call("interact", req);
  }

  health(): AdapterHealth {
    const h: AdapterHealth = { status: this.status, since: this.since };
    if (this.lastEventAt) h.lastEventAt = this.lastEventAt;
    const notes: string[] = [];
    if (this.detail) notes.push(this.detail);
    const droppedLines = this.droppedLines + (this.link?.droppedLines ?? 0);
    if (droppedLines > 0) notes.push(`${droppedLines} overlong line(s) from the body dropped`);
    if (this.droppedObservations > 0) notes.push(`${this.droppedObservations} malformed observation(s) dropped`);
    if (notes.length > 0) h.detail = notes.join("; ");
    return h;
  }

  subscribe(listener: ObservationListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  getSkillPaths(): string[] {
    return [join(HERE, "SKILL.md")];
  }

  getActions(): AdapterAction[] {
    return this.actions.map((a) => ({ ...a }));
  }

  // --- connecting ---

  private connect(): Promise<AdapterCallResult> {
    const p = this.doConnect().finally(() => {
      if (this.connecting === p) this.connecting = null;
    });
    this.connecting = p;
    return p;
  }

  private async doConnect(): Promise<AdapterCallResult> {
    const link = new Link(this.config.command, {
      onNotification: (method, params) => {
        if (this.link === link) this.onNotification(method, params);
      },
      onClose: (detail) => this.onLinkClose(link, detail),
    });
    this.link = link;
    const timeout = this.config.request_timeout_ms;
    try {
      const init = await link.request(
        "initialize",
        {
          protocolVersion: PROTOCOL_VERSION,
          capabilities: {},
          clientInfo: { name: "tobe-body-adapter", version: ADAPTER_VERSION },
        },
        timeout,
      );
      if (!isObject(init) || init.protocolVersion !== PROTOCOL_VERSION) {
        const got = isObject(init) ? String(init.protocolVersion) : "no result";
        throw new LinkError("protocol_mismatch", `the body speaks MCP ${got}, this adapter ${PROTOCOL_VERSION}`);
      }
      this.serverInfo = isObject(init.serverInfo) ? init.serverInfo : {};
      link.notify("notifications/initialized");
      await this.loadTools(link);
      if (this.link !== link || !this.running) throw new LinkError("stopped", "the adapter was stopped");
      this.ready = true;
      this.attempt = 0;
      this.startHeartbeat(link);
      const wasLost = this.lost;
      this.lost = false;
      this.setStatus("online", undefined);
      if (wasLost) {
        this.emitLink(
          "link.restored",
          "medium",
          `link.restored: the link to the body is back (${this.serverLabel()}). Actions that were running when it dropped were cancelled by the body; check action_result before repeating one.`,
        );
      }
      await this.drain(link);
      return this.result("start", "start", JSON.stringify({ status: "success", data: this.summary() }));
    } catch (err) {
      const e = err instanceof LinkError ? err : new LinkError("failed", String((err as Error)?.message ?? err));
      const stderr = link.stderrTail();
      const detail = e.detail + (stderr.length > 0 ? ` (stderr: ${stderr.slice(-3).join(" | ")})` : "");
      if (this.link === link) {
        this.link = null;
        this.endLink(link, detail);
        if (this.running) {
          this.setStatus(this.lost ? "degraded" : "error", `connecting failed: ${detail}`);
          this.scheduleReconnect();
        }
      }
      const reason = !this.running ? "stopped" : e.reason === "link_lost" ? "unavailable" : e.reason;
      return this.result("start", "start", errorContent(reason, detail));
    }
  }

  private async loadTools(link: Link): Promise<void> {
    const actions: AdapterAction[] = [];
    const modes = new Map<string, "observe" | "interact">();
    let cursor: string | undefined;
    for (let page = 0; page < MAX_TOOL_PAGES; page++) {
      const res = await link.request("tools/list", cursor ? { cursor } : {}, this.config.request_timeout_ms);
      if (!isObject(res) || !Array.isArray(res.tools)) throw new LinkError("bad_response", "tools/list has no tools");
      for (const t of res.tools) {
        if (!isObject(t) || typeof t.name !== "string" || t.name === "" || modes.has(t.name)) continue;
        const ann = isObject(t.annotations) ? t.annotations : {};
        const mode = ann.readOnlyHint === true ? "observe" : "interact";
        modes.set(t.name, mode);
        actions.push({
          action: t.name,
          mode,
          description: typeof t.description === "string" ? t.description : "",
          parameters: isObject(t.inputSchema) ? t.inputSchema : { type: "object" },
        });
      }
      cursor = typeof res.nextCursor === "string" && res.nextCursor !== "" ? res.nextCursor : undefined;
      if (!cursor) break;
    }
    this.actions = actions;
    this.modes = modes;
  }

  /** Calls drain once and delivers what it returns, each id once. */
  private async drain(link: Link): Promise<void> {
    if (!this.modes.has("drain")) return;
    try {
      const res = await link.request(
        "tools/call",
        { name: "drain", arguments: {}, _meta: { "tobe/call_id": `drain-${randomUUID()}` } },
        this.config.request_timeout_ms,
      );
      const data = toolData(res);
      if (!isObject(data)) return;
      if (Array.isArray(data.observations)) {
        for (const o of data.observations) this.deliverBodyObservation(o);
      }
      const dropped = typeof data.dropped === "number" ? data.dropped : 0;
      if (dropped > 0) {
        this.emitLink(
          "observations.dropped",
          "medium",
          `observations.dropped: the body dropped ${dropped} observation(s) it could not hold while no one read them; call events for what happened meanwhile.`,
          { dropped },
        );
      }
    } catch {
      // The link's own close reports a failure that matters.
    }
  }

  private onLinkClose(link: Link, detail: string): void {
    this.droppedLines += link.droppedLines;
    if (this.link !== link) return; // An old link, or one still connecting (its request fails).
    if (!this.ready) return;
    this.link = null;
    this.ready = false;
    this.stopHeartbeat();
    this.endLink(link, detail);
    if (!this.running) return;
    const stderr = link.stderrTail();
    const full = detail + (stderr.length > 0 ? ` (stderr: ${stderr.slice(-3).join(" | ")})` : "");
    this.lost = true;
    this.setStatus("degraded", `link lost: ${full}; reconnecting`);
    this.emitLink(
      "link.lost",
      "high",
      `link.lost: the link to the body dropped (${full}). The body cancels its running actions when a session ends; reconnecting.`,
    );
    this.scheduleReconnect();
  }

  private endLink(link: Link, detail: string): void {
    const p = link.end(STOP_GRACE_MS, detail).finally(() => {
      this.ending.delete(p);
    });
    this.ending.add(p);
  }

  private scheduleReconnect(): void {
    if (!this.running || this.reconnectTimer) return;
    const { initial_ms, max_ms } = this.config.reconnect;
    const bound = Math.min(max_ms, initial_ms * 2 ** Math.min(this.attempt, 30));
    const delay = Math.round(initial_ms + Math.random() * (bound - initial_ms));
    this.attempt++;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      if (!this.running || this.link) return;
      void this.connect();
    }, delay);
    if (this.detail) this.detail = `${this.detail.replace(/; next attempt in \d+ ms$/, "")}; next attempt in ${delay} ms`;
  }

  private clearReconnect(): void {
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
  }

  private startHeartbeat(link: Link): void {
    this.stopHeartbeat();
    this.pingTimer = setInterval(() => {
      if (this.pingInFlight || this.link !== link || link.closed) return;
      this.pingInFlight = true;
      link
        .request("ping", undefined, this.config.request_timeout_ms)
        .catch((err: LinkError) => {
          // An unanswered ping means the body is gone: end the link, which
          // reconnects.
          if (err.reason === "timeout" && this.link === link) this.endLink(link, err.detail);
        })
        .finally(() => {
          this.pingInFlight = false;
        });
    }, this.config.ping_ms);
  }

  private stopHeartbeat(): void {
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.pingTimer = null;
    this.pingInFlight = false;
  }

  // --- calls ---

  private async call(mode: "observe" | "interact", req: AdapterRequest): Promise<AdapterCallResult> {
    const callId = typeof req?.call_id === "string" ? req.call_id : "";
    const action = typeof req?.action === "string" ? req.action : "";
    try {
      if (action === "") return this.result(callId, action, errorContent("invalid_params", "no action named"));
      if (req.params !== undefined && !isObject(req.params)) {
        return this.result(callId, action, errorContent("invalid_params", "params must be an object"));
      }
      const link = this.link;
      if (!link || !this.ready) {
        const why = this.status === "stopped" ? "the adapter is stopped" : (this.detail ?? `the link is ${this.status}`);
        return this.result(callId, action, errorContent("unavailable", `not connected to the body: ${why}`));
      }
      const actual = this.modes.get(action);
      if (!actual) {
        return this.result(callId, action, errorContent("unknown_action", `the body offers no action ${action}`));
      }
      if (actual !== mode) {
        return this.result(
          callId,
          action,
          errorContent("wrong_mode", `${action} is an ${actual} action: call it through ${actual}, not ${mode}`),
        );
      }
      const res = await link.request(
        "tools/call",
        { name: action, arguments: req.params ?? {}, _meta: { "tobe/call_id": callId } },
        this.config.request_timeout_ms,
      );
      return this.result(callId, action, toolContent(res));
    } catch (err) {
      if (err instanceof LinkError) {
        const detail =
          err.reason === "timeout" || err.reason === "link_lost"
            ? `${err.detail}; the action may have run or been cancelled: check action_result`
            : err.detail;
        return this.result(callId, action, errorContent(err.reason, detail));
      }
      return this.result(callId, action, errorContent("failed", String((err as Error)?.message ?? err)));
    }
  }

  // --- observations ---

  private onNotification(method: string, params: unknown): void {
    if (method === "notifications/tobe/observation") {
      this.deliverBodyObservation(params);
    } else if (method === "notifications/tools/list_changed") {
      const link = this.link;
      if (link && this.ready) void this.loadTools(link).catch(() => undefined);
    }
  }

  private deliverBodyObservation(o: unknown): void {
    if (
      !isObject(o) ||
      typeof o.id !== "string" ||
      o.id === "" ||
      typeof o.source !== "string" ||
      !ACTORS.includes(o.actor as never) ||
      typeof o.content !== "string" ||
      !LEVELS.includes(o.trust as Level) ||
      !LEVELS.includes(o.attention as Level) ||
      typeof o.timestamp !== "string" ||
      Number.isNaN(Date.parse(o.timestamp))
    ) {
      this.droppedObservations++;
      return;
    }
    // The body's fields, with this adapter's id and name (the body's own
    // claims to them, if any, are replaced).
    const obs: Observation = { ...(o as unknown as Observation), adapter_id: this.id, adapter_name: this.name, timestamp: Date.parse(o.timestamp) };
    const ev = o.evidence;
    const link = this.link;
    if (isObject(ev) && typeof ev.id === "string" && link && !this.seen.has(obs.id)) {
      // What the body kept of the event goes with it, when this session
      // may look at it: fetched first, so the two are never apart.
      void this.withEvidence(link, obs, ev as unknown as EvidenceRef).then((withMedia) => this.deliver(withMedia));
      return;
    }
    this.deliver(obs);
  }

  /**
   * obs with the evidence it names attached, as ToBe's Media Pipeline
   * reads an observation's media (content.media: kind, mimeType, the
   * bytes, size, sha256, width and height or durationMs): content becomes
   * { text, media, evidence }. get_evidence decides whether this session
   * may look (an evidence.view grant) and records the look; when it
   * refuses or fails, content is { text, evidence, mediaError } instead.
   */
  private async withEvidence(link: Link, obs: Observation, ev: EvidenceRef): Promise<Observation> {
    const text = obs.content as string;
    const failed = (code: string, message: string): Observation => ({
      ...obs,
      content: { text, evidence: ev, mediaError: { status: "error", code, message } },
    });
    let res: unknown;
    try {
      res = await link.request("tools/call", { name: "get_evidence", arguments: { id: ev.id } }, this.config.request_timeout_ms);
    } catch (err) {
      return failed("EVIDENCE_UNAVAILABLE", String((err as Error)?.message ?? err));
    }
    const r = isObject(res) ? res : {};
    const parts = Array.isArray(r.content) ? r.content : [];
    const part = parts.find((c) => isObject(c) && (c.type === "image" || c.type === "audio") && typeof c.data === "string") as
      | { type: "image" | "audio"; data: string; mimeType?: string }
      | undefined;
    if (r.isError === true || !part) {
      let why = "the body sent no image or sound";
      try {
        const c = JSON.parse(toolContent(res));
        if (c?.error) why = `${c.error.reason}: ${c.error.detail ?? ""}`.trim();
      } catch {
        // why stays
      }
      return failed("EVIDENCE_NOT_SHOWN", why);
    }
    const data = new Uint8Array(Buffer.from(part.data, "base64"));
    const sha256 = createHash("sha256").update(data).digest("hex");
    if (typeof ev.sha256 === "string" && ev.sha256 !== sha256) {
      return failed("EVIDENCE_DAMAGED", `the bytes' sha256 is ${sha256}, the observation names ${ev.sha256}`);
    }
    const rec = (toolData(res) ?? {}) as { width?: number; height?: number; duration_ms?: number };
    const media: Record<string, unknown> = { kind: part.type, mimeType: part.mimeType ?? "", data, size: data.byteLength, sha256, fileName: ev.id };
    if (typeof rec.width === "number" && rec.width > 0) media.width = rec.width;
    if (typeof rec.height === "number" && rec.height > 0) media.height = rec.height;
    if (typeof rec.duration_ms === "number" && rec.duration_ms > 0) media.durationMs = rec.duration_ms;
    return { ...obs, content: { text, media, evidence: ev } };
  }

  private emitLink(kind: string, attention: Level, content: string, data: Record<string, unknown> = {}): void {
    const obs: Observation & { data: Record<string, unknown> } = {
      id: `${this.id}-${kind}-${randomUUID()}`,
      adapter_id: this.id,
      adapter_name: this.name,
      source: "tobe-body",
      actor: "system",
      content,
      trust: this.permission,
      attention,
      timestamp: now(),
      data: { kind, ...data },
    };
    this.deliver(obs);
  }

  private deliver(obs: Observation): void {
    if (this.seen.has(obs.id)) return;
    this.seen.add(obs.id);
    if (this.seen.size > SEEN_IDS) {
      const oldest = this.seen.values().next().value;
      if (oldest !== undefined) this.seen.delete(oldest);
    }
    this.lastEventAt = now();
    for (const l of [...this.listeners]) {
      try {
        l(obs);
      } catch {
        // One listener's failure is not the others'.
      }
    }
  }

  // --- helpers ---

  private setStatus(status: HealthStatus, detail: string | undefined): void {
    if (status !== this.status) this.since = now();
    this.status = status;
    this.detail = detail;
  }

  private serverLabel(): string {
    const n = typeof this.serverInfo.name === "string" ? this.serverInfo.name : "unknown server";
    const v = typeof this.serverInfo.version === "string" ? ` ${this.serverInfo.version}` : "";
    return n + v;
  }

  private summary(): Record<string, unknown> {
    return { status: this.status, server: this.serverInfo, actions: this.actions.length };
  }

  private async withCallId(p: Promise<AdapterCallResult>, callId: string): Promise<AdapterCallResult> {
    const r = await p;
    return { ...r, call_id: callId };
  }

  private result(callId: string, action: string, content: string): AdapterCallResult {
    return { call_id: callId, adapter_id: this.id, action, timestamp: now(), content };
  }
}

/** Makes the adapter; reads its config and starts nothing. */
export function createAdapter(options: AdapterOptions = {}): EnvAdapter {
  return new BodyAdapter(loadConfig(options));
}

export default createAdapter;
