// Package main is licenses, which reports the license of every Go module
// linked into a built binary, and fails when one may not be shipped in an
// image beside the body's own Apache-2.0 code.
//
//	go run ./scripts/licenses bin/tobe-body
//
// It reads the binary's module list (debug/buildinfo, as go version -m
// does), finds each module in the module cache (go env GOMODCACHE; go mod
// download fills it), reads every license file in it (LICENSE, COPYING and
// their variants, at the top and in its packages' directories) and names
// each one's license by matching the whole text against the licenses'
// canonical texts (texts/*.txt; a copyright line and a title may differ,
// and the copyright holder's name in the clauses that name one). It prints
// one line a license file: the module, its version, the license (an SPDX
// id or expression), the file, and a note where one is due. The standard
// library comes first as std, with its toolchain's LICENSE; the main
// module next, from its checkout.
//
// With -notices FILE it also writes every license and notice file of the
// modules the binary links, and std's, into FILE, one after another under
// a header naming the module: the texts their licenses ask to go with a
// binary copy, which scripts/stage.sh installs beside the binary
// (scripts/licenses/third-party.txt, written by make licenses).
//
// It exits 1, naming the module, when a module has no license file, when a
// file holds text it does not recognise, or when a license is none of
// those an image may ship beside Apache-2.0 code: Apache-2.0, MIT,
// BSD-2-Clause, BSD-3-Clause, ISC, and MPL-2.0 (file-level copyleft, with
// a note). A license file that is not one license's text alone was read by
// a person and is listed in reviewed, with the file's SHA-256: a changed
// file is read again.
package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"embed"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"
)

// allowed are the licenses a module shipped in the image may have, with
// the note each one needs.
var allowed = map[string]string{
	"Apache-2.0":   "",
	"MIT":          "",
	"BSD-2-Clause": "",
	"BSD-3-Clause": "",
	"ISC":          "",
	"MPL-2.0":      "file-level copyleft: its files' source goes with the image",
}

// review is a license file read by a person: a file that is not one
// license's text alone (a preface, several licenses, a dual license). It
// holds while the file's SHA-256 is the one read.
type review struct {
	module, file, sha256 string
	license              string // SPDX expression
	note                 string
}

var reviewed = []review{
	{
		module: "github.com/eclipse/paho.mqtt.golang", file: "LICENSE",
		sha256:  "e2bcf9854f46a58b6e6f014d64e102a6b4e35a87d117094903e66fb68454a3fd",
		license: "EPL-2.0 OR BSD-3-Clause",
		note:    "dual (its NOTICE.md); shipped under edl-v10, BSD-3-Clause",
	},
	{
		module: "github.com/modelcontextprotocol/go-sdk", file: "LICENSE",
		sha256:  "af679003d933f045393a6a029f43da113f9ae364eac651d9ae268392985580f5",
		license: "Apache-2.0 AND MIT",
		note:    "older code MIT; CC-BY-4.0 only for its docs, not linked",
	},
}

