package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tobe-body/tobe-body/ledger"
)

func TestMake(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"make", dir, "-events", "2000", "-payload", "10"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "2000 events") {
		t.Errorf("printed %q", out.String())
	}
	for name, want := range map[string]int{"big": 2000, "empty": 0} {
		s, err := ledger.Open(options(filepath.Join(dir, name, "ledger.db")))
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Stats()
		if err != nil || st.Events != want || st.ByType["action.succeeded"] != uint64(want/10) {
			t.Errorf("%s: %+v %v, want %d events, a tenth of them actions", name, st, err, want)
		}
		if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
			t.Errorf("%s: verify %v %v", name, r.Problems, err)
		}
		s.Close()
	}
}
