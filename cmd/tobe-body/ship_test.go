package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tobe-body/tobe-body/body/config"
)

// unitSettings reads a unit file's settings: key → values in order.
func unitSettings(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is no setting", path, line)
		}
		out[k] = append(out[k], v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The unit lets the body open its devices and nothing else, and the
// groups it runs with are the ones the udev rules give those devices.
func TestUnitDevicesAndGroups(t *testing.T) {
	unit := unitSettings(t, filepath.Join(repoRoot, "systemd", "tobe-body.service"))
	for _, tc := range []struct{ key, want string }{
		{"Type", "notify"}, {"NotifyAccess", "main"}, {"DevicePolicy", "closed"}, {"User", "tobe-body"},
		{"StateDirectory", "tobe-body"}, {"Restart", "always"}, {"NoNewPrivileges", "yes"}, {"CapabilityBoundingSet", ""},
	} {
		if got := unit[tc.key]; len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s=%q, want %q", tc.key, got, tc.want)
		}
	}
	if len(unit["WatchdogSec"]) != 1 {
		t.Errorf("WatchdogSec=%q: the daemon's pings need one", unit["WatchdogSec"])
	}
	allow := unit["DeviceAllow"]
	want := []string{"char-gpiochip rw", "char-video4linux rw", "char-alsa rw", "char-input rw"}
	if !slices.Equal(allow, want) {
		t.Errorf("DeviceAllow %q, want exactly %q", allow, want)
	}
	groups := strings.Fields(strings.Join(unit["SupplementaryGroups"], " "))
	b, err := os.ReadFile(filepath.Join(repoRoot, "systemd", "60-tobe-body.rules"))
	if err != nil {
		t.Fatal(err)
	}
	ruleGroup := regexp.MustCompile(`SUBSYSTEM=="([a-z0-9]+)".*GROUP="([a-z]+)", MODE="0660"`)
	subsystems := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := ruleGroup.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("udev rule %q: want SUBSYSTEM==…, GROUP=…, MODE=\"0660\"", line)
			continue
		}
		subsystems[m[1]] = true
		if !slices.Contains(groups, m[2]) {
			t.Errorf("udev gives %s devices to %s, which is not among the unit's SupplementaryGroups %q", m[1], m[2], groups)
		}
	}
	for _, s := range []string{"gpio", "video4linux", "sound", "input"} {
		if !subsystems[s] {
			t.Errorf("no udev rule gives the body's group the %s devices", s)
		}
	}
}

// systemd-analyze verify passes on the unit, and security scores it at
// 2.0 or lower (a lower score is less exposed).
func TestUnitVerifiesAndScores(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("no systemd-analyze here (Debian's systemd package has it)")
	}
	src, err := os.ReadFile(filepath.Join(repoRoot, "systemd", "tobe-body.service"))
	if err != nil {
		t.Fatal(err)
	}
	// verify wants ExecStart's binary to exist: this test's stands in.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "tobe-body.service")
	if err := os.WriteFile(unit, []byte(strings.ReplaceAll(string(src), "/usr/bin/tobe-body", self)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("systemd-analyze", "verify", unit).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err := exec.Command("systemd-analyze", "security", "--offline=true", unit).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for tobe-body.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security printed no score:\n%s", out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security: %.1f", score)
	if score > 2.0 {
		t.Errorf("the unit's exposure is %.1f, more than 2.0:\n%s", score, out)
	}
}

// What a body installs (scripts/stage.sh, which install.sh, make dist
// and the Buildroot package run): exactly these files, with these modes,
// and the default config passes the schema.
func TestStagedFiles(t *testing.T) {
	if _, err := exec.LookPath("install"); err != nil {
		t.Skip("no install(1) here")
	}
	dest := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(repoRoot, "scripts", "stage.sh"), dest, self).CombinedOutput(); err != nil {
		t.Fatalf("stage.sh: %v\n%s", err, out)
	}
	want := map[string]os.FileMode{
		"usr/bin/tobe-body":                               0o755,
		"usr/lib/systemd/system/tobe-body.service":        0o644,
		"usr/lib/udev/rules.d/60-tobe-body.rules":         0o644,
		"usr/share/tobe-body/config.default.json":         0o644,
		"usr/share/tobe-body/config.schema.json":          0o644,
		"usr/share/tobe-body/profile.schema.json":         0o644,
		"usr/share/doc/tobe-body/README.md":               0o644,
		"usr/share/doc/tobe-body/authorized_keys.example": 0o644,
	}
	profiles, _ := filepath.Glob(filepath.Join(repoRoot, "board", "profiles", "*.json"))
	if len(profiles) == 0 {
		t.Fatal("no board profiles")
	}
	for _, p := range profiles {
		want["usr/share/tobe-body/boards/"+filepath.Base(p)] = 0o644
	}
	got := map[string]os.FileMode{}
	filepath.WalkDir(dest, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if !d.IsDir() {
			info, _ := d.Info()
			rel, _ := filepath.Rel(dest, p)
			got[rel] = info.Mode().Perm()
		}
		return nil
	})
	for f, mode := range want {
		if m, ok := got[f]; !ok {
			t.Errorf("%s is not installed", f)
		} else if m != mode {
			t.Errorf("%s has mode %v, want %v", f, m, mode)
		}
	}
	for f := range got {
		if _, ok := want[f]; !ok {
			t.Errorf("%s is installed, and no one said so", f)
		}
	}
	if err := config.CheckFile(filepath.Join(dest, "usr/share/tobe-body/config.default.json")); err != nil {
		t.Errorf("the default config: %v", err)
	}
}
