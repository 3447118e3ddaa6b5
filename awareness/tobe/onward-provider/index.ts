// An onward action provider for a tobe-body: when the agent's turn fails
// for good, onward's recovery rules can make the body call a person
// (tobe-body.call-person) or make itself safe (tobe-body.make-safe). The
// body is reached as the ToBe adapter reaches it, with a command that
// speaks MCP on its stdio (ssh to the body, where a forced command runs
// `tobe-body stdio` as the agent's principal), one short session per call.
//
// The invocation id is the idempotency key of what is done on the body:
// the same invocation, from a restarted pi or after the body restarted,
// acts once and returns the recorded result.
//
// Runtime code uses Node built-ins only.

import { createHash } from "node:crypto";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { BodySession, Unreachable } from "./body.ts";
import type { SessionConfig, ToolAnswer } from "./body.ts";
import { abortReason, isObject, LinkError, readConfigFile, readLinkConfig } from "./link.ts";
import { DISCOVER, KINDS_WITH_MESSAGE, RESULT_KINDS } from "./types.ts";
import type { ActionContext, ActionDefinition, ActionResult, DiscoverEvent, PiLike } from "./types.ts";

export const NAMESPACE = "tobe-body";
export const CALL_PERSON = `${NAMESPACE}.call-person`;
export const MAKE_SAFE = `${NAMESPACE}.make-safe`;

const HERE = dirname(fileURLToPath(import.meta.url));

export interface Config extends SessionConfig {
  /** Whether call-person sounds a tone, when its params do not say. */
  tone: boolean;
  /** Whether call-person lights a light, when its params do not say. */
  light: boolean;
  /** The speaker for the tone; null: the body's first. */
  tone_target: string | null;
  /** The output for the light; null: the body's output named led, light or lamp, else the first of its board's own LEDs (light.*). */
  light_target: string | null;
}

/** The same values as config.default.json, for when it cannot be read. */
export const DEFAULT_CONFIG: Config = {
  command: ["ssh", "-T", "-o", "BatchMode=yes", "tobe@tobe-body.local"],
  request_timeout_ms: 10000,
  ping_ms: 1000,
  reconnect: { initial_ms: 500, max_ms: 30000 },
  tone: true,
  light: true,
  tone_target: null,
  light_target: null,
};

/** The tone and light call-person gives: short, plain and noticeable. */
export const TONE = { freq_hz: 880, ms: 1500 };
export const LIGHT_MS = 3000;
/** On a board with no wired light: its own LED blinks for as long. */
export const LIGHT_BLINK = { period_ms: 500, count: LIGHT_MS / 500 };
/** The longest text of call-person, in characters (the body takes 1024 bytes). */
export const MAX_TEXT = 300;

export interface ProviderOptions {
  /** Values over the ones read from config.json (or the defaults). */
  config?: Partial<Config>;
  /** The provider's folder, where config.json and config.default.json live (default: this file's). */
  dir?: string;
}

const KEYS = new Set(Object.keys(DEFAULT_CONFIG));

/**
 * Reads the config: the defaults, then dir's config.json (made from
 * config.default.json on first use), then options.config. Throws a
 * TypeError naming the key on a value of the wrong kind or a key it does
 * not know.
 */
export function loadConfig(options: ProviderOptions = {}): Config {
  const fromFile = readConfigFile(options.dir ?? HERE) ?? {};
  const bad = (key: string, want: string): never => {
    throw new TypeError(`tobe-body onward provider config: ${key} must be ${want}`);
  };
  for (const k of [...Object.keys(fromFile), ...Object.keys(options.config ?? {})]) {
    if (!KEYS.has(k) && k !== "$schema") bad(k, `one of the known keys (${[...KEYS].join(", ")}), not an unknown one`);
  }
  const layers = [DEFAULT_CONFIG as unknown as Record<string, unknown>, fromFile, options.config as Record<string, unknown> | undefined];
  const merged: Record<string, unknown> = Object.assign({}, ...layers);
  const bool = (v: unknown, key: string): boolean => (typeof v === "boolean" ? v : bad(key, "a boolean"));
  const target = (v: unknown, key: string): string | null =>
    v === null || (typeof v === "string" && v !== "") ? (v as string | null) : bad(key, "null or a non-empty string");
  const c: Config = {
    ...readLinkConfig(layers, bad, { request_timeout_ms: 100, ping_ms: 50, reconnect: 10 }),
    tone: bool(merged.tone, "tone"),
    light: bool(merged.light, "light"),
    tone_target: target(merged.tone_target, "tone_target"),
    light_target: target(merged.light_target, "light_target"),
  };
  return c;
}

