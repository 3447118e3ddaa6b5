// An agent as a user writes one with the official SDK: its Client, as it
// comes, over the command in argv (tobe-body stdio, or ssh to its forced
// command), asks for a long pulse of the LED and waits for its result.
// It says "connected" on stdout once the session is up, then the result.
// The deadman test runs it as a process of its own, to stop it (SIGSTOP)
// while the pulse runs: then nothing in it answers the body's pings.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const client = new Client({ name: "tobe-body-pulse", version: "0.1.0" });
await client.connect(new StdioClientTransport({ command, args }));
process.stdout.write("connected\n");
const r = await client.callTool({ name: "gpio_pulse", arguments: { target: "gpio.led", duration_ms: 20000 } });
process.stdout.write(`${JSON.stringify(r)}\n`);
await client.close();
