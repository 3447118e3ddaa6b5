package main

import (
	"bufio"
	"fmt"
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
		"usr/bin/tobe-body":                                0o755,
		"usr/lib/systemd/system/tobe-body.service":         0o644,
		"usr/lib/udev/rules.d/60-tobe-body.rules":          0o644,
		"usr/share/tobe-body/config.default.json":          0o644,
		"usr/share/tobe-body/config.schema.json":           0o644,
		"usr/share/tobe-body/profile.schema.json":          0o644,
		"usr/share/doc/tobe-body/README.md":                0o644,
		"usr/share/doc/tobe-body/authorized_keys.example":  0o644,
		"usr/share/doc/tobe-body/LICENSE":                  0o644,
		"usr/share/doc/tobe-body/third-party-licenses.txt": 0o644,
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

// The Buildroot external tree, checked without Buildroot: its Config.in
// files and package .mk parse, with every symbol they use declared by
// the tree or pinned in upstream-symbols.txt (which
// buildroot/check-buildroot.sh holds to a Buildroot checkout); each
// defconfig names only such symbols and the tree's files, selects the
// package and systemd, and keeps the root read-only; the card's data
// partition is its last.
func TestBuildrootTree(t *testing.T) {
	br := filepath.Join(repoRoot, "buildroot")
	read := func(rel string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(br, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if !regexp.MustCompile(`(?m)^name: TOBE_BODY$`).MatchString(read("external.desc")) {
		t.Error("external.desc names no TOBE_BODY")
	}
	known := map[string]bool{}
	for _, l := range strings.Split(read("upstream-symbols.txt"), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			known[l] = true
		}
	}
	symbol := regexp.MustCompile(`\bBR2_[A-Za-z0-9_]+`)
	external := regexp.MustCompile(`\$\(?BR2_EXTERNAL_TOBE_BODY_PATH\)?/([^" ]+)`)
	// The tree's paths exist.
	paths := func(file, text string) {
		for _, m := range external.FindAllStringSubmatch(text, -1) {
			if _, err := os.Stat(filepath.Join(br, m[1])); err != nil {
				t.Errorf("%s names %s, which the tree does not have", file, m[1])
			}
		}
	}

	// Config.in: declared symbols first, then what they use.
	configs := []string{"Config.in"}
	kconfig := read("Config.in")
	for _, m := range regexp.MustCompile(`(?m)^source "\$BR2_EXTERNAL_TOBE_BODY_PATH/([^"]+)"$`).FindAllStringSubmatch(kconfig, -1) {
		configs = append(configs, m[1])
	}
	if len(configs) < 2 {
		t.Fatal("Config.in sources no package")
	}
	type use struct{ file, sym string }
	var uses []use
	for _, f := range configs {
		text := read(f)
		paths(f, text)
		depth := 0
		inHelp := false
		for i, l := range strings.Split(text, "\n") {
			where := fmt.Sprintf("%s:%d", f, i+1)
			switch {
			case l == "":
				continue
			case inHelp && strings.HasPrefix(l, "\t  "):
				if len(strings.TrimPrefix(l, "\t  ")) > 62 {
					t.Errorf("%s: a help line of more than 62 characters", where)
				}
				continue
			}
			inHelp = false
			fields := strings.Fields(l)
			switch fields[0] {
			case "config", "menuconfig":
				known[fields[1]] = true
			case "if":
				depth++
				uses = append(uses, use{where, fields[1]})
			case "endif":
				depth--
			case "help":
				inHelp = true
			case "bool", "string", "int", "source", "comment", "menu", "endmenu":
			case "depends", "select", "default", "imply":
				for _, s := range symbol.FindAllString(l, -1) {
					uses = append(uses, use{where, s})
				}
			default:
				t.Errorf("%s: %q is no Kconfig this test knows", where, l)
			}
		}
		if depth != 0 {
			t.Errorf("%s: if and endif do not pair", f)
		}
	}
	for _, u := range uses {
		if !known[u.sym] {
			t.Errorf("%s uses %s, declared neither here nor in upstream-symbols.txt", u.file, u.sym)
		}
	}

	// The package's .mk.
	mks, _ := filepath.Glob(filepath.Join(br, "package", "*", "*.mk"))
	if len(mks) == 0 {
		t.Fatal("no package .mk")
	}
	assign := regexp.MustCompile(`^([A-Z0-9_]+)\s*(\+=|\?=|:=|=)`)
	for _, mk := range mks {
		rel, _ := filepath.Rel(br, mk)
		text := read(rel)
		depth := 0
		for i, l := range strings.Split(text, "\n") {
			switch {
			case strings.HasPrefix(l, "define "):
				depth++
				if !strings.HasPrefix(l, "define TOBE_BODY_") {
					t.Errorf("%s:%d: %q is outside the package's namespace", rel, i+1, l)
				}
			case l == "endef":
				depth--
			case depth == 0 && assign.MatchString(l):
				if name := assign.FindStringSubmatch(l)[1]; !strings.HasPrefix(name, "TOBE_BODY_") {
					t.Errorf("%s:%d: %s is outside the package's namespace", rel, i+1, name)
				}
			}
		}
		if depth != 0 {
			t.Errorf("%s: define and endef do not pair", rel)
		}
		if strings.Contains(text, "_INSTALL_BINS") {
			t.Errorf("%s: _INSTALL_BINS is an error since Buildroot 2025.11", rel)
		}
		if !strings.HasSuffix(strings.TrimSpace(text), "$(eval $(golang-package))") {
			t.Errorf("%s does not end with $(eval $(golang-package))", rel)
		}
		for _, s := range symbol.FindAllString(text, -1) {
			if !known[s] && s != "BR2_EXTERNAL_TOBE_BODY_PATH" {
				t.Errorf("%s uses %s, declared neither here nor in upstream-symbols.txt", rel, s)
			}
		}
	}

	// The defconfigs.
	defconfigs, _ := filepath.Glob(filepath.Join(br, "configs", "*_defconfig"))
	if len(defconfigs) < 2 {
		t.Fatalf("%d defconfigs, want the Raspberry Pi 4's and 5's", len(defconfigs))
	}
	line := regexp.MustCompile(`^(BR2_[A-Za-z0-9_]+)=(y|"[^"]*"|[0-9]+)$|^# (BR2_[A-Za-z0-9_]+) is not set$`)
	for _, d := range defconfigs {
		rel, _ := filepath.Rel(br, d)
		text := read(rel)
		paths(rel, text)
		set := map[string]string{}
		for i, l := range strings.Split(text, "\n") {
			if l == "" || strings.HasPrefix(l, "# ") && !strings.HasSuffix(l, " is not set") {
				continue
			}
			m := line.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("%s:%d: %q is no defconfig line", rel, i+1, l)
				continue
			}
			sym, val := m[1], m[2]
			if sym == "" {
				sym, val = m[3], "n"
			}
			if !known[sym] {
				t.Errorf("%s:%d: %s is declared neither by the tree nor in upstream-symbols.txt", rel, i+1, sym)
			}
			if _, dup := set[sym]; dup {
				t.Errorf("%s:%d: %s twice", rel, i+1, sym)
			}
			set[sym] = val
		}
		for sym, want := range map[string]string{"BR2_PACKAGE_TOBE_BODY": "y", "BR2_INIT_SYSTEMD": "y", "BR2_TARGET_GENERIC_REMOUNT_ROOTFS_RW": "n",
			"BR2_PACKAGE_OPENSSH": "y", "BR2_PACKAGE_SYSTEMD_TIMESYNCD": "y", "BR2_PACKAGE_MOSQUITTO_CLIENTS": "y", "BR2_PACKAGE_LIBV4L_UTILS": "y", "BR2_PACKAGE_ALSA_UTILS": "y"} {
			if set[sym] != want {
				t.Errorf("%s: %s is %q, want %q", rel, sym, set[sym], want)
			}
		}
	}

	// The image's config passes the schema.
	if err := config.CheckFile(filepath.Join(br, "board/tobe/rootfs-overlay/etc/tobe-body/config.json")); err != nil {
		t.Errorf("the image's config: %v", err)
	}

	// The card: the data partition last, so that it can grow.
	parts := regexp.MustCompile(`(?m)^\tpartition (\w+) \{`).FindAllStringSubmatch(read("board/tobe/genimage.cfg.in"), -1)
	if len(parts) == 0 || parts[len(parts)-1][1] != "data" {
		t.Errorf("genimage.cfg.in's partitions %v: want data last", parts)
	}
}