/** The idempotency key of one step of an invocation on the body (at most 128 bytes). */
export function stepKey(invocationId: string, step: string): string {
  const plain = `onward:${invocationId}:${step}`;
  // eslint-disable-next-line no-control-regex
  if (Buffer.byteLength(plain) <= 128 && !/[\u0000-\u001f\u007f]/.test(plain)) return plain;
  return `onward:sha256:${createHash("sha256").update(invocationId).digest("hex")}:${step}`;
}

/** Text cut to at most max bytes of UTF-8, at a character. */
function cut(s: string, max: number): string {
  if (Buffer.byteLength(s) <= max) return s;
  let out = "";
  for (const ch of s) {
    if (Buffer.byteLength(out + ch) > max - 3) break;
    out += ch;
  }
  return out + "…";
}

/** The record's note: which rule, episode, session and invocation, and the failure. */
export function noteOf(ctx: ActionContext, action: string): string {
  const f = ctx.failure ?? ({} as ActionContext["failure"]);
  const who = [f.provider, f.model].filter((x) => typeof x === "string" && x !== "").join("/");
  return cut(
    `onward ${action}: rule ${ctx.rule}, episode ${ctx.episodeId}, session ${ctx.sessionId}, invocation ${ctx.invocationId}; ` +
      `after ${ctx.failures} failure(s) (rule's minimum ${ctx.minFailures}): ${f.kind}${who ? ` from ${who}` : ""}: ${f.text ?? ""}`,
    1024,
  );
}

const CALL_PERSON_PARAMS = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  additionalProperties: false,
  required: ["text"],
  properties: {
    text: {
      type: "string",
      minLength: 1,
      maxLength: MAX_TEXT,
      description: "What the person should know: sent to the home server as a body.notify at high attention.",
    },
    tone: { type: "boolean", description: "Sound a short tone on the body's speaker (default from the provider's config)." },
    light: { type: "boolean", description: "Light the body's light for a few seconds (default from the provider's config)." },
  },
};

const MAKE_SAFE_PARAMS = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  additionalProperties: false,
  properties: {},
};

/** What one signal of call-person came to. */
interface Signal {
  what: string;
  /** done: verified; refused: the body said no (nothing done); failed: it ran and failed; unknown. */
  outcome: "done" | "refused" | "failed" | "unknown" | "skipped";
  detail: string;
  repeat: boolean;
}

/** An action result of the body's runner, as much of it as is read here. */
function actionOf(answer: ToolAnswer): { status: string; reason: string; detail: string; repeat: boolean; evidence: string } {
  if (answer.status === "error") return { status: "refused", reason: answer.error.reason, detail: answer.error.detail, repeat: false, evidence: "" };
  const d = isObject(answer.data) ? answer.data : {};
  const v = isObject(d.verification) ? d.verification : {};
  return {
    status: typeof d.status === "string" ? d.status : "unknown",
    reason: typeof d.reason === "string" ? d.reason : "",
    detail: typeof d.detail === "string" ? d.detail : "",
    repeat: d.repeat === true,
    evidence: typeof v.evidence === "string" ? v.evidence : "",
  };
}

export class Provider {
  private config: Config | null;
  private readonly configError: string;
  private unloaded = false;
  /** Calls under way, by invocation id: a duplicate while one runs shares it. */
  private readonly running = new Map<string, Promise<ActionResult>>();
  private readonly unregister: Array<() => void> = [];

  constructor(options: ProviderOptions = {}) {
    try {
      this.config = loadConfig(options);
      this.configError = "";
    } catch (err) {
      // pi keeps loading: the actions say what is wrong when they are used.
      this.config = null;
      this.configError = String((err as Error)?.message ?? err);
    }
  }

