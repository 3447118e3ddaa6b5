// The provider as onward uses it, with no body behind it: discovery,
// definitions, the schema, absence of onward, unloading, and what it
// answers when the body cannot be reached. A command that would leave a
// file behind stands for the body, so "nothing was asked of it" is seen.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, test } from "node:test";
import tobeBodyOnward, { CALL_PERSON, createProvider, DEFAULT_CONFIG, loadConfig, MAKE_SAFE, stepKey } from "../index.ts";
import { Onward, Pi } from "./onward.ts";

const tmp = mkdtempSync(join(tmpdir(), "onward-provider-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** A command that leaves a file when it is run, and speaks no MCP. */
function sentinel(name: string): { command: string[]; ran: () => boolean } {
  const file = join(tmp, name);
  return { command: ["sh", "-c", `touch '${file}'; exit 3`], ran: () => existsSync(file) };
}

function setUp(command: string[], extra: Record<string, unknown> = {}) {
  const pi = new Pi();
  const onward = new Onward(pi); // loaded first: discovery waits for session_start anyway
  const provider = createProvider(pi, {
    dir: join(tmp, "cfg"),
    config: { command, request_timeout_ms: 1000, reconnect: { initial_ms: 50, max_ms: 200 }, ...extra },
  });
  return { pi, onward, provider };
}

test("discovery: both actions are added synchronously at session_start, whatever the load order, and are valid definitions", async () => {
  const pi = new Pi();
  tobeBodyOnward(pi); // the provider's factory runs before onward's
  const onward = new Onward(pi);
  assert.equal(onward.actions.size, 0, "nothing is registered before session_start");
  await pi.emitLifecycle("session_start");
  assert.deepEqual(onward.refusedDefinitions, []);
  assert.deepEqual([...onward.actions.keys()].sort(), [CALL_PERSON, MAKE_SAFE]);
  for (const d of onward.actions.values()) {
    assert.equal(d.phase, "settled");
    assert.deepEqual(d.modes, ["tui", "rpc"]);
    assert.equal(d.handoff, undefined);
  }
  // A second provider with the same names makes both names unusable.
  tobeBodyOnward(pi);
  await pi.emitLifecycle("session_start");
  assert.deepEqual([...onward.unusable].sort(), [CALL_PERSON, MAKE_SAFE]);
  const r = await onward.run(MAKE_SAFE, {}, { invocationId: "dup" });
  assert.equal(r.ran, false);
});

test("without onward the provider loads and unloads quietly", async () => {
  const pi = new Pi();
  tobeBodyOnward(pi);
  await pi.emitLifecycle("session_start");
  assert.equal(pi.listeners("onward:discover-actions"), 1);
  await pi.emitLifecycle("session_shutdown");
  assert.equal(pi.listeners("onward:discover-actions"), 0, "the discovery listener is removed at session_shutdown");
});

test("parameters outside the schema are refused by onward; the action never runs", async () => {
  const s = sentinel("schema");
  const { pi, onward } = setUp(s.command);
  await pi.emitLifecycle("session_start");
  for (const [name, params, why] of [
    [CALL_PERSON, {}, /params\.text: required/],
    [CALL_PERSON, { text: 5 }, /params\.text: want string/],
    [CALL_PERSON, { text: "" }, /shorter than 1/],
    [CALL_PERSON, { text: "x".repeat(301) }, /longer than 300/],
    [CALL_PERSON, { text: "help", tone: "yes" }, /params\.tone: want boolean/],
    [CALL_PERSON, { text: "help", volume: 11 }, /params\.volume: not allowed/],
    [MAKE_SAFE, { reason: "mine" }, /params\.reason: not allowed/],
    [MAKE_SAFE, [], /want object/],
  ] as const) {
    const r = await onward.run(name, params, { invocationId: `schema-${name}` });
    assert.equal(r.ran, false, `${name} ${JSON.stringify(params)}`);
    assert.match((r as { refused: string }).refused, why);
  }
  assert.equal(s.ran(), false, "nothing was spawned");
});

test("an aborted signal gives cancelled and nothing is asked of the body", async () => {
  const s = sentinel("aborted");
  const { pi, onward } = setUp(s.command);
  await pi.emitLifecycle("session_start");
  for (const name of [CALL_PERSON, MAKE_SAFE]) {
    const ac = new AbortController();
    ac.abort(new Error("the user pressed escape"));
    const r = await onward.run(name, name === CALL_PERSON ? { text: "help" } : {}, { invocationId: `abort-${name}`, signal: ac.signal });
    assert.ok(r.ran);
    assert.equal(r.result.kind, "cancelled");
    assert.match(r.result.message ?? "", /the user pressed escape before anything was asked of the body/);
  }
  assert.equal(s.ran(), false, "nothing was spawned");
});

test("a body that cannot be reached gives unknown, with what went wrong", async () => {
  const s = sentinel("unreachable");
  const { pi, onward } = setUp(s.command);
  await pi.emitLifecycle("session_start");
  const r = await onward.run(MAKE_SAFE, {}, { invocationId: "unreachable-1" });
  assert.ok(r.ran);
  assert.equal(r.result.kind, "unknown");
  assert.match(r.result.message ?? "", /could not reach the body with sh in \d+ attempt\(s\)/);
  assert.match(r.result.message ?? "", /exited with code 3/);
  const missing = setUp(["/nonexistent/ssh"]);
  await missing.pi.emitLifecycle("session_start");
  const m = await missing.onward.run(CALL_PERSON, { text: "help" }, { invocationId: "unreachable-2" });
  assert.ok(m.ran);
  assert.equal(m.result.kind, "unknown");
  assert.match(m.result.message ?? "", /could not run \/nonexistent\/ssh/);
});

test("a handle kept after session_shutdown returns cancelled without acting, and everything is unregistered", async () => {
  const s = sentinel("shutdown");
  const { pi, onward } = setUp(s.command);
  await pi.emitLifecycle("session_start");
  const kept = onward.actions.get(MAKE_SAFE)!;
  await pi.emitLifecycle("session_shutdown");
  assert.deepEqual(onward.unregistered.sort(), [CALL_PERSON, MAKE_SAFE]);
  assert.equal(onward.actions.size, 0);
  const r = await kept.execute({}, {
    invocationId: "after-shutdown",
    episodeId: "e",
    sessionId: "s",
    rule: "r",
    failures: 5,
    minFailures: 3,
    failure: { kind: "crash_loop", text: "" },
    chain: { id: "c", handoffs: 0, maxHandoffs: 0 },
    signal: new AbortController().signal,
  });
  assert.equal(r.kind, "cancelled");
  assert.match(r.message ?? "", /unloaded/);
  await pi.emitLifecycle("session_start");
  assert.equal(onward.actions.size, 0, "an unloaded provider registers nothing again");
  assert.equal(s.ran(), false);
});

test("the config: defaults from config.default.json, a wrong value or an unknown key named", () => {
  const c = loadConfig({ dir: join(tmp, "cfg2") });
  assert.deepEqual(c.command, ["ssh", "-T", "-o", "BatchMode=yes", "tobe@tobe-body.local"]);
  assert.equal(c.tone, true);
  assert.equal(c.light_target, null);
  assert.throws(() => loadConfig({ dir: join(tmp, "cfg2"), config: { tone: "yes" as never } }), /tone must be a boolean/);
  assert.throws(() => loadConfig({ dir: join(tmp, "cfg2"), config: { tones: true } as never }), /tones must be one of the known keys/);
  assert.throws(() => loadConfig({ dir: join(tmp, "cfg2"), config: { command: [] } }), /command must be a non-empty array/);
  // A provider whose config is wrong still loads; its actions say why.
  const pi = new Pi();
  const onward = new Onward(pi);
  createProvider(pi, { dir: join(tmp, "cfg2"), config: { ping_ms: 0 } });
  return pi.emitLifecycle("session_start").then(async () => {
    const r = await onward.run(MAKE_SAFE, {}, { invocationId: "bad-config" });
    assert.ok(r.ran);
    assert.equal(r.result.kind, "failed");
    assert.match(r.result.message ?? "", /ping_ms must be an integer >= 50; nothing was asked of the body/);
  });
});

test("config.default.json, DEFAULT_CONFIG and the schema's defaults agree, key for key", () => {
  const here = fileURLToPath(new URL("..", import.meta.url));
  const file = JSON.parse(readFileSync(join(here, "config.default.json"), "utf8"));
  const schema = JSON.parse(readFileSync(join(here, "config.schema.json"), "utf8"));
  assert.deepEqual(file, DEFAULT_CONFIG);
  const defaults = Object.fromEntries(
    Object.entries(schema.properties as Record<string, { default?: unknown }>)
      .filter(([k]) => k !== "$schema")
      .map(([k, v]) => [k, v.default]),
  );
  assert.deepEqual(defaults, DEFAULT_CONFIG);
});

test("step keys: the invocation id, or its hash when it would not fit the body's 128 bytes", () => {
  assert.equal(stepKey("inv-1", "notify"), "onward:inv-1:notify");
  const long = stepKey("x".repeat(200), "make-safe");
  assert.match(long, /^onward:sha256:[0-9a-f]{64}:make-safe$/);
  assert.equal(long, stepKey("x".repeat(200), "make-safe"));
  assert.match(stepKey("a\nb", "tone"), /^onward:sha256:/);
});
