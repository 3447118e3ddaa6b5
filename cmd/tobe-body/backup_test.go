package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/cmd/tobe-body/internal/cli"
	"github.com/tobe-body/tobe-body/ledger"
)

// fileID is what says a file was not replaced: its device and inode,
// and its bytes when they should not change.
type fileID struct {
	dev, ino uint64
	data     []byte
}

func idOf(t *testing.T, path string, withData bool) fileID {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	id := fileID{dev: uint64(st.Dev), ino: st.Ino}
	if withData {
		if id.data, err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// daemonFiles are the files the review replaced through the old backup,
// with whether their bytes stay put while the daemon runs (the ledger's
// grow; the socket has none).
var daemonFiles = map[string]bool{body.LedgerFile: false, body.IdentityFile: true, "tobe-body.lock": true, cli.AdminSocket: false}

func idsOf(t *testing.T, data string) map[string]fileID {
	t.Helper()
	ids := map[string]fileID{}
	for name, withData := range daemonFiles {
		ids[name] = idOf(t, filepath.Join(data, name), withData)
	}
	return ids
}

func checkUntouched(t *testing.T, data string, before map[string]fileID, names []string) {
	t.Helper()
	for name, id := range idsOf(t, data) {
		if b := before[name]; id.dev != b.dev || id.ino != b.ino || !bytes.Equal(id.data, b.data) {
			t.Errorf("%s was replaced or changed: inode %d, want %d", name, id.ino, b.ino)
		}
	}
	var now []string
	ents, _ := os.ReadDir(data)
	for _, e := range ents {
		now = append(now, e.Name())
	}
	if strings.Join(now, " ") != strings.Join(names, " ") {
		t.Errorf("the data directory holds %v, want %v", now, names)
	}
}

// rawCall sends one JSON-RPC line on the admin socket and returns the
// response line.
func rawCall(t *testing.T, sock, line string) string {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintln(c, line)
	resp, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// The attack of the review: a local administrator at max trust asks the
// daemon for a backup at a path of its choosing (the live ledger, the
// identity, the lock, the socket, and the same through a symlinked
// directory). The daemon takes no path: the strict decoder refuses the
// request before anything runs, and every file is the one it was. The
// CLI, which now writes the file itself, refuses those destinations too.
func TestBackupToADaemonFileIsRefused(t *testing.T) {
	d := startDaemon(t, "")
	defer d.stop(t)
	sock := filepath.Join(d.data, cli.AdminSocket)
	link := filepath.Join(t.TempDir(), "innocent")
	if err := os.Symlink(d.data, link); err != nil {
		t.Fatal(err)
	}
	before := idsOf(t, d.data)
	ents, _ := os.ReadDir(d.data)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	for _, name := range []string{body.LedgerFile, body.IdentityFile, "tobe-body.lock", cli.AdminSocket, "symlink/" + body.LedgerFile} {
		target := filepath.Join(d.data, name)
		if n, ok := strings.CutPrefix(name, "symlink/"); ok {
			target = filepath.Join(link, n)
		}
		t.Run("daemon/"+name, func(t *testing.T) {
			line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ledger.backup", "params": map[string]string{"path": target}})
			resp := rawCall(t, sock, string(line))
			var r struct {
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
					Data    struct {
						Reason string `json:"reason"`
					} `json:"data"`
				} `json:"error"`
			}
			json.Unmarshal([]byte(resp), &r)
			const want = `ledger.backup: invalid_params: params: json: unknown field "path"`
			if r.Error.Code != -32602 || r.Error.Data.Reason != "invalid_params" || r.Error.Message != want {
				t.Fatalf("got %s, want -32602 %q", resp, want)
			}
		})
		t.Run("cli/"+name, func(t *testing.T) {
			out, err := runCmd(t, "ledger", "backup", target, "--data", d.data)
			want := "ledger backup: " + target + " is in the body's data directory " + d.data + "; nothing is written there"
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v %s, want %q", err, out, want)
			}
		})
	}
	checkUntouched(t, d.data, before, names)
}

var backupLine = regexp.MustCompile(`backup: (\S+), (\d+) bytes, last seq (\d+), sha256 ([0-9a-f]{64})`)

// openBackup opens a backup as a ledger and returns its last sequence.
func openBackup(t *testing.T, path string) uint64 {
	t.Helper()
	s, err := ledger.Open(ledger.Options{Path: path, Projections: act.Projections(), OutboxAsIs: true})
	if err != nil {
		t.Fatalf("the backup does not open as a ledger: %v", err)
	}
	defer s.Close()
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Errorf("the backup's verify: %v %v", r.Problems, err)
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.LastSeq
}

// A backup through the daemon is written by the CLI, 0600, with the
// progress shown (from a small size here); it opens as a ledger at the
// last sequence it says. "-" writes the same to stdout. Without the
// daemon the CLI copies the file it opens, the same way.
func TestBackupThroughTheDaemonAndOffline(t *testing.T) {
	old := cli.ShowProgressFrom
	cli.ShowProgressFrom = 0
	t.Cleanup(func() { cli.ShowProgressFrom = old })
	d := startDaemon(t, "")
	dir := t.TempDir()
	dst := filepath.Join(dir, "b.db")
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"ledger", "backup", dst, "--data", d.data}, nil, &out, &errOut); err != nil {
		t.Fatalf("backup: %v\n%s%s", err, out.String(), errOut.String())
	}
	m := backupLine.FindStringSubmatch(out.String())
	if m == nil || m[1] != dst {
		t.Fatalf("backup said %q", out.String())
	}
	for _, want := range []string{"\rtaking the snapshot: 0 of 0 MiB (100%)\n", "\rreceiving: 0 of 0 MiB (100%)\n"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr %q lacks %q", errOut.String(), want)
		}
	}
	fi, err := os.Stat(dst)
	if err != nil || fi.Mode().Perm() != 0o600 || strconv.FormatInt(fi.Size(), 10) != m[2] {
		t.Errorf("backup file %v (%v), want mode 0600 and %s bytes", fi.Mode(), err, m[2])
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the destination's directory holds %d files, want the backup alone", len(ents))
	}
	if got := strconv.FormatUint(openBackup(t, dst), 10); got != m[3] {
		t.Errorf("the backup is at seq %s, it said %s", got, m[3])
	}

	// A symlink in the destination's path is the user's own business:
	// followed, as for any file the user writes.
	link := filepath.Join(t.TempDir(), "mine")
	os.Symlink(dir, link)
	if out, err := runCmd(t, "ledger", "backup", filepath.Join(link, "c.db"), "--data", d.data); err != nil {
		t.Errorf("backup through a symlinked directory: %v %s", err, out)
	} else if fi, err := os.Lstat(filepath.Join(dir, "c.db")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the backup through a symlinked directory is not in its target: %v", err)
	}

	out.Reset()
	errOut.Reset()
	if err := run(t.Context(), []string{"ledger", "backup", "-", "--data", d.data}, nil, &out, &errOut); err != nil {
		t.Fatalf("backup to stdout: %v\n%s", err, errOut.String())
	}
	m = backupLine.FindStringSubmatch(errOut.String())
	if sum := sha256.Sum256(out.Bytes()); m == nil || m[1] != "stdout" || hex.EncodeToString(sum[:]) != m[4] || strconv.Itoa(out.Len()) != m[2] {
		t.Errorf("stdout has %d bytes; stderr says %q", out.Len(), errOut.String())
	}

	d.stop(t)
	out.Reset()
	if err := run(t.Context(), []string{"ledger", "backup", dst, "--data", d.data}, nil, &out, io.Discard); err != nil {
		t.Fatalf("offline backup: %v", err)
	}
	m = backupLine.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("offline backup said %q", out.String())
	}
	if got := strconv.FormatUint(openBackup(t, dst), 10); got != m[3] {
		t.Errorf("the offline backup is at seq %s, it said %s", got, m[3])
	}
	if _, err := runCmd(t, "ledger", "backup", filepath.Join(d.data, "x.db"), "--data", d.data); err == nil || !strings.Contains(err.Error(), "is in the body's data directory") {
		t.Errorf("offline into the data directory: %v", err)
	}
}