// extraFiles are license files whose names say nothing of a license.
var extraFiles = map[string][]string{
	"github.com/eclipse/paho.mqtt.golang": {"edl-v10"},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// where says where the sources are: the module cache, the toolchain's
// GOROOT, and the main module's checkout.
type where struct {
	modcache, goroot, goversion string
	mainPath, mainDir           string
}

func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("licenses", flag.ContinueOnError)
	fl.SetOutput(stderr)
	var w where
	fl.StringVar(&w.modcache, "modcache", "", "the module cache (default: go env GOMODCACHE)")
	fl.StringVar(&w.goroot, "goroot", "", "the Go toolchain whose LICENSE is std's (default: go env GOROOT)")
	noticesFile := fl.String("notices", "", "write the license and notice texts of std and every module linked into this file")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: go run ./scripts/licenses [flags] BINARY")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() != 1 {
		fl.Usage()
		return 2
	}
	bi, err := buildinfo.ReadFile(fl.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "licenses:", err)
		return 1
	}
	if err := w.fill(); err != nil {
		fmt.Fprintln(stderr, "licenses:", err)
		return 1
	}
	lines, errs := report(bi, w)
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	for _, l := range lines {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s", l.module, l.version, l.license, l.file)
		if l.note != "" {
			fmt.Fprintf(tw, "\t%s", l.note)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for _, e := range errs {
		fmt.Fprintln(stderr, "licenses:", e)
	}
	if len(errs) > 0 {
		return 1
	}
	if *noticesFile != "" {
		var b bytes.Buffer
		if err := writeNotices(&b, lines, bi.Main.Path); err != nil {
			fmt.Fprintln(stderr, "licenses:", err)
			return 1
		}
		if err := os.WriteFile(*noticesFile, b.Bytes(), 0o644); err != nil {
			fmt.Fprintln(stderr, "licenses:", err)
			return 1
		}
	}
	return 0
}

// writeNotices writes the text of every license and notice file of lines
// but the main module's own LICENSE (it ships beside the binary), each
// under a header naming its module, version, file and license. A license
// file in one of the main module's packages is that package's embedded
// work's (sense/sound/silero's: Silero's weights) and is written too.
// std's version is left out: the toolchain that builds an image may
// differ from the one here, and its license does not.
func writeNotices(w io.Writer, lines []line, mainModule string) error {
	fmt.Fprint(w, "The licenses and notices of the Go modules linked into tobe-body, of\n"+
		"the Go standard library, as each module ships them, and of what tobe-body's\n"+
		"own packages embed. tobe-body itself is under the Apache License 2.0 (LICENSE).\n")
	type file struct{ header, path string }
	var files []file
	for _, l := range lines {
		header := fmt.Sprintf("%s %s: %s (%s)", l.module, l.version, l.file, l.license)
		switch {
		case l.module == mainModule && path.Dir(l.file) == ".":
			continue
		case l.module == mainModule:
			header = fmt.Sprintf("tobe-body's own %s: %s (%s), the license of what that package embeds", path.Dir(l.file), l.file, l.license)
		case l.module == "std":
			header = fmt.Sprintf("the Go standard library: %s (%s)", l.file, l.license)
		}
		who := l.module + " " + l.version
		files = append(files, file{header, filepath.Join(l.dir, filepath.FromSlash(l.file))})
		for _, n := range l.notices {
			files = append(files, file{fmt.Sprintf("%s: %s (its notice)", who, n), filepath.Join(l.dir, filepath.FromSlash(n))})
		}
	}
	for _, f := range files {
		text, err := os.ReadFile(f.path)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\n%s\n%s\n\n%s", strings.Repeat("=", 76), f.header, text)
		if len(text) > 0 && text[len(text)-1] != '\n' {
			fmt.Fprintln(w)
		}
	}
	return nil
}

// fill asks go for what the flags left unset.
func (w *where) fill() error {
	out, err := exec.Command("go", "env", "GOMODCACHE", "GOROOT", "GOVERSION").Output()
	if err != nil {
		return fmt.Errorf("go env: %v", err)
	}
	env := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(env) != 3 {
		return fmt.Errorf("go env printed %q", out)
	}
	if w.modcache == "" {
		w.modcache = env[0]
	}
	if w.goroot == "" {
		w.goroot, w.goversion = env[1], env[2]
	}
	// The main module: the checkout this runs in, if it is the binary's.
	if out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}}\t{{.Dir}}").Output(); err == nil {
		w.mainPath, w.mainDir, _ = strings.Cut(strings.TrimSpace(string(out)), "\t")
	}
	return nil
}

// A line of the report: one license file of one module, in dir; the
// module's notice files go with its first line.
type line struct {
	module, version, license, file, note string
	dir                                  string
	notices                              []string
}

// report lists the license files of std, the main module and every
// module the binary links, and what is wrong with them.
func report(bi *buildinfo.BuildInfo, w where) ([]line, []error) {
	var lines []line
	var errs []error
	add := func(module, version, dir string, files []string) {
		ls, err := moduleLicenses(module, version, dir, files)
		lines = append(lines, ls...)
		if err != nil {
			errs = append(errs, err)
		}
	}

	// The standard library: its toolchain's LICENSE.
	stdNote := ""
	if w.goversion != "" && w.goversion != bi.GoVersion {
		stdNote = "LICENSE of " + w.goversion + ", the toolchain here"
	}
	if ls, err := moduleLicenses("std", bi.GoVersion, w.goroot, []string{"LICENSE"}); err != nil {
		errs = append(errs, err)
	} else {
		for i := range ls {
			ls[i].note = joinNotes(ls[i].note, stdNote)
		}
		lines = append(lines, ls...)
	}

	if bi.Main.Path != "" {
		if bi.Main.Path == w.mainPath && w.mainDir != "" {
			add(bi.Main.Path, bi.Main.Version, w.mainDir, nil)
		} else {
			errs = append(errs, fmt.Errorf("%s %s: the main module: run this in its checkout", bi.Main.Path, bi.Main.Version))
		}
	}
	for _, m := range bi.Deps {
		mod := m
		if m.Replace != nil {
			mod = m.Replace
		}
		var dir string
		if mod.Version == "" { // replaced by a directory
			dir = mod.Path
			if !filepath.IsAbs(dir) {
				dir = filepath.Join(w.mainDir, dir)
			}
		} else {
			var err error
			if dir, err = cacheDir(w.modcache, mod.Path, mod.Version); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %v", m.Path, m.Version, err))
				continue
			}
		}
		if _, err := os.Stat(dir); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: not in the module cache (go mod download): %v", mod.Path, mod.Version, err))
			continue
		}
		add(m.Path, m.Version, dir, nil)
	}
	return lines, errs
}

