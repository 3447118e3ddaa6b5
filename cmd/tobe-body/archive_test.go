package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
)

// agedData is a data directory whose ledger archived the records of
// actions finished 91 days of running ago, with the daemon's options.
func agedData(t *testing.T, actions int) string {
	t.Helper()
	data := t.TempDir()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	id, _, err := body.LoadIdentity(data, now)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := body.LedgerOptions(config.Default().Ledger, data, id, slog.New(slog.DiscardHandler), awareness.Projections()...)
	if err != nil {
		t.Fatal(err)
	}
	opts.Now = func() time.Time { return now }
	opts.ArchiveSegment = 1 // whatever is due
	store, err := ledger.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for i := range actions {
		aid := fmt.Sprintf("a%04d", i)
		inv := act.Invocation{ActionID: aid, IdempotencyKey: "key-" + aid, Capability: "gpio.set", Target: "gpio.led", Mode: act.Live}
		who := fmt.Sprintf("admin:uid=%d", os.Getuid())
		p1, _ := ledger.MarshalPayload(map[string]any{"status": "proposed", "invocation": inv, "principal": who})
		p2, _ := ledger.MarshalPayload(map[string]any{"status": "succeeded", "invocation": inv, "result": act.Result{ActionID: aid, Status: act.Succeeded}})
		_, err := store.Append(t.Context(),
			ledger.Event{Type: "action.proposed", Provenance: ledger.Told, AggregateID: "action:" + aid, DedupeKey: "action:" + who + ":key-" + aid, Payload: p1},
			ledger.Event{Type: "action.succeeded", Provenance: ledger.Told, AggregateID: "action:" + aid, Payload: p2})
		if err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(91 * 24 * time.Hour)
	store.Append(t.Context(), ledger.Event{Type: "ledger.test", Provenance: ledger.Observed})
	store.OutboxAck(allSeqs(2*actions + 1)...)
	if res, err := store.Archive(t.Context()); err != nil || res.Events != 2*actions {
		t.Fatalf("archive: %+v %v", res, err)
	}
	return data
}

func allSeqs(n int) []uint64 {
	s := make([]uint64, n)
	for i := range s {
		s[i] = uint64(i + 1)
	}
	return s
}

func TestLedgerArchiveCommands(t *testing.T) {
	data := agedData(t, 200)
	out, err := runCmd(t, "ledger", "stats", "--data", data)
	if err != nil || !strings.Contains(out, "archive  ") || !strings.Contains(out, "400 events to 400 in 1 segments") {
		t.Fatalf("stats: %v\n%s", err, out)
	}
	out, err = runCmd(t, "ledger", "verify", "--data", data)
	if err != nil || !strings.Contains(out, "archive: 400 events read from 1 segments") || !strings.Contains(out, "ok: the ledger is consistent") {
		t.Errorf("verify: %v\n%s", err, out)
	}
	out, err = runCmd(t, "ledger", "verify", "--archive", "--data", data)
	if err != nil || !strings.Contains(out, "ok: the archive is whole") {
		t.Errorf("verify --archive: %v\n%s", err, out)
	}
	// Without --archive, the file's events; with it, every one (an export
	// with --json).
	out, _ = runCmd(t, "ledger", "events", "--json", "--type", "action.", "--data", data)
	if strings.TrimSpace(out) != "" {
		t.Errorf("events in the file: %s", out)
	}
	out, err = runCmd(t, "ledger", "events", "--json", "--archive", "--type", "action.", "--data", data)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var first ledger.EventView
	if err != nil || len(lines) != 400 || json.Unmarshal([]byte(lines[0]), &first) != nil || first.Seq != 1 || first.Type != "action.proposed" {
		t.Errorf("events --archive: %v, %d lines, first %+v", err, len(lines), first)
	}
	// A key used before audit_keep is still refused: nothing is done.
	cfg := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(cfg, []byte(`{"version": 1, "monitor": {"interval_ms": 100, "print": "always"}}`), 0o600)
	d := startDaemonIn(t, data, cfg)
	out, err = runCmd(t, "do", "gpio.set", "gpio.led", "state=on", "--key", "key-a0007", "--data", data)
	d.stop(t)
	if !strings.Contains(out, "audit_keep") {
		t.Errorf("a repeated key of an archived action: %v\n%s", err, out)
	}
	// Tampering is found.
	seg := filepath.Join(ledger.ArchiveDir(filepath.Join(data, body.LedgerFile)), "00000001.seg")
	b, _ := os.ReadFile(seg)
	b[len(b)/2] ^= 0x40
	os.WriteFile(seg, b, 0o640)
	if out, err := runCmd(t, "ledger", "verify", "--archive", "--data", data); err == nil || !strings.Contains(out, "hash does not match") {
		t.Errorf("verify --archive of a changed segment: %v\n%s", err, out)
	}
	b[len(b)/2] ^= 0x40
	os.WriteFile(seg, b, 0o640)
	// Deleted by an administrator, recorded.
	if out, err := runCmd(t, "ledger", "archive-delete", "--data", data); err == nil {
		t.Errorf("archive-delete without --through: %s", out)
	}
	out, err = runCmd(t, "ledger", "archive-delete", "--through", "1", "--data", data)
	if err != nil || !strings.Contains(out, "deleted segments 1 to 1") {
		t.Fatalf("archive-delete: %v\n%s", err, out)
	}
	out, _ = runCmd(t, "ledger", "events", "--type", "ledger.archive_deleted", "--data", data)
	if !strings.Contains(out, fmt.Sprintf(`"by":"admin:uid=%d"`, os.Getuid())) {
		t.Errorf("the deletion's record: %s", out)
	}
	out, err = runCmd(t, "ledger", "verify", "--data", data)
	if err != nil || !strings.Contains(out, "not rebuilt: segments 1 to 1") {
		t.Errorf("verify after a deletion: %v\n%s", err, out)
	}
}
