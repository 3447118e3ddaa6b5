package figure

import (
	"bytes"
	"errors"
	"math"
	"os/exec"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       Figure
		met, ok    bool
	}{
		{"a peer and a ratio goal", "figure: name=ledger.append.g1 value=940 unit=appends/s peer=1000 ratio=0.94 goal=ratio>=0.8 vs=bbolt-update",
			Figure{Name: "ledger.append.g1", Value: 940, Unit: "appends/s", Peer: 1000, Ratio: 0.94, Goal: Goal{"ratio", ">=", 0.8}, Vs: "bbolt-update"}, true, true},
		{"no peer, a value goal not met", "figure: name=footprint.idle_rss value=26.5 unit=MiB peer=- ratio=- goal=value<=25 vs=-",
			Figure{Name: "footprint.idle_rss", Value: 26.5, Unit: "MiB", Peer: math.NaN(), Ratio: math.NaN(), Goal: Goal{"value", "<=", 25}}, false, true},
		{"no goal", "figure: name=soak.cpu value=3.5e+01 unit=% peer=- ratio=- goal=- vs=-",
			Figure{Name: "soak.cpu", Value: 35, Unit: "%", Peer: math.NaN(), Ratio: math.NaN()}, false, false},
		{"a carriage return at the end", "figure: name=a value=1 unit=x peer=2 ratio=0.5 goal=ratio<=1 vs=-\r\n",
			Figure{Name: "a", Value: 1, Unit: "x", Peer: 2, Ratio: 0.5, Goal: Goal{"ratio", "<=", 1}}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.line)
			if err != nil {
				t.Fatal(err)
			}
			if !same(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			met, ok := got.Met()
			if met != tc.met || ok != tc.ok {
				t.Fatalf("Met: got %v, %v; want %v, %v", met, ok, tc.met, tc.ok)
			}
		})
	}
}

func TestParseRefused(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"figure: name=a value=1 unit=x peer=- ratio=- goal=-", "6 fields, want 7"},
		{"figure: name=a value=1 unit=x peer=- ratio=- vs=- goal=-", "field 6 is \"vs=-\""},
		{"figure: name=a value=one unit=x peer=- ratio=- goal=- vs=-", "value \"one\" is not a number"},
		{"figure: name=a value=NaN unit=x peer=- ratio=- goal=- vs=-", "value \"NaN\" is not a number"},
		{"figure: name=a value=0x10 unit=x peer=- ratio=- goal=- vs=-", "value \"0x10\" is not a number"},
		{"figure: name=a value=1 unit=x peer=2 ratio=- goal=- vs=-", "a peer without a ratio"},
		{"figure: name=a value=1 unit=x peer=- ratio=- goal=ratio<=2 vs=-", "a goal of its ratio, and no peer"},
		{"figure: name=a value=1 unit=x peer=- ratio=- goal=value<2 vs=-", "must be followed by <= or >="},
		{"figure: name=a value=1 unit=x peer=- ratio=- goal=speed>=2 vs=-", "value<=N, value>=N"},
		{"figure: name=a value=1 unit=x peer=- ratio=- goal=value<=fast vs=-", "\"fast\" is not a number"},
		{"figure: name=A..b value=1 unit=x peer=- ratio=- goal=- vs=-", "name \"A..b\""},
		{"figure: name= value=1 unit=x peer=- ratio=- goal=- vs=-", "name is empty"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, err := Parse(tc.line)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if _, err := Parse("observe call over socket: p50 1ms"); !errors.Is(err, ErrNotFigure) {
		t.Fatalf("a bench's own words: got %v, want ErrNotFigure", err)
	}
}