  /** The definitions this provider registers. */
  definitions(): ActionDefinition[] {
    return [
      {
        name: CALL_PERSON,
        description:
          "Make the body ask a person for help: a body.notify at high attention for the home server and, where the board has them and the config allows, a short tone and a light. The invocation acts once on the body, even when repeated.",
        phase: "settled",
        modes: ["tui", "rpc"],
        parameters: CALL_PERSON_PARAMS,
        execute: (params, ctx) => this.execute(CALL_PERSON, params, ctx),
      },
      {
        name: MAKE_SAFE,
        description:
          "Trip the body's e-stop with the failure's kind as the reason: every output goes to its safe level, everything queued is cancelled, and it stays latched until a person resets it at the device.",
        phase: "settled",
        modes: ["tui", "rpc"],
        parameters: MAKE_SAFE_PARAMS,
        execute: (params, ctx) => this.execute(MAKE_SAFE, params, ctx),
      },
    ];
  }

  /** Registers every definition with onward's add, synchronously. */
  discover(event: unknown): void {
    if (this.unloaded || !isObject(event) || typeof event.add !== "function") return;
    const add = event.add as DiscoverEvent["add"];
    for (const d of this.definitions()) {
      try {
        const off = add(d);
        if (typeof off === "function") this.unregister.push(off);
      } catch {
        // onward refused one (a duplicate name): the other still counts.
      }
    }
  }

  /** session_shutdown: everything is unregistered; a kept handle acts no more. */
  shutdown(): void {
    this.unloaded = true;
    for (const off of this.unregister.splice(0)) {
      try {
        off();
      } catch {
        // Already gone.
      }
    }
  }

  /** Runs an action: each invocation once here, and once on the body by its key. */
  execute(action: string, params: Record<string, unknown>, ctx: ActionContext): Promise<ActionResult> {
    const id = typeof ctx?.invocationId === "string" ? ctx.invocationId : "";
    const key = `${action}\u0000${id}`;
    const same = this.running.get(key);
    if (same) return same;
    const p = this.run(action, params, ctx).finally(() => this.running.delete(key));
    if (id !== "") this.running.set(key, p);
    return p;
  }

  private async run(action: string, params: Record<string, unknown>, ctx: ActionContext): Promise<ActionResult> {
    if (this.unloaded) {
      return { kind: "cancelled", message: `${action}: the tobe-body provider was unloaded (session_shutdown); nothing was asked of the body` };
    }
    if (!this.config) return { kind: "failed", message: `${action}: ${this.configError}; nothing was asked of the body` };
    if (!isObject(ctx) || typeof ctx.invocationId !== "string" || ctx.invocationId === "") {
      return { kind: "failed", message: `${action}: no invocationId in the context, so the body could not do it only once; nothing was asked of it` };
    }
    const signal = ctx.signal instanceof AbortSignal ? ctx.signal : new AbortController().signal;
    if (signal.aborted) {
      return { kind: "cancelled", message: `${action}: ${abortReason(signal)} before anything was asked of the body` };
    }
    let session: BodySession;
    const began = performance.now();
    try {
      session = await BodySession.open(this.config, signal);
    } catch (err) {
      if (err instanceof Unreachable && err.cancelled) {
        return { kind: "cancelled", message: `${action}: ${err.message}; nothing was asked of it` };
      }
      return { kind: "unknown", message: `${action}: ${String((err as Error)?.message ?? err)}; whether the body is safe or anyone was told is not known` };
    }
    try {
      const result =
        action === MAKE_SAFE
          ? await this.makeSafe(session, ctx, signal, performance.now() - began)
          : await this.callPerson(session, params, ctx, signal);
      return checked(result);
    } finally {
      await session.end(signal.aborted ? `cancelled: ${abortReason(signal)}` : "the action is done");
    }
  }

