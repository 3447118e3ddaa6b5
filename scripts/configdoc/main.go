// Package main is configdoc, which rewrites the config reference in
// README.md from the config schema, between the config-reference markers.
// `make docs` runs it; a test fails when the README's copy is stale.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/tobe-body/tobe-body/body/config"
)

const begin, end = "<!-- config-reference:begin -->\n", "<!-- config-reference:end -->"

func main() {
	path := "README.md"
	if len(os.Args) > 1 {
		path = os.Args[1]
	}
	if err := rewrite(path); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}

func rewrite(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(data)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q ... %q markers", path, strings.TrimSpace(begin), end)
	}
	out := s[:i+len(begin)] + config.Reference() + s[j:]
	if out == s {
		return nil
	}
	return os.WriteFile(path, []byte(out), 0o644)
}