// TestPrintReadsBack: what Print writes, Parse reads back the same.
func TestPrintReadsBack(t *testing.T) {
	for _, f := range []Figure{
		{Name: "agent.push.socket.p99", Value: 1.234, Unit: "ms", Peer: NoPeer(), Goal: Goal{"value", "<=", 20}},
		{Name: "agent.call.socket.p50", Value: 0.412, Unit: "ms", Peer: 0.2, Goal: Goal{"ratio", "<=", 4}, Vs: "mcp-sdk"},
		{Name: "x", Value: 1e-7, Unit: "s", Peer: 3e9},
	} {
		var b bytes.Buffer
		if err := Print(&b, f); err != nil {
			t.Fatal(err)
		}
		got, err := Parse(b.String())
		if err != nil {
			t.Fatalf("%q: %v", b.String(), err)
		}
		f.Ratio = math.NaN()
		if !math.IsNaN(f.Peer) {
			f.Ratio = got.Ratio // four digits of Value/Peer
			if r := f.Value / f.Peer; math.Abs(got.Ratio-r) > 1e-3*math.Abs(r) {
				t.Fatalf("%q: ratio %v, want %v", b.String(), got.Ratio, r)
			}
		}
		if !same(got, f) {
			t.Fatalf("%q: got %+v, want %+v", b.String(), got, f)
		}
	}
}

// TestTheShellPrintsTheSame: lib.sh's figure, run by sh, prints lines
// Parse reads as the same figures.
func TestTheShellPrintsTheSame(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, tc := range []struct {
		args string
		want Figure
	}{
		{"ledger.append.g16 25000 appends/s 1000 'ratio>=5' bbolt-batch",
			Figure{Name: "ledger.append.g16", Value: 25000, Unit: "appends/s", Peer: 1000, Ratio: 25, Goal: Goal{"ratio", ">=", 5}, Vs: "bbolt-batch"}},
		{"gate.events_per_s.c10000 568505 events/s - 'value>=200000'",
			Figure{Name: "gate.events_per_s.c10000", Value: 568505, Unit: "events/s", Peer: math.NaN(), Ratio: math.NaN(), Goal: Goal{"value", ">=", 200000}}},
		{"motion.fps 1234567 frames/s 3",
			Figure{Name: "motion.fps", Value: 1234567, Unit: "frames/s", Peer: 3, Ratio: 411500}},
		{"soak.rss_growth -1.5 %",
			Figure{Name: "soak.rss_growth", Value: -1.5, Unit: "%", Peer: math.NaN(), Ratio: math.NaN()}},
	} {
		out, err := exec.Command(sh, "-c", ". ../lib.sh && figure "+tc.args).CombinedOutput()
		if err != nil {
			t.Fatalf("figure %s: %v: %s", tc.args, err, out)
		}
		got, err := Parse(string(out))
		if err != nil {
			t.Fatalf("figure %s printed %q: %v", tc.args, out, err)
		}
		if !same(got, tc.want) {
			t.Fatalf("figure %s: got %+v, want %+v", tc.args, got, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"figure: name=a.b value=1 unit=x peer=2 ratio=0.5 goal=ratio<=1 vs=peer",
		"figure: name=a value=1 unit=x peer=- ratio=- goal=- vs=-",
		"figure: name=a value=1e400 unit=x peer=- ratio=- goal=value>=-1 vs=-",
		"figure:",
		"something else",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		fig, err := Parse(line)
		if err != nil {
			return
		}
		// What is accepted prints and reads back as a figure again.
		var b bytes.Buffer
		if err := Print(&b, fig); err != nil {
			t.Fatal(err)
		}
		again, err := Parse(b.String())
		if err != nil {
			t.Fatalf("%q read, printed as %q, not read again: %v", line, b.String(), err)
		}
		if again.Name != fig.Name || again.Value != fig.Value || again.Goal != fig.Goal {
			t.Fatalf("%q: read %+v, again %+v", line, fig, again)
		}
	})
}

func same(a, b Figure) bool {
	eq := func(x, y float64) bool { return x == y || math.IsNaN(x) && math.IsNaN(y) }
	return a.Name == b.Name && a.Value == b.Value && a.Unit == b.Unit && eq(a.Peer, b.Peer) && eq(a.Ratio, b.Ratio) && a.Goal == b.Goal && a.Vs == b.Vs
}
