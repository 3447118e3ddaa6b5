package awareness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/ledger"
)

// Only the backup's and a piece of evidence's outputs carry bytes; a
// transport that cannot send them knows it from Streams, and that the
// evidence's are one piece of media an agent can be sent from Media.
func TestOnlyTheBackupAndEvidenceStream(t *testing.T) {
	for _, e := range emptyTable(t).Entries() {
		if got, want := e.Streams, e.Name == "ledger.backup" || e.Name == "evidence.get"; got != want {
			t.Errorf("%s: Streams %v, want %v", e.Name, got, want)
		}
		if got, want := e.Media, e.Name == "evidence.get"; got != want {
			t.Errorf("%s: Media %v, want %v", e.Name, got, want)
		}
	}
}

// A backup names no file: one that does is refused by the strict
// decoder before the handler runs. Without one it is a snapshot whose
// bytes are the ledger at LastSeq, with progress through the context;
// Close releases its file.
func TestBackupThroughTheTable(t *testing.T) {
	b := newTestBody(t)
	e, _ := b.table.Lookup("ledger.backup")
	dir := filepath.Dir(b.store.Path())
	for _, params := range []string{`{"path":"` + b.store.Path() + `"}`, `{"path":"/tmp/b.db"}`, `{"dir":"/tmp"}`} {
		_, err := e.Call(context.Background(), maxAdmin, json.RawMessage(params))
		var oe *Error
		if !errors.As(err, &oe) || oe.Reason != ReasonInvalidParams || !strings.Contains(oe.Detail, "unknown field") {
			t.Errorf("%s: got %v, want invalid_params naming the unknown field", params, err)
		}
	}
	if _, err := b.call(t, maxAdmin, "grant.add", `{"subject":"agent:pi","capability":"gpio.set","scope":"gpio.led"}`); err != nil {
		t.Fatal(err)
	}
	st, _ := b.store.Stats()
	var calls int
	var last [2]int64
	ctx := WithProgress(context.Background(), func(done, total int64) { calls, last = calls+1, [2]int64{done, total} })
	out, err := e.Call(ctx, maxAdmin, nil)
	if err != nil {
		t.Fatal(err)
	}
	bk := out.(Backup)
	if bk.LastSeq != st.LastSeq || bk.Bytes == 0 || bk.TakenAt.IsZero() {
		t.Errorf("backup %+v, want last_seq %d", bk, st.LastSeq)
	}
	if calls == 0 || last != [2]int64{bk.Bytes, bk.Bytes} {
		t.Errorf("%d progress calls, the last %v; want the last at %d of %d", calls, last, bk.Bytes, bk.Bytes)
	}
	r, n := bk.Content()
	dst := filepath.Join(t.TempDir(), "copy.db")
	f, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	got, err := io.Copy(io.MultiWriter(f, h), r)
	f.Close()
	if err != nil || got != n || n != bk.Bytes || hex.EncodeToString(h.Sum(nil)) != bk.SHA256 {
		t.Errorf("read %d bytes (%v) with sha256 %x; want %d with %s", got, err, h.Sum(nil), bk.Bytes, bk.SHA256)
	}
	if err := bk.Close(); err != nil {
		t.Error(err)
	}
	// No snapshot left behind: the ledger and its journal.
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the ledger's directory holds %v, want the ledger and its journal", names)
	}
	copied, err := ledger.Open(ledger.Options{Path: dst, Projections: act.Projections()})
	if err != nil {
		t.Fatal(err)
	}
	defer copied.Close()
	cs, _ := copied.Stats()
	grants, _ := copied.Events(ledger.Filter{Types: []string{"grant.added"}})
	if cs.LastSeq != bk.LastSeq || len(grants) != 1 {
		t.Errorf("the copy is at %d with %d grants, want %d with the one", cs.LastSeq, len(grants), bk.LastSeq)
	}
	j, _ := json.Marshal(bk)
	if want := `{"bytes":`; !strings.HasPrefix(string(j), want) || strings.Contains(string(j), "snap") {
		t.Errorf("the result's JSON %s", j)
	}
}
