// The adapter against a body on stdio. By default the body is
// test/fake-body.mjs; BODY_COMMAND (a JSON argv) runs the same tests
// against another server that accepts the fake's flags.
import { createHash } from "node:crypto";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import { createAdapter, loadConfig } from "../ADAPTER.ts";
import type { Config } from "../ADAPTER.ts";
import type { AdapterCallResult, EnvAdapter, Observation } from "../types.ts";

const HERE = dirname(fileURLToPath(import.meta.url));
const FAKE = join(HERE, "fake-body.mjs");
const BODY: string[] = process.env.BODY_COMMAND ? JSON.parse(process.env.BODY_COMMAND) : [process.execPath, FAKE];

const tmp = mkdtempSync(join(tmpdir(), "body-adapter-test-"));
const made: EnvAdapter[] = [];
// A failed test leaves its adapter running: stop them all at the end.
after(async () => {
  await Promise.all(made.map((a) => a.stop()));
  rmSync(tmp, { recursive: true, force: true });
});

let dirs = 0;
/** An adapter on a fresh config folder, talking to the body with flags. */
function make(flags: string[] = [], config: Partial<Config> = {}): EnvAdapter {
  const dir = join(tmp, `a${dirs++}`);
  return track({
    dir,
    config: {
      command: [...BODY, "--test-tools", ...flags],
      request_timeout_ms: 2000,
      ping_ms: 200,
      reconnect: { initial_ms: 50, max_ms: 200 },
      ...config,
    },
  });
}

function track(options: Parameters<typeof createAdapter>[0]): EnvAdapter {
  const a = createAdapter(options);
  made.push(a);
  return a;
}

function content(r: AdapterCallResult): { status: string; data?: any; error?: { reason: string; detail: string } } {
  return JSON.parse(r.content);
}

async function waitFor<T>(what: string, f: () => T | undefined | false, ms = 5000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The handles and timers this process holds, by kind. */
function resources(): Record<string, number> {
  const n: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo()) n[r] = (n[r] ?? 0) + 1;
  return n;
}

async function stopClean(a: EnvAdapter, pids: number[], before: Record<string, number>): Promise<void> {
  const r = await a.stop();
  assert.equal(content(r).status, "success");
  assert.equal(a.health().status, "stopped");
  for (const pid of pids) assert.equal(alive(pid), false, `the body's process ${pid} is gone`);
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(resources(), before, "no timers, children or pipes left behind");
}

async function bodyPid(a: EnvAdapter): Promise<number> {
  const r = await a.observe({ call_id: "pid", action: "body_status" });
  const c = content(r);
  assert.equal(c.status, "success", r.content);
  return c.data.pid;
}

test("start builds the actions from tools/list, observe succeeds, stop leaves nothing behind", async () => {
  const before = resources();
  const a = make();
  assert.equal(a.health().status, "stopped");
  assert.equal(a.id, "body");
  assert.equal(a.name, "tobe-body");
  assert.equal(a.autoStart, true);
  assert.equal(a.permission, "medium");
  const started = await a.start();
  assert.equal(content(started).status, "success", started.content);
  assert.equal(a.health().status, "online");

  const modes = Object.fromEntries(a.getActions().map((x) => [x.action, x.mode]));
  for (const name of ["body_status", "list_channels", "self_state", "estop_status", "events", "drain", "capabilities", "action_result"]) {
    assert.equal(modes[name], "observe", name);
  }
  for (const name of ["estop_trip", "gpio_set", "gpio_pulse", "audio_tone", "audio_play", "body_notify"]) {
    assert.equal(modes[name], "interact", name);
  }
  const gpio = a.getActions().find((x) => x.action === "gpio_set")!;
  assert.deepEqual((gpio.parameters as any).properties.target.enum, ["lamp", "relay1"]);

  const r = await a.observe({ call_id: "call-1", action: "body_status" });
  assert.equal(r.call_id, "call-1");
  assert.equal(r.adapter_id, "body");
  assert.equal(r.action, "body_status");
  assert.ok(Number.isInteger(r.timestamp) && Math.abs(r.timestamp - Date.now()) < 60000, `timestamp ${r.timestamp}: Unix milliseconds`);
  const c = content(r);
  assert.equal(c.status, "success");
  assert.equal(c.data.call_id, "call-1", "the agent's call id reaches the body in _meta");
  assert.deepEqual(a.getSkillPaths().map((p) => existsSync(p)), [true]);

  await stopClean(a, [c.data.pid], before);
});