  private async makeSafe(session: BodySession, ctx: ActionContext, signal: AbortSignal, reachMs: number): Promise<ActionResult> {
    if (!session.tools.has("estop_trip")) {
      return { kind: "failed", message: `${MAKE_SAFE}: the body offers no estop_trip to this principal; nothing was done` };
    }
    if (signal.aborted) return { kind: "cancelled", message: `${MAKE_SAFE}: ${abortReason(signal)} before the stop was asked for` };
    const kind = typeof ctx.failure?.kind === "string" && ctx.failure.kind !== "" ? ctx.failure.kind : "agent_failure";
    let answer: ToolAnswer;
    const asked = performance.now();
    try {
      answer = await session.call(
        "estop_trip",
        { reason: kind, idempotency_key: stepKey(ctx.invocationId, "make-safe"), note: noteOf(ctx, MAKE_SAFE) },
        signal,
      );
    } catch (err) {
      const e = err as LinkError;
      return { kind: "unknown", message: `${MAKE_SAFE}: the stop was asked for and no answer came (${e.detail ?? e}); the body may be latched` };
    }
    if (answer.status === "error") {
      return { kind: "failed", message: `${MAKE_SAFE}: the body refused the stop: ${answer.error.reason}: ${answer.error.detail}` };
    }
    const t = isObject(answer.data) ? answer.data : {};
    const outputs = Array.isArray(t.outputs) ? t.outputs.filter(isObject) : [];
    const read = outputs.map((o) => `${o.name} ${o.read_back}${o.err ? ` (${o.err})` : ""}`).join(", ");
    const latched = t.latched_now === true;
    const repeat = t.repeated === true;
    const cancelled = Array.isArray(t.cancelled) ? t.cancelled.length : 0;
    const allSafe = t.all_safe === true;
    const took = `reached the body in ${reachMs.toFixed(0)} ms, the stop answered in ${(performance.now() - asked).toFixed(0)} ms`;
    const first = repeat
      ? `a repeat of invocation ${ctx.invocationId}: the body stopped once, at its first call (${t.cause}), and stopped nothing now; latched now: ${latched ? "yes" : "no, a person has reset it since"}`
      : `the e-stop is latched (${t.cause}); ${cancelled} action(s) cancelled`;
    if (allSafe && (latched || repeat)) {
      return {
        kind: "stopped",
        message: `${MAKE_SAFE}: ${first}; every output read back safe (${read || "no outputs"}); ${took}. Only a person at the device can reset it.`,
      };
    }
    return {
      kind: "unknown",
      message: `${MAKE_SAFE}: ${first}; but not every output read back safe (${read || "no outputs"}): the body may not be safe (${took})`,
    };
  }

  private async callPerson(
    session: BodySession,
    params: Record<string, unknown>,
    ctx: ActionContext,
    signal: AbortSignal,
  ): Promise<ActionResult> {
    const config = this.config!;
    const p = isObject(params) ? params : {};
    if (typeof p.text !== "string" || p.text.trim() === "") {
      return { kind: "failed", message: `${CALL_PERSON}: params.text must be a non-empty string; nothing was done` };
    }
    const text = cut(p.text, 1024);
    const tone = typeof p.tone === "boolean" ? p.tone : config.tone;
    const light = typeof p.light === "boolean" ? p.light : config.light;
    const note = noteOf(ctx, CALL_PERSON);
    const steps: Array<{ what: string; tool: string; args: Record<string, unknown> } | Signal> = [];
    steps.push({ what: "notify", tool: "body_notify", args: { target: "home", message: text, attention: "high" } });
    if (tone) {
      const target = pickTarget(session, "audio_tone", config.tone_target, () => true);
      steps.push(
        target
          ? { what: `tone on ${target}`, tool: "audio_tone", args: { target, freq_hz: TONE.freq_hz, ms: TONE.ms } }
          : { what: "tone", outcome: "skipped", detail: unavailable(session, "audio_tone", config.tone_target), repeat: false },
      );
    }
    if (light) {
      // A wired light (a GPIO output named led, light or lamp) first; a
      // board without one blinks its own LED (light.blink on light.*).
      const wired = pickTarget(session, "gpio_pulse", config.light_target, (t) => /(^|[._-])(led|light|lamp)s?\d*$/i.test(t));
      const own = wired ? null : pickTarget(session, "light_blink", config.light_target, () => true);
      steps.push(
        wired
          ? { what: `light on ${wired}`, tool: "gpio_pulse", args: { target: wired, duration_ms: LIGHT_MS } }
          : own
            ? { what: `light on ${own}`, tool: "light_blink", args: { target: own, ...LIGHT_BLINK } }
            : { what: "light", outcome: "skipped", detail: unavailableLight(session, config.light_target), repeat: false },
      );
    }
    let asked = false;
    const perform = async (step: (typeof steps)[number]): Promise<Signal> => {
      if ("outcome" in step) return step;
      if (signal.aborted) return { what: step.what, outcome: "skipped", detail: `not asked for: ${abortReason(signal)}`, repeat: false };
      asked = true;
      const args = { ...step.args, idempotency_key: stepKey(ctx.invocationId, step.what.split(" ")[0]), note };
      try {
        const a = actionOf(await session.call(step.tool, args, signal));
        const outcome =
          a.status === "succeeded" ? "done" : a.status === "refused" ? "refused" : a.status === "failed" ? "failed" : "unknown";
        const detail =
          outcome === "done" ? a.evidence || "verified" : [a.reason, a.detail].filter((x) => x !== "").join(": ") || a.status;
        return { what: step.what, outcome, detail, repeat: a.repeat };
      } catch (err) {
        const e = err as LinkError;
        return { what: step.what, outcome: "unknown", detail: `asked for, no answer (${e.detail ?? e})`, repeat: false };
      }
    };
    // The notification first (it is what reaches a person away from the
    // body); then the tone and the light together.
    const done = [await perform(steps[0]), ...(await Promise.all(steps.slice(1).map(perform)))];
    const summary = done
      .map((s) => `${s.what}: ${s.outcome === "done" ? "verified" : s.outcome}${s.repeat ? " (recorded at the first call)" : ""} (${s.detail})`)
      .join("; ");
    const repeatNote = done.some((s) => s.repeat) ? ` A repeat of invocation ${ctx.invocationId}: nothing was done twice.` : "";
    if (!asked) return { kind: "cancelled", message: `${CALL_PERSON}: ${summary}; nothing was asked of the body` };
    if (done.some((s) => s.outcome === "unknown")) return { kind: "unknown", message: `${CALL_PERSON}: not every signal could be confirmed: ${summary}.${repeatNote}` };
    if (done.some((s) => s.outcome === "refused" || s.outcome === "failed")) {
      return { kind: "failed", message: `${CALL_PERSON}: ${summary}.${repeatNote}` };
    }
    return { kind: "completed", message: `${CALL_PERSON}: the body asked for a person: ${summary}.${repeatNote}` };
  }
}

