package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// write lays out a run's directory: each bench's log and status, and the
// list of benches in order.
func write(t *testing.T, benches map[string][2]string, order ...string) string {
	t.Helper()
	dir := t.TempDir()
	for name, b := range benches {
		if err := os.WriteFile(filepath.Join(dir, name+".log"), []byte(b[0]), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".status"), []byte(b[1]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "benches"), []byte(strings.Join(order, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "load"), []byte("0.50 0.40 0.30\n1.50 1.00 0.50\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const good = `ledger figures
figure: name=ledger.append.g1 value=940 unit=appends/s peer=1000 ratio=0.94 goal=ratio>=0.8 vs=bbolt-update
  figure: name=ledger.encode value=100 unit=ns peer=- ratio=- goal=value<=50 vs=-
`

func TestTable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		benches  map[string][2]string
		order    []string
		wantErr  string
		wantOut  []string
		notInOut []string
	}{
		{
			name:    "every bench ran; a goal not met is shown, not failed",
			benches: map[string][2]string{"ledger": {good, "exit=0 seconds=12.4 load=0.52"}},
			order:   []string{"ledger"},
			wantOut: []string{
				"load average (1, 5, 15 min) 0.50 0.40 0.30 at the start, 1.50 1.00 0.50 at the end",
				"ledger  ledger.append.g1  940", "ratio>=0.8  yes  0.52  12",
				"ledger.encode", "value<=50   NO",
				"1 benches, 0 failed; 2 figures, 2 with a goal, 1 of them met",
			},
			notInOut: []string{"the last lines"},
		},
		{
			name: "a bench that failed, one that printed nothing, one with a broken figure",
			benches: map[string][2]string{
				"ledger": {good, "exit=0 seconds=1 load=0.1"},
				"agent":  {"agentbench: the observation of notify 6 was not pushed within 10 s\n", "exit=1 seconds=30 load=0.2"},
				"sound":  {"goal: 16kMono under 1000 µs\n", "exit=0 seconds=2 load=0.3"},
				"gate":   {"figure: name=gate value=fast unit=x peer=- ratio=- goal=- vs=-\nfigure: name=gate.ok value=1 unit=x peer=- ratio=- goal=- vs=-\n", "exit=0 seconds=2 load=0.3"},
			},
			order:   []string{"ledger", "agent", "sound", "gate"},
			wantErr: `3 of 4 benches failed: agent exited with status 1; sound printed no figure; gate printed 1 figure lines that cannot be read (figure gate: value "fast" is not a number)`,
			wantOut: []string{
				"agent   (failed: exit status 1, 0 figures)",
				"agent: the last lines it printed:\n  agentbench: the observation of notify 6 was not pushed within 10 s",
				"sound: the last lines it printed:",
				"4 benches, 3 failed",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := write(t, tc.benches, tc.order...)
			var out bytes.Buffer
			err := run([]string{"-dir", dir}, &out)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("got %v\n%s", err, out.String())
			}
			if tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Fatalf("got error %v, want %q", err, tc.wantErr)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("the table lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.notInOut {
				if strings.Contains(out.String(), w) {
					t.Errorf("the table has %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestRunRefused(t *testing.T) {
	if err := run(nil, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "-dir") {
		t.Fatalf("no -dir: got %v", err)
	}
	if err := run([]string{"-dir", t.TempDir()}, &bytes.Buffer{}); err == nil || err.Error() != "no bench ran" {
		t.Fatalf("an empty run: got %v", err)
	}
	dir := write(t, map[string][2]string{"ledger": {good, "exit=0 seconds=x"}}, "ledger")
	if err := run([]string{"-dir", dir}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), `ledger.status: "seconds=x"`) {
		t.Fatalf("a broken status: got %v", err)
	}
	dir = write(t, map[string][2]string{}, "missing")
	if err := run([]string{"-dir", dir}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "missing: no status") {
		t.Fatalf("a bench with no status: got %v", err)
	}
}

func FuzzStatus(f *testing.F) {
	for _, s := range []string{"exit=0 seconds=12.4 load=0.52", "exit=1", "seconds=1", "exit=x", "exit=0 other=1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := parseStatus(s)
		if err == nil && st.exit < 0 {
			t.Fatalf("%q: accepted with exit %d", s, st.exit)
		}
	})
}