// The destination's free space is checked before anything is written
// there, through the daemon and without it.
func TestBackupWithoutRoomAtTheDestination(t *testing.T) {
	old := cli.DestFree
	cli.DestFree = func(string) (int64, error) { return 1000, nil }
	t.Cleanup(func() { cli.DestFree = old })
	d := startDaemon(t, "")
	dir := t.TempDir()
	dst := filepath.Join(dir, "b.db")
	check := func(how string) {
		t.Helper()
		out, err := runCmd(t, "ledger", "backup", dst, "--data", d.data)
		want := regexp.MustCompile(`^ledger backup: (ledger: snapshot: )?` + regexp.QuoteMeta(dir) + ` has 1000 bytes free, and the file needs \d+: nothing was written$`)
		if err == nil || !want.MatchString(err.Error()) {
			t.Errorf("%s: got %v %s, want %s", how, err, out, want)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%s: the destination's directory holds %d files, want none", how, len(ents))
		}
	}
	check("through the daemon")
	d.stop(t)
	check("offline")
}

// A data directory without room for the snapshot and the ledger's
// reserve refuses the backup before the daemon writes anything, naming
// both figures.
func TestBackupRefusedWhenTheDataDirIsFull(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	os.Mkdir(data, 0o750)
	if err := syscall.Mount("tmpfs", data, "tmpfs", 0, "size=4m,mode=0750"); err != nil {
		t.Skipf("cannot mount a small tmpfs here: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(data, syscall.MNT_DETACH) })
	cfg := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(cfg, []byte(`{"version": 1, "monitor": {"interval_ms": 100, "print": "always"}}`), 0o600)
	d := startDaemonIn(t, data, cfg)
	defer d.stop(t)
	dst := filepath.Join(t.TempDir(), "b.db")
	_, err := runCmd(t, "ledger", "backup", dst, "--data", data)
	want := regexp.MustCompile(`ledger\.backup: failed: ledger: snapshot: not enough free space: ` + regexp.QuoteMeta(data) + ` has \d+ bytes free, and a snapshot of \d+ bytes needs \d+ \(its size and a reserve for the ledger to grow\)`)
	if err == nil || !want.MatchString(err.Error()) {
		t.Errorf("got %v, want %s", err, want)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the destination: %v, want none", err)
	}
}

// An administrator who is not the daemon's user (the review's case: the
// backup was the daemon's, 0600, unreadable to who asked) gets a backup
// it owns and reads: the CLI runs as nobody, a local administrator at
// high trust by the config, and writes into its own directory; then, as
// nobody again, reads the backup as a ledger.
func TestBackupAsAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run the command as another user")
	}
	uid, gid := 65534, 65534
	if u, err := user.Lookup("nobody"); err == nil {
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
	}
	root, err := os.MkdirTemp("", "tobe-backup-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o711) // nobody may pass, not list
	data, outDir := filepath.Join(root, "data"), filepath.Join(root, "out")
	for _, dir := range []string{data, outDir} {
		if err := os.Mkdir(dir, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	os.Chown(data, 0, gid) // the admin group's, as a unit's StateDirectory with Group= makes it
	os.Chown(outDir, uid, gid)
	bin := filepath.Join(root, "tobe-body")
	if err := copyFile(os.Args[0], bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(root, "config.json")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{"version": 1, "monitor": {"interval_ms": 100, "print": "always"}, "act": {"principals": [{"uid": 0, "trust": "max"}, {"uid": %d, "trust": "high"}]}}`, uid)), 0o600)
	d := startDaemonIn(t, data, cfg)
	defer d.stop(t)
	os.Chown(filepath.Join(data, cli.AdminSocket), 0, gid)
	asNobody := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"TOBE_BODY_TEST_MAIN=1", "PATH=/usr/bin:/bin", "HOME=/nonexistent"}
		cmd.Dir = outDir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if errors.Is(err, syscall.ENOEXEC) {
			t.Skipf("cannot re-exec the test binary here: %v", err)
		}
		return out.String(), err
	}
	dst := filepath.Join(outDir, body.LedgerFile)
	out, err := asNobody("ledger", "backup", dst, "--data", data)
	if err != nil {
		t.Fatalf("backup as uid %d: %v\n%s", uid, err, out)
	}
	m := backupLine.FindStringSubmatch(out)
	if m == nil || m[1] != dst {
		t.Fatalf("backup said %q", out)
	}
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid || fi.Mode().Perm() != 0o600 {
		t.Errorf("the backup is uid %d mode %v, want uid %d mode 0600", st.Uid, fi.Mode().Perm(), uid)
	}
	out, err = asNobody("ledger", "stats", "--json", "--data", outDir)
	var st ledger.Stats
	if err != nil || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("stats of the backup as uid %d: %v\n%s", uid, err, out)
	}
	if strconv.FormatUint(st.LastSeq, 10) != m[3] {
		t.Errorf("the backup read as uid %d is at seq %d, it said %s", uid, st.LastSeq, m[3])
	}
	// The administrator's own attack fails the same way.
	if out, err := asNobody("ledger", "backup", filepath.Join(data, body.IdentityFile), "--data", data); err == nil || !strings.Contains(out, "is in the body's data directory") {
		t.Errorf("backup over the identity as uid %d: %v\n%s", uid, err, out)
	}
}

func copyFile(from, to string, mode os.FileMode) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
