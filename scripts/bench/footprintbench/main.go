// Package main is footprintbench, the Go half of scripts/bench/footprint.sh:
//
//	footprintbench STRIPPED UNSTRIPPED MODULES
//
// prints what the stripped binary's sections hold, and the unstripped
// one's symbols (same flags but -s -w, so the same code and data) summed
// by module and by package. MODULES has a line "package module" for each
// package linked ("main" for the command's).
package main

import (
	"bufio"
	"cmp"
	"debug/elf"
	"fmt"
	"os"
	"slices"
	"strings"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: footprintbench STRIPPED UNSTRIPPED MODULES")
		os.Exit(2)
	}
	stripped, full, modules := os.Args[1], os.Args[2], os.Args[3]
	f, err := elf.Open(stripped)
	check(err)
	var total uint64
	fmt.Println("  sections of the stripped binary:")
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Type == elf.SHT_NOBITS || s.Size < 4096 {
			continue
		}
		total += s.Size
		fmt.Printf("    %-12s %6.2f MiB  %s\n", s.Name, mib(s.Size), what[s.Name])
	}
	fmt.Printf("    %-12s %6.2f MiB\n", "(these)", mib(total))

	mod := map[string]string{}
	m, err := os.Open(modules)
	check(err)
	sc := bufio.NewScanner(m)
	for sc.Scan() {
		if p, md, ok := strings.Cut(sc.Text(), " "); ok {
			mod[p] = md
		}
	}
	g, err := elf.Open(full)
	check(err)
	syms, err := g.Symbols()
	check(err)
	type sum struct {
		name, module string
		text, data   uint64
	}
	byMod, byPkg := map[string]*sum{}, map[string]*sum{}
	add := func(to map[string]*sum, key, module string, s elf.Symbol, sec *elf.Section) {
		t := to[key]
		if t == nil {
			t = &sum{name: key, module: module}
			to[key] = t
		}
		if sec.Flags&elf.SHF_EXECINSTR != 0 {
			t.text += s.Size
		} else {
			t.data += s.Size
		}
	}
	var named uint64
	for _, s := range syms {
		if int(s.Section) <= 0 || int(s.Section) >= len(g.Sections) || s.Size == 0 {
			continue
		}
		sec := g.Sections[s.Section]
		if sec.Flags&elf.SHF_ALLOC == 0 || sec.Type == elf.SHT_NOBITS {
			continue
		}
		p := pkgOf(s.Name)
		md, ok := mod[p]
		switch {
		case ok:
		case strings.HasPrefix(s.Name, "go:") || strings.HasPrefix(s.Name, "runtime."):
			md = "(runtime tables)"
		default:
			md = "(unattributed)"
		}
		named += s.Size
		add(byMod, md, md, s, sec)
		add(byPkg, p, md, s, sec)
	}
	order := func(m map[string]*sum) []*sum {
		out := make([]*sum, 0, len(m))
		for _, s := range m {
			out = append(out, s)
		}
		slices.SortFunc(out, func(a, b *sum) int {
			return cmp.Or(cmp.Compare(b.text+b.data, a.text+a.data), strings.Compare(a.name, b.name))
		})
		return out
	}
	fmt.Printf("  symbols by module (%.2f MiB in sized symbols; the rest is pc tables, type descriptors and strings, which scale with the code):\n", mib(named))
	fmt.Printf("    %-44s %8s %8s %8s\n", "module", "code KiB", "data KiB", "total")
	for i, s := range order(byMod) {
		if i == 16 {
			break
		}
		fmt.Printf("    %-44s %8.0f %8.0f %8.0f\n", s.name, kib(s.text), kib(s.data), kib(s.text+s.data))
	}
	fmt.Println("  the largest packages:")
	fmt.Printf("    %-52s %8s %8s  %s\n", "package", "code KiB", "data KiB", "module")
	for i, s := range order(byPkg) {
		if i == 25 {
			break
		}
		fmt.Printf("    %-52s %8.0f %8.0f  %s\n", s.name, kib(s.text), kib(s.data), s.module)
	}
}

// what says what a section of a Go binary holds.
var what = map[string]string{
	".text":         "machine code",
	".rodata":       "type descriptors, strings, constant tables",
	".gopclntab":    "pc-value tables: line numbers, stack maps, function names (one entry per function)",
	".typelink":     "type offsets",
	".itablink":     "interface tables",
	".noptrdata":    "initialised variables without pointers (tables, embedded files)",
	".data":         "initialised variables with pointers",
	".go.buildinfo": "module versions",
}

// pkgOf is the package a symbol belongs to: its name up to the first dot
// after the last slash, past the prefixes of types and itabs, and before
// type arguments and methods' receivers.
func pkgOf(name string) string {
	for _, p := range []string{"type:.eq.", "type:.hash.", "type:", "go:itab.", "go:link."} {
		name = strings.TrimPrefix(name, p)
	}
	name = strings.TrimLeft(name, "*[]")
	if i := strings.IndexAny(name, "[(,"); i >= 0 {
		name = name[:i]
	}
	slash := strings.LastIndex(name, "/")
	if i := strings.Index(name[slash+1:], "."); i >= 0 {
		name = name[:slash+1+i]
	}
	return strings.ReplaceAll(name, "%2e", ".")
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }
func kib(n uint64) float64 { return float64(n) / (1 << 10) }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "footprintbench:", err)
		os.Exit(1)
	}
}
