// onward's side of the action-provider contract, emulated for the tests
// exactly as the contract says it behaves (onward itself is not public),
// and the little of pi it needs: an event bus (pi.events) and lifecycle
// events (session_start, session_shutdown).
import type { ActionContext, ActionDefinition, ActionResult } from "../types.ts";
import { DISCOVER, KINDS_WITH_MESSAGE, RESULT_KINDS } from "../types.ts";

type Handler = (data: unknown) => void;

/** pi as an extension sees it: pi.events and pi.on. */
export class Pi {
  private readonly bus = new Map<string, Set<Handler>>();
  private readonly lifecycle = new Map<string, Array<(event: unknown, ctx: unknown) => unknown>>();
  readonly events = {
    on: (channel: string, handler: Handler): (() => void) => {
      let set = this.bus.get(channel);
      if (!set) this.bus.set(channel, (set = new Set()));
      set.add(handler);
      return () => {
        set.delete(handler);
      };
    },
    emit: (channel: string, data: unknown): void => {
      for (const h of [...(this.bus.get(channel) ?? [])]) h(data);
    },
  };
  on(event: string, handler: (event: unknown, ctx: unknown) => unknown): void {
    const list = this.lifecycle.get(event) ?? [];
    list.push(handler);
    this.lifecycle.set(event, list);
  }
  async emitLifecycle(event: string): Promise<void> {
    for (const h of this.lifecycle.get(event) ?? []) await h({ type: event }, {});
  }
  listeners(channel: string): number {
    return this.bus.get(channel)?.size ?? 0;
  }
}

const NAME_RE = /^[a-z][a-z0-9-]*\.[a-z][a-z0-9-]*$/;

/** What onward made of a run: the action's result, or its refusal to run it. */
export type Run = { ran: true; result: ActionResult; ms: number } | { ran: false; refused: string };

export interface RunOptions {
  invocationId: string;
  signal?: AbortSignal;
  deadlineMs?: number;
  failure?: { kind: string; text: string; provider?: string; model?: string };
  rule?: string;
}

/** onward: discovers at session_start, validates, runs a rule's step. */
export class Onward {
  readonly actions = new Map<string, ActionDefinition>();
  /** Names added twice: unusable. */
  readonly unusable = new Set<string>();
  readonly unregistered: string[] = [];
  /** Definitions onward refused, with why. */
  readonly refusedDefinitions: string[] = [];
  private discovering = false;

  constructor(pi: Pi) {
    // onward's own factory: it discovers at session_start, after every
    // factory ran, so the order extensions load in does not matter.
    pi.on("session_start", () => this.discover(pi));
  }

  private discover(pi: Pi): void {
    this.actions.clear();
    this.unusable.clear();
    this.discovering = true;
    try {
      pi.events.emit(DISCOVER, { add: (d: ActionDefinition) => this.add(d) });
    } finally {
      this.discovering = false; // an asynchronous registration is not seen
    }
  }

  private add(d: ActionDefinition): () => void {
    if (!this.discovering) throw new Error("onward: add after discovery: not seen");
    const why = invalidDefinition(d);
    if (why) {
      this.refusedDefinitions.push(`${String(d?.name)}: ${why}`);
      throw new TypeError(`onward: definition ${String(d?.name)}: ${why}`);
    }
    if (this.actions.has(d.name) || this.unusable.has(d.name)) {
      this.actions.delete(d.name);
      this.unusable.add(d.name);
    } else {
      this.actions.set(d.name, d);
    }
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.unregistered.push(d.name);
      if (this.actions.get(d.name) === d) this.actions.delete(d.name);
    };
  }

  /** Runs a step {use: name, with: params} as a settled action. */
  async run(name: string, params: unknown, o: RunOptions): Promise<Run> {
    const d = this.actions.get(name);
    if (!d) return { ran: false, refused: this.unusable.has(name) ? `${name} is unusable (defined twice)` : `no action ${name}` };
    const bad = validate(d.parameters, params, "params");
    if (bad) return { ran: false, refused: bad };
    const deadline = AbortSignal.timeout(o.deadlineMs ?? 30000);
    const signal = o.signal ? AbortSignal.any([o.signal, deadline]) : deadline;
    const failure = Object.freeze({ kind: "provider_error", text: "529 overloaded", provider: "anthropic", model: "claude", ...o.failure });
    const ctx: ActionContext = Object.freeze({
      invocationId: o.invocationId,
      episodeId: "episode-1",
      sessionId: "session-1",
      rule: o.rule ?? "body-recovery",
      failures: 5,
      minFailures: 3,
      failure,
      chain: Object.freeze({ id: "chain-1", handoffs: 0, maxHandoffs: 2 }),
      signal,
      host: {},
    });
    const start = performance.now();
    let result: ActionResult;
    try {
      // A frozen copy: onward writes no defaults, and nothing the action
      // does to its params reaches the rule.
      const r: unknown = await Promise.race([
        d.execute(structuredClone(params) as Record<string, unknown>, ctx),
        new Promise((resolve) =>
          signal.addEventListener("abort", () => setTimeout(() => resolve({ timedOut: true }), 2000), { once: true }),
        ),
      ]);
      result = checkResult(r, d.phase);
    } catch (err) {
      result = { kind: "unknown", message: `the action threw: ${String((err as Error)?.message ?? err)}` };
    }
    return { ran: true, result, ms: performance.now() - start };
  }
}

