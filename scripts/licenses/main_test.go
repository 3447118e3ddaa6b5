package main

import (
	"bytes"
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// What each license text is, and whether the image may ship it: texts of
// modules this binary links (testdata, copied from the module cache),
// texts written from well-known licenses, and the repository's LICENSE.
func TestIdentify(t *testing.T) {
	apache, err := os.ReadFile("../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	full := string(apache)
	end := strings.Index(full, "   END OF TERMS AND CONDITIONS")
	appendix := strings.Index(full, "   APPENDIX:")
	if end < 0 || appendix < 0 {
		t.Fatal("the repository's LICENSE is not the Apache License 2.0 with its appendix")
	}
	mpl, err := texts.ReadFile("texts/MPL-2.0.txt")
	if err != nil {
		t.Fatal(err)
	}
	file := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name, text string
		license    string // "" when it is not recognised
		ok         bool   // the image may ship it
		problem    string // what the error says, when it is not recognised
	}{
		{"Apache-2.0, the repository's LICENSE", full, "Apache-2.0", true, ""},
		{"Apache-2.0 without END OF TERMS and the appendix", full[:end], "Apache-2.0", true, ""},
		{"Apache-2.0 with the appendix filled in", strings.Replace(full, "Copyright [yyyy] [name of copyright owner]", "Copyright 2026 The tobe-body Authors", 1), "Apache-2.0", true, ""},
		{"Apache-2.0 with CRLF line ends", strings.ReplaceAll(full, "\n", "\r\n"), "Apache-2.0", true, ""},
		{"Apache-2.0 with a sentence more", full[:end] + "\nYou may not use the Work for commercial purposes.\n", "", false, `"you may not use the work for commercial purposes"`},
		{"Apache-2.0 with a clause cut short", strings.Replace(full, "(d) If the Work includes a \"NOTICE\" text file", "(d) If the Work includes", 1), "", false, "paragraphs of Apache-2.0"},
		{"Apache-2.0 notice (yaml.v3's NOTICE)", file("apache-notice-yaml.txt"), "Apache-2.0", true, ""},
		{"MIT, title and copyright (goleak)", file("mit-goleak.txt"), "MIT", true, ""},
		{"MIT, no title (xid)", file("mit-xid.txt"), "MIT", true, ""},
		{"MIT, markdown, two copyright lines (mochi)", file("mit-mochi.md"), "MIT", true, ""},
		{"MIT, long lines (webcam's ioctl)", file("mit-ioctl.txt"), "MIT", true, ""},
		{"BSD-3-Clause (Go's)", file("bsd3-go.txt"), "BSD-3-Clause", true, ""},
		{"BSD-3-Clause, the copyright holder (uritemplate)", file("bsd3-uritemplate.txt"), "BSD-3-Clause", true, ""},
		{"BSD-3-Clause as the Eclipse Distribution License (paho's edl-v10)", file("edl-paho.txt"), "BSD-3-Clause", true, ""},
		{"BSD-2-Clause (gorilla)", file("bsd2-gorilla.txt"), "BSD-2-Clause", true, ""},
		{"ISC", file("isc.txt"), "ISC", true, ""},
		{"MPL-2.0", string(mpl), "MPL-2.0", true, ""},
		{"MPL-2.0 notice", file("mpl-notice.txt"), "MPL-2.0", true, ""},
		{"MPL-2.0 with its patent grant cut out", strings.Replace(string(mpl), "(b) under Patent Claims of such Contributor to make, use, sell, offer", "(b) nothing", 1), "", false, "paragraphs of MPL-2.0"},
		{"MPL named, its text not there", "This file is under the Mozilla Public License, version 2.0, more or less.\n", "", false, "mozilla public license version 2 0"},
		{"BSD-4-Clause: the advertising clause", file("bsd4.txt"), "BSD-4-Clause", false, ""},
		{"JSON: MIT and good, not evil", file("json.txt"), "MIT AND JSON", false, ""},
		{"GPL-3.0 notice", file("gpl3-notice.txt"), "GPL-3.0", false, ""},
		{"MIT with a restriction added", file("mit-extra.txt"), "", false, "the software may not be used to operate weapons"},
		{"no license", "Copyright 2020 Someone.\nAll rights reserved.\n", "", false, "no license text"},
		{"a README", "# foo\n\nFoo does things. See the docs.\n", "", false, "foo does things"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			license, _, err := identifyFile("example.com/m", "LICENSE", []byte(tc.text))
			if tc.license == "" {
				if err == nil || !strings.Contains(err.Error(), tc.problem) {
					t.Fatalf("identified %q, error %v; want an error saying %q", license, err, tc.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if license != tc.license {
				t.Errorf("identified %q, want %q", license, tc.license)
			}
			if ok, _ := permitted(license); ok != tc.ok {
				t.Errorf("%s: permitted %v, want %v", license, ok, tc.ok)
			}
		})
	}
}

// The license files of the modules linked that are not one license's
// text alone, as the module cache has them: each one needs its review,
// and its review holds for that text.
func TestReviewedTexts(t *testing.T) {
	modcache := goEnv(t, "GOMODCACHE")
	for _, tc := range []struct {
		module, version string
		license         string // without the review: what is named, "" when it is not recognised
		reviewed        string
	}{
		{"github.com/eclipse/paho.mqtt.golang", "v1.5.1", "EPL-2.0", "EPL-2.0 OR BSD-3-Clause"},
		{"github.com/modelcontextprotocol/go-sdk", "v1.8.0", "", "Apache-2.0 AND MIT"},
	} {
		t.Run(tc.module, func(t *testing.T) {
			dir, err := cacheDir(modcache, tc.module, tc.version)
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join(dir, "LICENSE"))
			if os.IsNotExist(err) {
				t.Skipf("%s@%s is not in the module cache", tc.module, tc.version)
			}
			if err != nil {
				t.Fatal(err)
			}
			ids, unknown := identify(string(data))
			got := strings.Join(ids, " AND ")
			if len(unknown) > 0 {
				got = ""
			}
			if got != tc.license {
				t.Errorf("without a review: %q (not recognised: %d runs), want %q", got, len(unknown), tc.license)
			}
			if ok, _ := permitted(got); ok {
				t.Errorf("%q passes without a review", got)
			}
			license, note, err := identifyFile(tc.module, "LICENSE", data)
			if err != nil || license != tc.reviewed || note == "" {
				t.Errorf("reviewed: %q, %q, %v; want %q with a note", license, note, err, tc.reviewed)
			}
			if _, _, err := identifyFile(tc.module, "LICENSE", append(data, "\nOne more sentence.\n"...)); err == nil || !strings.Contains(err.Error(), "changed since it was reviewed") {
				t.Errorf("a changed file: %v, want it read again", err)
			}
		})
	}
}

func TestCacheDir(t *testing.T) {
	for _, tc := range []struct{ path, version, want string }{
		{"golang.org/x/sys", "v0.50.0", "/c/golang.org/x/sys@v0.50.0"},
		{"github.com/BurntSushi/toml", "v1.4.0", "/c/github.com/!burnt!sushi/toml@v1.4.0"},
		{"github.com/Azure/go-ntlmssp", "v0.0.0-20221128193559-754e69321358", "/c/github.com/!azure/go-ntlmssp@v0.0.0-20221128193559-754e69321358"},
		{"example.com/m", "v1.0.0-RC1", "/c/example.com/m@v1.0.0-!r!c1"},
	} {
		got, err := cacheDir("/c", tc.path, tc.version)
		if err != nil || got != filepath.FromSlash(tc.want) {
			t.Errorf("cacheDir(%s, %s) = %q, %v; want %q", tc.path, tc.version, got, err, tc.want)
		}
	}
	if _, err := cacheDir("/c", "example.com/ünï", "v1.0.0"); err == nil {
		t.Error("a path the cache cannot hold: no error")
	}
}

func TestPermitted(t *testing.T) {
	for _, tc := range []struct {
		expr string
		ok   bool
		note bool
	}{
		{"MIT", true, false},
		{"Apache-2.0 AND MIT", true, false},
		{"EPL-2.0 OR BSD-3-Clause", true, false},
		{"EPL-2.0", false, false},
		{"MIT AND GPL-2.0", false, false},
		{"GPL-2.0 OR MIT", true, false},
		{"MPL-2.0", true, true},
		{"LGPL-2.1", false, false},
	} {
		ok, note := permitted(tc.expr)
		if ok != tc.ok || (note != "") != tc.note {
			t.Errorf("permitted(%q) = %v, %q; want %v, a note %v", tc.expr, ok, note, tc.ok, tc.note)
		}
	}
}

// A module cache made here: what the report prints and what it fails on.
func TestReport(t *testing.T) {
	cache, goroot, main := t.TempDir(), t.TempDir(), t.TempDir()
	write := func(dir, name, text string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	apache, _ := os.ReadFile("../../LICENSE")
	write(goroot, "LICENSE", read("bsd3-go.txt"))
	write(main, "LICENSE", string(apache))
	// A package of the main module that embeds another's work (as
	// sense/sound/silero embeds Silero's weights) keeps its license.
	write(main, "embeds/LICENSE", read("mit-xid.txt"))
	write(main, "embeds/embeds.go", "package embeds\n")
	write(cache, "example.com/!good@v1.2.0/LICENSE.md", read("mit-xid.txt"))
	write(cache, "example.com/!good@v1.2.0/sub/COPYING", read("isc.txt"))
	write(cache, "example.com/!good@v1.2.0/sub/sub.go", "package sub\n")
	write(cache, "example.com/!good@v1.2.0/docs/LICENSE", read("gpl3-notice.txt"))
	write(cache, "example.com/!good@v1.2.0/NOTICE", "Example\n")
	write(cache, "example.com/!good@v1.2.0/testdata/LICENSE", read("gpl3-notice.txt"))
	write(cache, "example.com/!good@v1.2.0/nested/go.mod", "module example.com/Good/nested\n")
	write(cache, "example.com/!good@v1.2.0/nested/LICENSE", read("gpl3-notice.txt"))
	write(cache, "example.com/!good@v1.2.0/license.go", "package good\n")
	write(cache, "example.com/bare@v0.1.0/bare.go", "package bare\n")
	write(cache, "example.com/gpl@v1.0.0/LICENSE", read("gpl3-notice.txt"))
	write(cache, "example.com/mpl@v2.0.0/LICENSE", read("mpl-notice.txt"))
	write(main, "third_party/local/LICENSE", read("bsd2-gorilla.txt"))

	bi := &buildinfo.BuildInfo{GoVersion: "go1.26.6", Main: debug.Module{Path: "example.com/main", Version: "(devel)"}, Deps: []*debug.Module{
		{Path: "example.com/Good", Version: "v1.2.0"},
		{Path: "example.com/bare", Version: "v0.1.0"},
		{Path: "example.com/gpl", Version: "v1.0.0"},
		{Path: "example.com/local", Version: "v1.0.0", Replace: &debug.Module{Path: "./third_party/local"}},
		{Path: "example.com/missing", Version: "v1.0.0"},
		{Path: "example.com/mpl", Version: "v2.0.0"},
	}}
	lines, errs := report(bi, where{modcache: cache, goroot: goroot, goversion: "go1.26.8", mainPath: "example.com/main", mainDir: main})
	var got []string
	for _, l := range lines {
		got = append(got, strings.Join([]string{l.module, l.version, l.license, l.file, l.note}, " | "))
	}
	want := []string{
		"std | go1.26.6 | BSD-3-Clause | LICENSE | LICENSE of go1.26.8, the toolchain here",
		"example.com/main | (devel) | Apache-2.0 | LICENSE | ",
		"example.com/main | (devel) | MIT | embeds/LICENSE | ",
		"example.com/Good | v1.2.0 | MIT | LICENSE.md | notices: NOTICE",
		"example.com/Good | v1.2.0 | ISC | sub/COPYING | ",
		"example.com/gpl | v1.0.0 | GPL-3.0 | LICENSE | ",
		"example.com/local | v1.0.0 | BSD-2-Clause | LICENSE | ",
		"example.com/mpl | v2.0.0 | MPL-2.0 | LICENSE | " + allowed["MPL-2.0"],
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var notices bytes.Buffer
	if err := writeNotices(&notices, lines, "example.com/main"); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"the Go standard library: LICENSE (BSD-3-Clause)\n\n" + read("bsd3-go.txt"),
		"example.com/Good v1.2.0: LICENSE.md (MIT)\n\n" + read("mit-xid.txt"), "example.com/Good v1.2.0: NOTICE (its notice)\n\nExample\n",
		"example.com/Good v1.2.0: sub/COPYING (ISC)",
		"tobe-body's own embeds: embeds/LICENSE (MIT), the license of what that package embeds\n\n" + read("mit-xid.txt")} {
		if !strings.Contains(notices.String(), w) {
			t.Errorf("the notices lack %q", w)
		}
	}
	if strings.Contains(notices.String(), "TERMS AND CONDITIONS FOR USE") || strings.Contains(notices.String(), "go1.26") {
		t.Errorf("the notices hold the main module's own license or std's version:\n%s", notices.String())
	}
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	wantErrs := []string{
		"example.com/bare v0.1.0: no license file",
		"example.com/gpl v1.0.0: LICENSE: GPL-3.0 is not a license the image may ship beside Apache-2.0",
		"example.com/missing v1.0.0: not in the module cache",
	}
	if len(msgs) != len(wantErrs) {
		t.Fatalf("errors:\n%s\nwant %d", strings.Join(msgs, "\n"), len(wantErrs))
	}
	for i, w := range wantErrs {
		if !strings.HasPrefix(msgs[i], w) {
			t.Errorf("error %q, want %q", msgs[i], w)
		}
	}
}

// hostEnv is the environment without the target of a cross test run
// (make cross runs this package's tests for arm64 and arm under
// qemu-user, with GOARCH set and no cross C compiler in CC): the binary
// whose modules are read is built for the machine the go command runs on,
// with its own C compiler. The modules a build links are the same for
// every target this project builds.
func hostEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "GOOS", "GOARCH", "GOARM", "CC", "CXX", "PKG_CONFIG_LIBDIR":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// The report over the binary itself, built here from this checkout, with
// the modules go mod download put in the module cache: every module it
// links is listed, each with a license the image may ship. With PortAudio's
// development files, the cgo build with the portaudio tag too.
func TestModuleGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	builds := [][]string{{"CGO_ENABLED=0"}}
	pc := exec.Command("pkg-config", "--exists", "portaudio-2.0")
	pc.Env = hostEnv()
	if pc.Run() == nil {
		builds = append(builds, []string{"CGO_ENABLED=1", "-tags=portaudio"})
	}
	for _, b := range builds {
		t.Run(strings.Join(b, " "), func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "tobe-body")
			args := append([]string{"build", "-trimpath", "-o", bin}, b[1:]...)
			cmd := exec.Command("go", append(args, "../../cmd/tobe-body")...)
			cmd.Env = append(hostEnv(), b[0])
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			var stdout, stderr bytes.Buffer
			notices := filepath.Join(t.TempDir(), "notices")
			if code := run([]string{"-notices", notices, bin}, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
			}
			// The shipped notices are those of the build an image has: with
			// PortAudio.
			if strings.Contains(strings.Join(b, " "), "portaudio") {
				got, err := os.ReadFile(notices)
				if err != nil {
					t.Fatal(err)
				}
				committed, err := os.ReadFile("third-party.txt")
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, committed) {
					t.Errorf("scripts/licenses/third-party.txt is not what the modules linked now ship (%d bytes, now %d): make licenses writes it anew", len(committed), len(got))
				}
			}
			bi, err := buildinfo.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			listed := map[string]bool{}
			for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
				f := strings.Fields(l)
				listed[f[0]+" "+f[1]] = true
			}
			want := []string{"std " + bi.GoVersion, bi.Main.Path + " " + bi.Main.Version}
			for _, m := range bi.Deps {
				want = append(want, m.Path+" "+m.Version)
			}
			for _, w := range want {
				if !listed[w] {
					t.Errorf("%s is not listed", w)
				}
			}
			if len(bi.Deps) < 20 {
				t.Errorf("the binary links %d modules; the body links more than 20", len(bi.Deps))
			}
			t.Logf("%d modules\n%s", len(bi.Deps), stdout.String())
		})
	}
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