test("refusals and misuse are error results, never throws", async () => {
  const before = resources();
  const a = make();
  const notYet = await a.observe({ call_id: "c0", action: "body_status" });
  assert.equal(content(notYet).error?.reason, "unavailable");
  await a.start();

  const refused = await a.interact({ call_id: "c1", action: "gpio_set", params: { target: "relay1", value: true } });
  assert.equal(refused.call_id, "c1");
  const rc = content(refused);
  assert.equal(rc.status, "error");
  assert.equal(rc.error?.reason, "risk_exceeds_trust");
  assert.ok(rc.error?.detail);

  const wrong = content(await a.observe({ call_id: "c2", action: "gpio_set", params: { target: "lamp", value: true } }));
  assert.equal(wrong.error?.reason, "wrong_mode");
  const unknown = content(await a.interact({ call_id: "c3", action: "estop_reset" }));
  assert.equal(unknown.error?.reason, "unknown_action");
  const badParams = content(await a.observe({ call_id: "c4", action: "events", params: [] as any }));
  assert.equal(badParams.error?.reason, "invalid_params");
  const nothing = content(await a.observe(undefined as any));
  assert.equal(nothing.status, "error");

  const tripped = content(await a.interact({ call_id: "c5", action: "estop_trip", params: { reason: "test" } }));
  assert.equal(tripped.status, "success");

  const pid = await bodyPid(a);
  await stopClean(a, [pid], before);
});

test("a pushed observation arrives with the adapter's id and name; drain's once", async () => {
  const before = resources();
  const a = make();
  const seen: Observation[] = [];
  const unsubscribe = a.subscribe((o) => seen.push(o));
  await a.start();
  await waitFor("drain's observations", () => seen.some((o) => o.id === "drain-1"));

  const pushed = {
    id: "obs-1",
    source: "body/button",
    actor: "signal",
    content: "button pressed: front",
    trust: "medium",
    attention: "medium",
    timestamp: new Date().toISOString(),
    data: { channel: "front" },
  };
  const r = await a.observe({ call_id: "c1", action: "__push", params: pushed });
  assert.equal(content(r).status, "success");
  const got = await waitFor("the pushed observation", () => seen.find((o) => o.id === "obs-1"));
  assert.equal(got.adapter_id, "body");
  assert.equal(got.adapter_name, "tobe-body");
  assert.equal(got.content, "button pressed: front");
  assert.equal(got.timestamp, Date.parse(pushed.timestamp), "the body's time, in Unix milliseconds");
  assert.deepEqual((got as any).data, { channel: "front" });
  assert.ok(a.health().lastEventAt);

  // The same id again, and a malformed one: neither is delivered.
  await a.observe({ call_id: "c2", action: "__push", params: pushed });
  await a.observe({ call_id: "c3", action: "__push", params: { id: "bad", content: 3 } });
  await a.observe({ call_id: "c4", action: "body_status" });
  assert.equal(seen.filter((o) => o.id === "obs-1").length, 1);
  assert.equal(seen.some((o) => o.id === "bad"), false);

  unsubscribe();
  await a.observe({ call_id: "c5", action: "__push", params: { ...pushed, id: "obs-2" } });
  await a.observe({ call_id: "c6", action: "body_status" });
  assert.equal(seen.some((o) => o.id === "obs-2"), false, "no delivery after unsubscribe");

  const pid = await bodyPid(a);
  await stopClean(a, [pid], before);
});

test("a dropped link: degraded and link.lost, then reconnected, online and link.restored, drain delivered once", async () => {
  const before = resources();
  const state = join(tmp, "generations");
  const a = make(["--state", state]);
  const seen: Observation[] = [];
  a.subscribe((o) => seen.push(o));
  await a.start();
  await waitFor("drain-1", () => seen.some((o) => o.id === "drain-1"));
  const pid1 = await bodyPid(a);

  const exit = await a.interact({ call_id: "bye", action: "__exit" });
  assert.equal(content(exit).error?.reason, "link_lost");

  const lost = await waitFor("link.lost", () => seen.find((o) => String(o.content).startsWith("link.lost")));
  assert.equal(lost.attention, "high");
  assert.equal(lost.actor, "system");
  assert.equal(lost.source, "tobe-body");
  assert.equal(lost.adapter_id, "body");
  assert.equal(lost.adapter_name, "tobe-body");

  const restored = await waitFor("link.restored", () => seen.find((o) => String(o.content).startsWith("link.restored")));
  assert.equal(restored.attention, "medium");
  assert.equal(a.health().status, "online");
  await waitFor("drain-2", () => seen.some((o) => o.id === "drain-2"));
  assert.equal(readFileSync(state, "utf8"), "2");
  assert.equal(seen.filter((o) => o.id === "shared").length, 1, "drained twice, delivered once");
  assert.equal(seen.filter((o) => o.id === "drain-1").length, 1);
  assert.equal(seen.filter((o) => o.id === "drain-2").length, 1);
  assert.ok(seen.indexOf(lost) < seen.indexOf(restored));

  const pid2 = await bodyPid(a);
  assert.notEqual(pid1, pid2);
  assert.equal(alive(pid1), false);
  await stopClean(a, [pid1, pid2], before);
});

