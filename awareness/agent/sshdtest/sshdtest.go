// Package sshdtest runs Debian's OpenSSH server on loopback for the
// agent's tests and benchmarks: a throwaway host key, and one client key
// whose forced command is the bridge, as a body's authorized_keys has it
// (systemd/authorized_keys.example). It runs sshd as root, which logs in
// as root with that key.
package sshdtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Path is where Debian's package installs sshd.
const Path = "/usr/sbin/sshd"

// SSHD is one sshd on 127.0.0.1.
type SSHD struct {
	Port int
	// Key is the client's private key, the one whose forced command runs.
	Key string
	cmd *exec.Cmd
	log *os.File
	dir string
}

// Start runs sshd with its files in dir, giving the client's key the
// forced command forced (run by the user's shell). It returns once sshd
// listens, or an error saying what is missing.
func Start(dir, forced string) (*SSHD, error) {
	if os.Getuid() != 0 {
		return nil, errors.New("sshd runs as root here (it logs in as root with a forced command)")
	}
	if _, err := os.Stat(Path); err != nil {
		return nil, fmt.Errorf("no %s (scripts/deps.sh installs openssh-server): %w", Path, err)
	}
	for _, k := range []string{"host", "client"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", k, "-f", filepath.Join(dir, k)).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(dir, "client.pub"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), fmt.Appendf(nil, "restrict,command=%q %s", forced, pub), 0o600); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
AuthorizedKeysFile %s
PidFile none
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
LogLevel ERROR
`, port, filepath.Join(dir, "host"), filepath.Join(dir, "authorized_keys"))
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil { // its privilege separation directory
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "sshd.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(Path, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	s := &SSHD{Port: port, Key: filepath.Join(dir, "client"), cmd: cmd, log: logf, dir: dir}
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Close()
			return nil, fmt.Errorf("sshd did not listen on %d: %v", port, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Command is the client's ssh to the server as root, asking to run
// remote (which the forced command replaces).
func (s *SSHD) Command(remote ...string) *exec.Cmd {
	args := []string{"-T", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
		"-i", s.Key, "-p", fmt.Sprint(s.Port), "root@127.0.0.1"}
	return exec.Command("ssh", append(args, remote...)...)
}

// Log is what sshd wrote so far.
func (s *SSHD) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "sshd.log"))
	return string(b)
}

// Close stops sshd and waits for it.
func (s *SSHD) Close() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.log.Close()
}
