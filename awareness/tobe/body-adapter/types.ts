// The few types of ToBe's Awareness extension (v0.2.0) this adapter uses.
// ToBe's source is not a dependency of this folder, so they are declared
// here, structurally identical to the extension's documented shapes: an
// object of these types is what ToBe expects, and what ToBe hands in is
// accepted by them. Only erasable TypeScript is used (no enums, no
// namespaces, no parameter properties), so Node's own type stripping can
// load these files as well as tsx or jiti.

/** How much something is trusted, or how urgently it should be looked at. */
export type Level = "off" | "low" | "medium" | "high" | "max";

export const LEVELS: readonly Level[] = ["off", "low", "medium", "high", "max"];

/** Who an observation comes from. */
export type Actor = "user" | "assistant" | "service" | "signal" | "adapter" | "system";

export const ACTORS: readonly Actor[] = ["user", "assistant", "service", "signal", "adapter", "system"];

/**
 * Something the environment reported. The engine pushes high and max
 * attention at once, batches low and medium, and never shows off to the
 * agent. What the agent may do in answer follows trust (low: reply only;
 * medium: no workspace writes; high and max: workspace writes).
 */
export interface Observation {
  id: string;
  adapter_id: string;
  adapter_name: string;
  source: string;
  actor: Actor;
  /**
   * The body's words for it; or, when it names evidence the body kept,
   * { text, media, evidence } (media as ToBe's Media Pipeline reads it:
   * kind, mimeType, the bytes, size, sha256, width/height or durationMs)
   * or { text, evidence, mediaError } when the body would not show it.
   * ToBe's own type leaves content to the adapter.
   */
  content: string | Record<string, unknown>;
  trust: Level;
  attention: Level;
  /** Unix milliseconds, as ToBe v0.2.0 has it (the body's RFC 3339 time, converted). */
  timestamp: number;
}

/** The result of every call into an adapter. */
export interface AdapterCallResult {
  /** The agent's tool call id. */
  call_id: string;
  adapter_id: string;
  action: string;
  /** Unix milliseconds. */
  timestamp: number;
  /** A JSON string: {"status":"success",...} or {"status":"error",...}. */
  content: string;
}

/** What observe() and interact() are called with (assumed shape). */
export interface AdapterRequest {
  call_id: string;
  action: string;
  params?: Record<string, unknown>;
}

export type HealthStatus = "stopped" | "starting" | "online" | "degraded" | "error";

export interface AdapterHealth {
  status: HealthStatus;
  /** When status last changed, Unix milliseconds. */
  since: number;
  /** When the last observation was delivered, Unix milliseconds. */
  lastEventAt?: number;
  detail?: string;
}

export interface AdapterAction {
  action: string;
  mode: "observe" | "interact";
  description: string;
  /** A JSON Schema object for the action's params. */
  parameters: Record<string, unknown>;
}

export type ObservationListener = (observation: Observation) => void;

export interface EnvAdapter {
  readonly id: string;
  readonly name: string;
  readonly autoStart: boolean;
  readonly permission: Level;
  start(args?: Record<string, unknown>): Promise<AdapterCallResult>;
  stop(): Promise<AdapterCallResult>;
  observe(req: AdapterRequest): Promise<AdapterCallResult>;
  interact(req: AdapterRequest): Promise<AdapterCallResult>;
  health(): AdapterHealth;
  subscribe(listener: ObservationListener): () => void;
  getSkillPaths(): string[];
  getActions(): AdapterAction[];
}