test("the link seen degraded while the body is away", async () => {
  const before = resources();
  // The body goes away 300 ms after each handshake; reconnect waits 400 ms.
  const a = make(["--exit-after-ms", "300"], { reconnect: { initial_ms: 400, max_ms: 400 } });
  await a.start();
  const pid = await bodyPid(a);
  const h = await waitFor("degraded", () => {
    const h = a.health();
    return h.status === "degraded" && h;
  });
  assert.match(h.detail ?? "", /link lost/);
  const r = content(await a.observe({ call_id: "c1", action: "body_status" }));
  assert.equal(r.error?.reason, "unavailable");
  await waitFor("online again", () => a.health().status === "online");
  await stopClean(a, [pid], before);
});

test("the heartbeat keeps a session alive past the body's silence limit", async () => {
  const before = resources();
  const a = make(["--silence-ms", "600"], { ping_ms: 150 });
  const seen: Observation[] = [];
  a.subscribe((o) => seen.push(o));
  await a.start();
  const pid = await bodyPid(a);
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(a.health().status, "online");
  assert.equal(await bodyPid(a), pid);
  assert.equal(seen.some((o) => String(o.content).startsWith("link.lost")), false);
  await stopClean(a, [pid], before);
});

test("a timeout is an error result, and the link stays up", async () => {
  const before = resources();
  const a = make([], { request_timeout_ms: 300 });
  await a.start();
  const t0 = Date.now();
  const r = await a.observe({ call_id: "slow", action: "__hang" });
  assert.ok(Date.now() - t0 < 1500);
  assert.equal(r.call_id, "slow");
  const c = content(r);
  assert.equal(c.status, "error");
  assert.equal(c.error?.reason, "timeout");
  assert.equal(a.health().status, "online");
  const pid = await bodyPid(a);
  await stopClean(a, [pid], before);
});

test("an observation that names evidence carries it as ToBe's media when the body shows it, and says why when it does not", async () => {
  const before = resources();
  const a = make();
  const seen: Observation[] = [];
  a.subscribe((o) => seen.push(o));
  await a.start();
  const bytes = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 0xff, 0xd9]);
  const sha = createHash("sha256").update(bytes).digest("hex");
  const base = { source: "camera.front", actor: "signal", content: "Motion in door seen by camera.front.", trust: "medium", attention: "high", timestamp: new Date().toISOString() };
  await a.observe({ call_id: "e1", action: "__push", params: { ...base, id: "ev-1", evidence: { id: "ev-ok", sha256: sha, media_type: "image/jpeg", seq: 12 } } });
  const got = await waitFor("the observation with its image", () => seen.find((o) => o.id === "ev-1"));
  const c = got.content as { text: string; media: Record<string, unknown>; evidence: Record<string, unknown> };
  assert.equal(c.text, "Motion in door seen by camera.front.");
  assert.equal(c.media.kind, "image");
  assert.equal(c.media.mimeType, "image/jpeg");
  assert.ok(c.media.data instanceof Uint8Array);
  assert.deepEqual([...(c.media.data as Uint8Array)], [...bytes]);
  assert.equal(c.media.size, bytes.byteLength);
  assert.equal(c.media.sha256, sha);
  assert.equal(c.media.width, 4);
  assert.equal(c.media.height, 3);
  assert.equal(c.evidence.id, "ev-ok");
  // One the body will not show: the text, and why.
  await a.observe({ call_id: "e2", action: "__push", params: { ...base, id: "ev-2", evidence: { id: "ev-secret" } } });
  const refused = await waitFor("the observation without its image", () => seen.find((o) => o.id === "ev-2"));
  const r = refused.content as { text: string; media?: unknown; mediaError: { code: string; message: string } };
  assert.equal(r.media, undefined);
  assert.equal(r.mediaError.code, "EVIDENCE_NOT_SHOWN");
  assert.match(r.mediaError.message, /^no_grant/);
  // Bytes that are not the ones the observation names are not attached.
  await a.observe({ call_id: "e3", action: "__push", params: { ...base, id: "ev-3", evidence: { id: "ev-ok", sha256: "0".repeat(64) } } });
  const damaged = await waitFor("the observation with other bytes", () => seen.find((o) => o.id === "ev-3"));
  assert.equal((damaged.content as { mediaError: { code: string } }).mediaError.code, "EVIDENCE_DAMAGED");
  const pid = await bodyPid(a);
  await stopClean(a, [pid], before);
});

