// A real sshd for the tests (Debian's OpenSSH, on loopback with a
// throwaway host key) whose one authorized key runs a forced command, as a
// body is set up for its agent; and the ssh argv that reaches it with that
// key. Shared by the adapter's and the onward provider's tests.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";

/** Why a test through sshd cannot run here, or false. */
export function sshdSkip(bin: string): string | false {
  if (bin === "") return "BODY_BIN is not set (make test-adapter sets it)";
  if (process.getuid?.() !== 0) return "sshd needs root here (it logs in as this user with a forced command)";
  if (!existsSync("/usr/sbin/sshd")) return "no /usr/sbin/sshd (scripts/deps.sh installs openssh-server)";
  return false;
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * Starts sshd with its files in dir; forced is the command every login
 * with the client key runs. Returns the ssh argv (no remote command) and
 * the sshd process, which the caller stops.
 */
export async function startSshd(dir: string, forced: string): Promise<{ command: string[]; sshd: ChildProcess }> {
  for (const k of ["host", "client"]) execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", k, "-f", join(dir, k)]);
  writeFileSync(join(dir, "authorized_keys"), `restrict,command="${forced}" ${readFileSync(join(dir, "client.pub"), "utf8")}`, { mode: 0o600 });
  const port = await freePort();
  writeFileSync(join(dir, "sshd_config"), [
    `Port ${port}`, "ListenAddress 127.0.0.1", `HostKey ${join(dir, "host")}`, `AuthorizedKeysFile ${join(dir, "authorized_keys")}`,
    "PidFile none", "StrictModes no", "UsePAM no", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
    "PermitRootLogin prohibit-password", "LogLevel ERROR", "",
  ].join("\n"));
  mkdirSync("/run/sshd", { recursive: true });
  const sshd = spawn("/usr/sbin/sshd", ["-D", "-e", "-f", join(dir, "sshd_config")], { stdio: "ignore" });
  const command = ["ssh", "-T", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
    "-o", "LogLevel=ERROR", "-i", join(dir, "client"), "-p", String(port), "root@127.0.0.1"];
  return { command, sshd };
}