// cacheDir is where the module cache keeps a module's files: its path and
// version with each upper-case letter escaped as ! and its lower case
// (golang.org/x/mod/module's EscapePath and EscapeVersion).
func cacheDir(modcache, path, version string) (string, error) {
	p, err := escape(path)
	if err != nil {
		return "", err
	}
	v, err := escape(version)
	if err != nil {
		return "", err
	}
	return filepath.Join(modcache, filepath.FromSlash(p)+"@"+v), nil
}

func escape(s string) (string, error) {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '!' || r >= utf8.RuneSelf:
			return "", fmt.Errorf("%q: not a module path or version the cache can hold", s)
		case 'A' <= r && r <= 'Z':
			b.WriteByte('!')
			b.WriteRune(unicode.ToLower(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String(), nil
}

// moduleLicenses reads a module's license files (files, or all it has)
// and checks each license.
func moduleLicenses(module, version, dir string, files []string) ([]line, error) {
	var notices []string
	if files == nil {
		var err error
		if files, notices, err = licenseFiles(dir); err != nil {
			return nil, fmt.Errorf("%s %s: %v", module, version, err)
		}
		files = append(files, extraFiles[module]...)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s %s: no license file", module, version)
	}
	var lines []line
	var problems []string
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		l := line{module: module, version: version, file: f, dir: dir}
		license, note, err := identifyFile(module, f, data)
		if err != nil {
			problems = append(problems, f+": "+err.Error())
			l.license = "?"
		} else if ok, why := permitted(license); !ok {
			problems = append(problems, fmt.Sprintf("%s: %s is not a license the image may ship beside Apache-2.0", f, license))
		} else {
			note = joinNotes(note, why)
		}
		if l.license == "" {
			l.license = license
		}
		l.note = note
		lines = append(lines, l)
	}
	if len(notices) > 0 && len(lines) > 0 {
		lines[0].note = joinNotes(lines[0].note, "notices: "+strings.Join(notices, ", "))
		lines[0].notices = notices
	}
	if len(problems) > 0 {
		return lines, fmt.Errorf("%s %s: %s", module, version, strings.Join(problems, "; "))
	}
	return lines, nil
}

func joinNotes(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

// identifyFile names a license file's license: a reviewed one by its
// review, any other by its text.
func identifyFile(module, file string, data []byte) (license, note string, err error) {
	sum := sha256.Sum256(data)
	stale := false
	for _, r := range reviewed {
		if r.module == module && r.file == file {
			if r.sha256 == hex.EncodeToString(sum[:]) {
				return r.license, r.note, nil
			}
			stale = true
		}
	}
	ids, unknown := identify(string(data))
	if stale {
		return "", "", fmt.Errorf("changed since it was reviewed: read it again and update reviewed (it reads as %q, %d parts not recognised)", strings.Join(ids, " AND "), len(unknown))
	}
	if len(unknown) > 0 {
		var parts []string
		for _, u := range unknown {
			parts = append(parts, strconv.Quote(clip(u, 12)))
		}
		return "", "", fmt.Errorf("text not recognised: %s", strings.Join(parts, ", "))
	}
	if len(ids) == 0 {
		return "", "", errors.New("no license text")
	}
	return strings.Join(ids, " AND "), "", nil
}

func clip(s string, n int) string {
	w := strings.Fields(s)
	if len(w) > n {
		return strings.Join(w[:n], " ") + " ..."
	}
	return s
}

// permitted says whether an SPDX expression of ORs of ANDs allows the
// image, and the notes it needs.
func permitted(expr string) (bool, string) {
	for _, alt := range strings.Split(expr, " OR ") {
		ok, notes := true, ""
		for _, id := range strings.Split(alt, " AND ") {
			note, in := allowed[strings.Trim(id, "() ")]
			if !in {
				ok = false
				break
			}
			notes = joinNotes(notes, note)
		}
		if ok {
			return true, notes
		}
	}
	return false, ""
}

// licenseName matches the names license files have (pkg.go.dev's list,
// near enough), an extension for text aside.
var (
	licenseName = regexp.MustCompile(`^(?i)(?:(?:un)?licen[cs]e(?:[-_.](?:mit|apache|apache-2\.0|2\.0|bsd|code))?|copying|mit[-_]licen[cs]e)(?:\.(?:md|markdown|txt|rst))?$`)
	noticeName  = regexp.MustCompile(`^(?i)notice(?:\.(?:md|markdown|txt))?$`)
)

// licenseFiles lists a module's license and notice files: at its top and
// in its packages' directories (those with .go files), not in testdata,
// vendor, a directory the go command ignores (. or _) or a nested module.
func licenseFiles(dir string) (licenses, notices []string, err error) {
	var lics, nots []string
	hasGo := map[string]bool{".": true}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if p == dir {
				return nil
			}
			n := d.Name()
			if n == "testdata" || n == "vendor" || n == "node_modules" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(d.Name(), ".go"):
			hasGo[path.Dir(rel)] = true
		case licenseName.MatchString(d.Name()):
			lics = append(lics, rel)
		case noticeName.MatchString(d.Name()):
			nots = append(nots, rel)
		}
		return nil
	})
	for _, f := range lics {
		if hasGo[path.Dir(f)] {
			licenses = append(licenses, f)
		}
	}
	for _, f := range nots {
		if hasGo[path.Dir(f)] {
			notices = append(notices, f)
		}
	}
	// The top's first, then by path.
	byDepth := func(s []string) {
		sort.Slice(s, func(i, j int) bool {
			di, dj := strings.Count(s[i], "/"), strings.Count(s[j], "/")
			if di != dj {
				return di < dj
			}
			return s[i] < s[j]
		})
	}
	byDepth(licenses)
	byDepth(notices)
	return licenses, notices, err
}