test("a line over 32 MiB is dropped and counted, one of 3 MiB (a piece of evidence) is not, and the session goes on", async () => {
  const before = resources();
  const a = make();
  const seen: Observation[] = [];
  a.subscribe((o) => seen.push(o));
  await a.start();
  const m = content(await a.observe({ call_id: "medium", action: "__mediumline" }));
  assert.equal(m.status, "success");
  assert.equal((m.data as { data: string }).data.length, 3 * 1024 * 1024);
  const r = content(await a.observe({ call_id: "big", action: "__bigline" }));
  assert.equal(r.status, "success");
  assert.equal(seen.some((o) => o.id === "big"), false);
  assert.equal(a.health().status, "online");
  assert.match(a.health().detail ?? "", /1 overlong line/);
  const pid = await bodyPid(a);
  await stopClean(a, [pid], before);
});

test("a body that cannot be reached: start is an error result, retried until stopped", async () => {
  const before = resources();
  const a = track({
    dir: join(tmp, "unreachable"),
    config: {
      command: [process.execPath, "-e", "process.stderr.write('ssh: connect to host body: No route to host\\n'); process.exit(255)"],
      reconnect: { initial_ms: 50, max_ms: 100 },
    },
  });
  const r = await a.start();
  const c = content(r);
  assert.equal(c.status, "error");
  assert.match(c.error?.detail ?? "", /No route to host/);
  assert.equal(a.health().status, "error");
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(a.health().status, "error");
  await stopClean(a, [], before);

  const missing = track({ dir: join(tmp, "missing"), config: { command: [join(tmp, "no-such-command")] } });
  const m = content(await missing.start());
  assert.equal(m.status, "error");
  await stopClean(missing, [], before);
});

test("a body that ignores stdin's end and SIGTERM is killed", async () => {
  const before = resources();
  const a = make(["--stubborn", "--silence-ms", "60000"]);
  await a.start();
  const pid = await bodyPid(a);
  const t0 = Date.now();
  await stopClean(a, [pid], before);
  assert.ok(Date.now() - t0 >= 1900, "closed stdin, waited, SIGTERM, waited, SIGKILL");
});

test("a body speaking another protocol version is refused", async () => {
  const before = resources();
  const a = make(["--version", "2024-11-05"], { reconnect: { initial_ms: 5000, max_ms: 5000 } });
  const c = content(await a.start());
  assert.equal(c.error?.reason, "protocol_mismatch");
  await stopClean(a, [], before);
});

test("config: config.default.json is copied to config.json on first use; config.json wins over it", () => {
  const dir = join(tmp, "config");
  rmSync(dir, { recursive: true, force: true });
  const a = createAdapter({ dir: join(tmp, "nothing-here") });
  assert.equal(a.id, "body");
  // The folder's own default config, copied.
  const src = readFileSync(join(HERE, "..", "config.default.json"), "utf8");
  const d = mkdtempSync(join(tmp, "cfg-"));
  writeFileSync(join(d, "config.default.json"), src);
  const c1 = loadConfig({ dir: d });
  assert.deepEqual(JSON.parse(readFileSync(join(d, "config.json"), "utf8")), JSON.parse(src));
  assert.deepEqual(c1.command, ["ssh", "-T", "-o", "BatchMode=yes", "tobe@tobe-body.local"]);
  assert.equal(c1.request_timeout_ms, 10000);
  assert.equal(c1.ping_ms, 1000);
  assert.deepEqual(c1.reconnect, { initial_ms: 500, max_ms: 30000 });
  writeFileSync(join(d, "config.json"), JSON.stringify({ id: "arm", ping_ms: 500, reconnect: { max_ms: 1000 } }));
  const c2 = loadConfig({ dir: d, config: { name: "the arm" } });
  assert.equal(c2.id, "arm");
  assert.equal(c2.name, "the arm");
  assert.equal(c2.ping_ms, 500);
  assert.deepEqual(c2.reconnect, { initial_ms: 500, max_ms: 1000 });
  assert.throws(() => loadConfig({ dir: d, config: { command: [] } }), /command/);
  assert.throws(() => loadConfig({ dir: d, config: { id: "Not An Id" } }), /id/);
});