function invalidDefinition(d: ActionDefinition): string {
  if (typeof d !== "object" || d === null) return "not an object";
  if (typeof d.name !== "string" || !NAME_RE.test(d.name)) return `name ${String(d.name)} is not namespace.action`;
  if (typeof d.description !== "string" || d.description === "") return "no description";
  if (d.phase !== "boundary" && d.phase !== "settled") return `phase ${String(d.phase)}`;
  if (!Array.isArray(d.modes) || d.modes.length === 0 || !d.modes.every((m) => typeof m === "string")) return "modes";
  if (typeof d.parameters !== "object" || d.parameters === null) return "parameters is not a schema";
  if (d.handoff !== undefined && typeof d.handoff !== "boolean") return "handoff";
  if (typeof d.execute !== "function") return "no execute";
  return "";
}

/** An exception, a timeout or an invalid return counts as unknown. */
function checkResult(r: unknown, phase: string): ActionResult {
  if (typeof r !== "object" || r === null) return { kind: "unknown", message: "the action returned no result" };
  if ("timedOut" in r) return { kind: "unknown", message: "the action did not return by its deadline" };
  const res = r as ActionResult;
  if (!RESULT_KINDS.includes(res.kind)) return { kind: "unknown", message: `invalid kind ${String(res.kind)}` };
  if (res.kind === "continue" && phase !== "boundary") return { kind: "unknown", message: "continue from a settled action" };
  if (KINDS_WITH_MESSAGE.includes(res.kind) && (typeof res.message !== "string" || res.message === "")) {
    return { kind: "unknown", message: `${res.kind} without a message` };
  }
  return res;
}

const KEYWORDS = new Set(["$schema", "type", "properties", "required", "additionalProperties", "description", "minLength", "maxLength"]);

/**
 * Validates value against the schema strictly, as onward does: no
 * coercion, no defaults. Only the keywords the providers here use are
 * known; a schema with any other is an error, so a provider cannot slip
 * past with one the emulation would ignore.
 */
export function validate(schema: Record<string, unknown>, value: unknown, at: string): string {
  for (const k of Object.keys(schema)) if (!KEYWORDS.has(k)) return `${at}: the schema's keyword ${k} is not known here`;
  const type = schema.type;
  const kind = value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
  const want = (t: unknown): boolean =>
    t === kind || (t === "integer" && typeof value === "number" && Number.isInteger(value));
  if (type !== undefined && !(Array.isArray(type) ? type.some(want) : want(type))) return `${at}: want ${String(type)}, got ${kind}`;
  if (typeof value === "string") {
    const n = [...value].length;
    if (typeof schema.minLength === "number" && n < schema.minLength) return `${at}: shorter than ${schema.minLength}`;
    if (typeof schema.maxLength === "number" && n > schema.maxLength) return `${at}: longer than ${schema.maxLength}`;
  }
  if (kind === "object") {
    const v = value as Record<string, unknown>;
    const props = (schema.properties ?? {}) as Record<string, Record<string, unknown>>;
    for (const r of (schema.required as string[] | undefined) ?? []) if (!(r in v)) return `${at}.${r}: required`;
    for (const [k, x] of Object.entries(v)) {
      if (props[k]) {
        const bad = validate(props[k], x, `${at}.${k}`);
        if (bad) return bad;
      } else if (schema.additionalProperties === false) {
        return `${at}.${k}: not allowed`;
      }
    }
  }
  return "";
}