// Identification. A text is reduced to its words, lower case, without
// punctuation, its copyright lines and its list markers (1., (a), *).
// Each canonical text (texts/*.txt) is cut into paragraphs (of ten words
// at least), each one a regular expression over those words, where <<...>>
// stands for one to twelve words of any kind (a copyright holder's name)
// and [[...]] for words that may be missing; a paragraph in [[...]] may be
// missing whole. A license is a text's when every paragraph of its
// canonical text is found in it; the words they cover are that license's.
// What is left must be a title (the MIT License), or it is not recognised.

//go:embed texts/*.txt
var texts embed.FS

type canon struct {
	id       string
	segments []segment
	required int // segments not optional
	words    int
}

type segment struct {
	re       *regexp.Regexp
	optional bool
}

// canons are the canonical texts, the longest first: a shorter one found
// only within a longer one's words is not named (the BSD-2-Clause's
// paragraphs are all in the BSD-3-Clause).
var canons = func() []canon {
	names, err := fs.Glob(texts, "texts/*.txt")
	if err != nil || len(names) == 0 {
		panic("licenses: no canonical texts")
	}
	var cs []canon
	for _, n := range names {
		data, _ := texts.ReadFile(n)
		id, _, _ := strings.Cut(strings.TrimSuffix(path.Base(n), ".txt"), ".notice")
		c := canon{id: id}
		for _, p := range paragraphs(prepareLines(string(data))) {
			sg := segment{optional: strings.HasPrefix(p, "[[") && strings.HasSuffix(p, "]]") && strings.Count(p, "[[") == 1}
			if sg.optional {
				p = p[2 : len(p)-2]
			} else {
				c.required++
			}
			sg.re = regexp.MustCompile(`(?:^| )(` + pattern(p) + `)`)
			c.segments = append(c.segments, sg)
		}
		c.words = len(normalize(string(data)))
		cs = append(cs, c)
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].words > cs[j].words })
	return cs
}()

