package gate

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/ledger"
)

// What the gate pushed is read again from its records, in the order it
// pushed, with the same words, after any event's sequence: what an agent
// that was away missed, across a restart; a gate without its state says
// it has no records.
func TestWoken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	s := openGated(t, path, nil)
	defer func() { s.Close() }()
	clk := &clock{t: t0}
	p := &pushes{c: make(chan Decision, 16)}
	rules := Rules{Defaults: []Default{{Type: "gpio.long_press", Attention: "high"}, {Type: "gpio.", Attention: "off"}}}
	g := &Gate{Store: s, Sal: NewSalience(rules), Classes: ledger.DefaultClasses(), Push: p.push, Now: clk.now}
	if err := g.Load(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	// Pushed: the long presses (a default rule, its words 1) and the
	// trip (a hard rule, no words); the presses' changes are ignored.
	for _, typ := range []string{"gpio.changed", "gpio.long_press", "gpio.changed", "estop.tripped", "gpio.long_press"} {
		if _, err := s.Append(context.Background(), ledger.Event{Type: typ, ChannelID: "gpio.button", Trust: ledger.High, Provenance: ledger.Observed}); err != nil {
			t.Fatal(err)
		}
		clk.add(time.Hour) // nothing merged or held back as not novel
	}
	var pushed []Decision
	for range 3 {
		pushed = append(pushed, waitPush(t, p))
	}
	read := func(g *Gate, after uint64, limit int) ([]Decision, uint64, bool) {
		t.Helper()
		var got []Decision
		next, more, err := g.Woken(after, limit, func(d Decision, e ledger.Stored) {
			if e.Seq != d.Seq || e.Type != d.Type {
				t.Errorf("decision of %d (%s) with event %d (%s)", d.Seq, d.Type, e.Seq, e.Type)
			}
			got = append(got, d)
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, next, more
	}
	same := func(what string, got, want []Decision) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d decisions, want %d", what, len(got), len(want))
		}
		for i := range got {
			if got[i].Seq != want[i].Seq || got[i].Type != want[i].Type || got[i].Outcome != want[i].Outcome || got[i].Words != want[i].Words {
				t.Errorf("%s %d: %s %d (%s, words %d); pushed %s %d (%s, words %d)", what, i, got[i].Type, got[i].Seq, got[i].Outcome, got[i].Words,
					want[i].Type, want[i].Seq, want[i].Outcome, want[i].Words)
			}
		}
	}
	all, next, more := read(g, 0, 0)
	same("all", all, pushed)
	if more || next != pushed[2].Seq {
		t.Errorf("all: next %d more %v; want %d, false", next, more, pushed[2].Seq)
	}
	first, next, more := read(g, 0, 1)
	same("the first", first, pushed[:1])
	if !more || next != pushed[0].Seq {
		t.Errorf("the first: next %d more %v; want %d, true", next, more, pushed[0].Seq)
	}
	rest, _, _ := read(g, next, 0)
	same("after the first", rest, pushed[1:])
	if none, next, more := read(g, pushed[2].Seq, 0); len(none) != 0 || more || next != pushed[2].Seq {
		t.Errorf("after the last: %d, next %d, more %v", len(none), next, more)
	}

	// Across a restart.
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	s.Close()
	s = openGated(t, path, nil)
	g2 := &Gate{Store: s, Sal: NewSalience(rules), Classes: ledger.DefaultClasses(), Now: clk.now}
	if err := g2.Load(); err != nil {
		t.Fatal(err)
	}
	again, _, _ := read(g2, 0, 0)
	same("after a restart", again, pushed)

	stateless := &Gate{Store: s, Sal: NewSalience(rules), Classes: ledger.DefaultClasses(), stateless: true}
	if _, _, err := stateless.Woken(0, 0, func(Decision, ledger.Stored) {}); !errors.Is(err, ErrNoRecords) {
		t.Errorf("a gate without its state: %v", err)
	}
}
