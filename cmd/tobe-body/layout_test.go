package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the module's root, two levels up from this package.
const repoRoot = "../.."

// TestLayout keeps the top level of the repository as the design fixes it.
func TestLayout(t *testing.T) {
	want := []string{".ci", "LICENSE", "README.md", "Makefile", "act", "awareness", "board", "body", "buildroot", "cmd", "go.mod", "hal", "ledger", "scripts", "sense", "systemd"}
	for _, name := range want {
		if _, err := os.Stat(filepath.Join(repoRoot, name)); err != nil {
			t.Errorf("the layout needs %s: %v", name, err)
		}
	}
	entries, err := os.ReadDir(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	allowed := append(want, ".git", ".gitignore", "go.sum", "var", "bin", "dist")
	for _, e := range entries {
		if !slices.Contains(allowed, e.Name()) {
			t.Errorf("%s is not in the design's top-level layout", e.Name())
		}
	}
	for _, banned := range []string{"util", "utils", "common", "pkg", "helpers"} {
		filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil || !d.IsDir():
			case d.Name() == "node_modules" || d.Name() == ".git":
				return filepath.SkipDir // npm's packages, not ours
			case d.Name() == banned:
				t.Errorf("%s: no dumping-ground packages", p)
			}
			return nil
		})
	}
}

// TestEveryPackageHasDoc checks that each Go package has a package doc
// comment that starts "Package <name>" (or "Command" for main).
func TestEveryPackageHasDoc(t *testing.T) {
	dirs := map[string]bool{}
	filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != repoRoot || d.Name() == "testdata" || d.Name() == "var" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			dirs[filepath.Dir(p)] = true
		}
		return nil
	})
	if len(dirs) < 10 {
		t.Fatalf("found only %d packages under %s", len(dirs), repoRoot)
	}
	for dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		name, documented := "", false
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Errorf("%s: %v", file, err)
				continue
			}
			name = f.Name.Name
			if f.Doc == nil {
				continue
			}
			text := f.Doc.Text()
			if strings.HasPrefix(text, "Package "+name+" ") || name == "main" && strings.HasPrefix(text, "Command ") {
				documented = true
			}
		}
		if !documented {
			t.Errorf("package %s in %s has no package doc comment", name, dir)
		}
	}
}

// layers are DESIGN.md's rules of which top-level package may import
// which of ours (its own subpackages always); cmd and scripts may import
// everything.
var layers = map[string][]string{
	"hal":       {},
	"board":     {"hal"},
	"body":      {"hal", "board", "ledger"},
	"sense":     {"hal", "body", "ledger"},
	"act":       {"hal", "body", "ledger"},
	"ledger":    {},
	"awareness": {"ledger", "act", "body", "sense"},
}

// TestLayering holds every package's non-test imports to the layers.
func TestLayering(t *testing.T) {
	const module = "github.com/tobe-body/tobe-body/"
	checked := 0
	filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != repoRoot || d.Name() == "testdata" || d.Name() == "var" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(repoRoot, p)
		top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		allowed, ruled := layers[top]
		if !ruled {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		checked++
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			if !strings.HasPrefix(path, module) {
				continue
			}
			to, _, _ := strings.Cut(strings.TrimPrefix(path, module), "/")
			if to != top && !slices.Contains(allowed, to) {
				t.Errorf("%s imports %s: %s may import only %v", rel, path, top, allowed)
			}
		}
		return nil
	})
	if checked < 50 {
		t.Fatalf("checked only %d files", checked)
	}
}