// paragraphs cuts a canonical text at its blank lines outside [[...]],
// joining a paragraph of fewer than ten words (a heading) to the next.
func paragraphs(t string) []string {
	var ps []string
	var cur strings.Builder
	depth := 0
	flush := func(force bool) {
		p := strings.TrimSpace(cur.String())
		if p == "" || !force && len(normalize(p)) < 10 && !strings.HasPrefix(p, "[[") {
			return
		}
		ps = append(ps, p)
		cur.Reset()
	}
	for _, l := range strings.Split(t, "\n") {
		depth += strings.Count(l, "[[") - strings.Count(l, "]]")
		if strings.TrimSpace(l) == "" && depth == 0 {
			flush(false)
			continue
		}
		cur.WriteString(l + "\n")
	}
	flush(true)
	return ps
}

// titles are what may stand above a license's text.
var titles = map[string]bool{}

func init() {
	for _, t := range []string{
		"mit", "mit license", "the mit license", "mit license mit", "the mit license mit",
		"bsd 2 clause license", "bsd 3 clause license", "the bsd 2 clause license", "the bsd 3 clause license",
		"isc license", "the isc license", "apache license", "apache license 2 0",
		"eclipse distribution license v 1 0", "eclipse distribution license version 1 0",
	} {
		titles[t] = true
	}
}

// named are licenses this report names but never allows, found in the
// words no canonical text matched, for the error to say what they are:
// the one a run of such words names first.
var named = []struct {
	phrase   *regexp.Regexp
	id       func(text string) string
	replaces string // the canonical text it adds a clause to
}{
	{phrase: regexp.MustCompile(` gnu affero general public license `), id: version("AGPL", "3.0")},
	{phrase: regexp.MustCompile(` gnu (?:lesser|library) general public license `), id: version("LGPL", "2.1", "3.0", "2.0")},
	{phrase: regexp.MustCompile(` gnu general public license `), id: version("GPL", "3.0", "2.0")},
	{phrase: regexp.MustCompile(` eclipse public license `), id: version("EPL", "2.0", "1.0")},
	{phrase: regexp.MustCompile(` mozilla public license `), id: version("MPL", "2.0", "1.1")},
	{phrase: regexp.MustCompile(` creative commons attribution 4 0 `), id: fixed("CC-BY-4.0")},
	{phrase: regexp.MustCompile(` all advertising materials mentioning features or use of this software `), id: fixed("BSD-4-Clause"), replaces: "BSD-3-Clause"},
	{phrase: regexp.MustCompile(` shall be used for good not evil `), id: fixed("JSON")},
	{phrase: regexp.MustCompile(` server side public license `), id: fixed("SSPL-1.0")},
	{phrase: regexp.MustCompile(` business source license `), id: fixed("BUSL-1.1")},
	{phrase: regexp.MustCompile(` commons clause `), id: fixed("Commons-Clause")},
}

func fixed(id string) func(string) string { return func(string) string { return id } }

// version names a license family's version: the first of versions the
// text says ("version 2 1", "v 2 1"), or the family alone.
func version(family string, versions ...string) func(string) string {
	return func(text string) string {
		for _, v := range versions {
			for _, w := range []string{strings.ReplaceAll(v, ".", " "), strings.TrimSuffix(v, ".0")} {
				if strings.Contains(text, " version "+w+" ") || strings.Contains(text, " v "+w+" ") {
					return family + "-" + v
				}
			}
		}
		return family
	}
}