/** The target of tool: the configured one, or the first of its schema's targets that fits. */
function pickTarget(session: BodySession, tool: string, configured: string | null, fits: (t: string) => boolean): string | null {
  const targets = targetsOf(session, tool);
  if (configured !== null) return targets.includes(configured) ? configured : null;
  return targets.find(fits) ?? null;
}

function targetsOf(session: BodySession, tool: string): string[] {
  const schema = session.tools.get(tool);
  const props = isObject(schema?.properties) ? schema.properties : {};
  const target = isObject(props.target) ? props.target : {};
  return Array.isArray(target.enum) ? target.enum.filter((t): t is string => typeof t === "string") : [];
}

function unavailableLight(session: BodySession, configured: string | null): string {
  const tools = ["gpio_pulse", "light_blink"].filter((t) => session.tools.has(t));
  if (tools.length === 0) return "the body offers neither gpio_pulse nor light_blink to this principal";
  const have = tools.flatMap((t) => targetsOf(session, t));
  if (configured !== null) return `the body has no ${configured} (it has ${have.join(", ") || "none"})`;
  return "the body has no output named led, light or lamp, and no light of its board";
}

function unavailable(session: BodySession, tool: string, configured: string | null): string {
  if (!session.tools.has(tool)) return `the body offers no ${tool} to this principal`;
  if (configured !== null) return `the body has no ${configured} (it has ${targetsOf(session, tool).join(", ") || "none"})`;
  return `the body has no ${tool === "audio_tone" ? "speaker" : "output named led, light or lamp"}`;
}

/** A result as onward takes it: a known kind, with a message where one is owed. */
function checked(r: ActionResult): ActionResult {
  if (!RESULT_KINDS.includes(r.kind) || r.kind === "continue") {
    return { kind: "unknown", message: `the provider made a result of kind ${String(r.kind)}` };
  }
  if (KINDS_WITH_MESSAGE.includes(r.kind) && !r.message) return { ...r, message: `${r.kind} without a message` };
  return r;
}

/**
 * The extension factory, as pi loads extensions: it listens for onward's
 * discovery on pi.events and registers the actions synchronously when
 * asked, and unregisters them at session_shutdown. Without onward nothing
 * ever asks, and the provider does nothing.
 */
export function createProvider(pi: PiLike, options: ProviderOptions = {}): Provider {
  const provider = new Provider(options);
  const off = pi.events.on(DISCOVER, (event) => provider.discover(event));
  pi.on("session_shutdown", () => {
    provider.shutdown();
    if (typeof off === "function") off();
  });
  return provider;
}

export default function tobeBodyOnward(pi: PiLike): void {
  createProvider(pi);
}
