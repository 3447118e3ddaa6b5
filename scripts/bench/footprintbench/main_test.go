package main

import "testing"

func TestPkgOf(t *testing.T) {
	for _, tc := range []struct{ sym, want string }{
		{"main.main", "main"},
		{"runtime.mallocgc", "runtime"},
		{"github.com/tobe-body/tobe-body/ledger.(*Store).Append", "github.com/tobe-body/tobe-body/ledger"},
		{"go.etcd.io/bbolt.(*DB).Update", "go.etcd.io/bbolt"},
		{"type:.eq.github.com/tobe-body/tobe-body/act.Trip", "github.com/tobe-body/tobe-body/act"},
		{"type:*[]github.com/tobe-body/tobe-body/sense.queued", "github.com/tobe-body/tobe-body/sense"},
		{"go:itab.*os.File,io.Reader", "os"},
		{"slices.SortFunc[go.shape.[]string,go.shape.string]", "slices"},
		{"gopkg.in/yaml%2ev3.Unmarshal", "gopkg.in/yaml.v3"},
	} {
		if got := pkgOf(tc.sym); got != tc.want {
			t.Errorf("pkgOf(%q) = %q, want %q", tc.sym, got, tc.want)
		}
	}
}