// identify names the licenses whose canonical texts a text holds, then
// those named in what is left, and returns what is left unrecognised and
// the canonical texts it holds in part.
func identify(raw string) (ids, unknown []string) {
	words := normalize(prepareLines(raw))
	var s strings.Builder
	off := make([]int, len(words))
	for i, w := range words {
		off[i] = s.Len()
		s.WriteString(w)
		s.WriteByte(' ')
	}
	text := s.String()
	covered := make([]bool, len(words))
	has := map[string]bool{}
	addID := func(id string) {
		if !has[id] {
			has[id] = true
			ids = append(ids, id)
		}
	}
	// Whole canonical texts first, the longest first; then those found in
	// part, where they cover words no whole one did.
	type found struct {
		c     canon
		n     int
		spans [][]int
	}
	var whole, part []found
	for _, c := range canons {
		f := found{c: c}
		for _, sg := range c.segments {
			ms := sg.re.FindAllStringSubmatchIndex(text, -1)
			if len(ms) > 0 && !sg.optional {
				f.n++
			}
			f.spans = append(f.spans, ms...)
		}
		switch {
		case f.n == c.required:
			whole = append(whole, f)
		case f.n*2 > c.required: // more than a few sentences in common
			part = append(part, f)
		}
	}
	cover := func(f found) (fresh bool) {
		for _, m := range f.spans {
			for i := sort.SearchInts(off, m[2]); i < len(off) && off[i] < m[3]; i++ {
				fresh = fresh || !covered[i]
				covered[i] = true
			}
		}
		return fresh
	}
	for _, f := range whole {
		if cover(f) {
			addID(f.c.id)
		}
	}
	var partial []string
	for _, f := range part {
		if cover(f) {
			partial = append(partial, fmt.Sprintf("%d of the %d paragraphs of %s", f.n, f.c.required, f.c.id))
		}
	}
	for i := 0; i < len(words); {
		if covered[i] {
			i++
			continue
		}
		j := i
		for j < len(words) && !covered[j] {
			j++
		}
		run := strings.Join(words[i:j], " ")
		i = j
		if titles[run] {
			continue
		}
		// The license named first: a license's text names others
		// further on (the EPL and the LGPL name the GPL).
		first, at := -1, len(run)+2
		for k, n := range named {
			if loc := n.phrase.FindStringIndex(" " + run + " "); loc != nil && loc[0] < at {
				first, at = k, loc[0]
			}
		}
		if first < 0 {
			unknown = append(unknown, run)
		} else if _, ok := allowed[named[first].id(" "+run+" ")]; ok {
			// Named, yet its text not found: a changed text of a
			// license allowed is not that license.
			unknown = append(unknown, run)
		} else {
			addID(named[first].id(" " + run + " "))
			if r := named[first].replaces; has[r] {
				ids = slices.DeleteFunc(ids, func(id string) bool { return id == r })
			}
		}
	}
	return ids, append(unknown, partial...)
}

var (
	// A list marker at the start of a line: *, -, 1., (a), iv).
	marker = regexp.MustCompile(`^\s*(?:[*•\-–]|\(?(?:[0-9]{1,2}|[a-zA-Z]|[ivxIVX]{2,4})[.)])\s+`)
	// Words after "copyright" that make it a sentence's word, not a notice.
	notNotice = map[string]bool{"notice": true, "notices": true, "license": true, "licenses": true, "and": true, "or": true,
		"owner": true, "owners": true, "holder": true, "holders": true, "law": true, "laws": true, "statement": true, "protection": true}
)

// prepareLines drops a text's copyright lines and list markers.
func prepareLines(raw string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.ReplaceAll(raw, "\r\n", "\n"), "\n") {
		if isCopyright(l) {
			continue
		}
		b.WriteString(marker.ReplaceAllString(l, ""))
		b.WriteByte('\n')
	}
	return b.String()
}

func isCopyright(l string) bool {
	t := strings.TrimSpace(l)
	w := normalize(t)
	switch {
	case len(w) == 0:
		return false
	case strings.HasPrefix(t, "©"):
		return true
	case strings.HasPrefix(t, "(c)") || strings.HasPrefix(t, "(C)"):
		return len(w) > 1 && w[1][0] >= '0' && w[1][0] <= '9'
	case w[0] == "copyright":
		return len(w) == 1 || !notNotice[w[1]]
	}
	return strings.Join(w, " ") == "all rights reserved"
}

// normalize is a text's words: lower case, letters and digits only,
// licence spelt license and https http.
func normalize(s string) []string {
	w := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for i, x := range w {
		switch x {
		case "licence", "licences", "licenced":
			w[i] = "license" + x[7:]
		case "https":
			w[i] = "http"
		}
	}
	return w
}

// pattern turns a canonical text into a regular expression over the
// normalised words, each followed by a space.
func pattern(t string) string {
	var b strings.Builder
	for {
		loc := opener.FindStringIndex(t)
		if loc == nil {
			loc = []int{len(t), len(t)}
		}
		for _, w := range normalize(t[:loc[0]]) {
			b.WriteString(regexp.QuoteMeta(w) + " ")
		}
		if loc[0] == len(t) {
			return b.String()
		}
		closer := map[string]string{"[[": "]]", "<<": ">>"}[t[loc[0]:loc[1]]]
		end := strings.Index(t[loc[1]:], closer)
		if end < 0 {
			panic("licenses: a canonical text opens " + t[loc[0]:loc[1]] + " and never closes it")
		}
		if closer == ">>" {
			b.WriteString(`(?:\S+ ){1,12}`)
		} else {
			b.WriteString(`(?:` + pattern(t[loc[1]:loc[1]+end]) + `)?`)
		}
		t = t[loc[1]+end+len(closer):]
	}
}

var opener = regexp.MustCompile(`\[\[|<<`)
