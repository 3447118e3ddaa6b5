// The shapes of onward's action-provider contract and the little of pi's
// extension API this provider uses. Neither package is a dependency of
// this folder (onward is not public), so they are declared here,
// structurally: what onward and pi hand in is accepted by them, and what
// this provider hands back is what onward expects. Erasable TypeScript
// only, as in the adapter.

/** When an action runs: at the failed turn's boundary, or once settled. */
export type Phase = "boundary" | "settled";

/** What an action's execute returns. */
export type ResultKind =
  | "continue" // boundary actions only
  | "completed" // the action finished; the turn ends
  | "dispatched" // handed to another system; the business result is unknown
  | "handoff"
  | "stopped" // policy requires stopping
  | "failed"
  | "cancelled"
  | "unknown"; // may have had a side effect; the result is not known

export const RESULT_KINDS: readonly ResultKind[] = [
  "continue",
  "completed",
  "dispatched",
  "handoff",
  "stopped",
  "failed",
  "cancelled",
  "unknown",
];

/** These kinds must carry a message. */
export const KINDS_WITH_MESSAGE: readonly ResultKind[] = ["failed", "stopped", "cancelled", "unknown"];

export interface ActionResult {
  kind: ResultKind;
  message?: string;
}

/** The failure that made onward act (read-only). */
export interface Failure {
  readonly kind: string;
  readonly text: string;
  readonly provider?: string;
  readonly model?: string;
}

export interface Chain {
  readonly id: string;
  readonly handoffs: number;
  readonly maxHandoffs: number;
}

/** What execute is called with besides its params. */
export interface ActionContext {
  /** Unique per call: the provider deduplicates by it, also across crashes. */
  readonly invocationId: string;
  readonly episodeId: string;
  readonly sessionId: string;
  readonly rule: string;
  readonly failures: number;
  readonly minFailures: number;
  readonly failure: Failure;
  readonly taskPrompt?: string;
  readonly chain: Chain;
  /** Cancellation and the action's deadline, merged. */
  readonly signal: AbortSignal;
  /** settled actions: the command context, never kept beyond the call. */
  readonly host?: unknown;
  /** boundary actions. */
  readonly targetId?: string;
}

/** A JSON Schema (2020-12) object, as onward validates it. */
export type JSONSchema = Record<string, unknown>;

export interface ActionDefinition {
  /** namespace.action: each segment a lowercase letter, then lowercase letters, digits or hyphens. */
  name: string;
  description: string;
  phase: Phase;
  modes: string[];
  parameters: JSONSchema;
  handoff?: boolean;
  execute(params: Record<string, unknown>, context: ActionContext): Promise<ActionResult>;
}

/** The payload of onward:discover-actions: add registers one action. */
export interface DiscoverEvent {
  add(definition: ActionDefinition): () => void;
}

/** The event name onward discovers providers by, on pi.events. */
export const DISCOVER = "onward:discover-actions";

/** The little of pi's ExtensionAPI this provider uses. */
export interface PiLike {
  /** pi's inter-extension event bus. */
  events: {
    on(channel: string, handler: (data: unknown) => void): (() => void) | void;
  };
  /** pi's lifecycle events (session_shutdown). */
  on(event: string, handler: (event: unknown, ctx: unknown) => unknown): void;
}
