package sense

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest"
	"github.com/tobe-body/tobe-body/ledger"
)

// drain takes what an outlet queued, as "type@ms payload" lines, with times
// relative to base.
func drain(t *testing.T, o *Outlet, base hal.Mono) []string {
	t.Helper()
	var out []string
	for {
		select {
		case q := <-o.q:
			ev := q.ev
			var p map[string]any
			if err := ledger.UnmarshalPayload(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			var kv []string
			for _, k := range []string{"level", "edge", "active", "held_ms", "lost", "reconciled"} {
				if v, ok := p[k]; ok {
					kv = append(kv, fmt.Sprintf("%s=%v", k, v))
				}
			}
			at := time.Duration(ev.MonotonicNS - int64(base))
			out = append(out, fmt.Sprintf("%s@%d %s", ev.Type, at.Milliseconds(), strings.Join(kv, " ")))
		default:
			return out
		}
	}
}

func TestLineChannel(t *testing.T) {
	type step struct {
		at    time.Duration
		level hal.Level
	}
	const lo, hi = hal.Low, hal.High
	for _, tc := range []struct {
		name   string
		cfg    LineConfig
		steps  []step
		want   []string
		runFor time.Duration
	}{
		{"a sensor line reports every change", LineConfig{Active: hi},
			[]step{{100 * time.Millisecond, hi}, {300 * time.Millisecond, lo}},
			[]string{"gpio.level@0 level=low active=false", "gpio.changed@100 level=high edge=rising active=true", "gpio.changed@300 level=low edge=falling active=false"}, time.Second},
		{"a short press is two changes and nothing else", LineConfig{Active: lo, Button: true},
			[]step{{100 * time.Millisecond, lo}, {250 * time.Millisecond, hi}},
			[]string{"gpio.level@0 level=high active=false", "gpio.changed@100 level=low edge=falling active=true", "gpio.changed@250 level=high edge=rising active=false"}, 3 * time.Second},
		{"a long press is reported while still held", LineConfig{Active: hi, Button: true},
			[]step{{100 * time.Millisecond, hi}, {1600 * time.Millisecond, lo}},
			[]string{"gpio.level@0 level=low active=false", "gpio.changed@100 level=high edge=rising active=true", "gpio.long_press@1100 held_ms=1000", "gpio.changed@1600 level=low edge=falling active=false"}, 3 * time.Second},
		{"a double press, and a third press that starts over", LineConfig{Active: hi, Button: true},
			[]step{{100 * time.Millisecond, hi}, {200 * time.Millisecond, lo}, {450 * time.Millisecond, hi}, {550 * time.Millisecond, lo}, {700 * time.Millisecond, hi}, {800 * time.Millisecond, lo}},
			[]string{"gpio.level@0 level=low active=false", "gpio.changed@100 level=high edge=rising active=true", "gpio.changed@200 level=low edge=falling active=false",
				"gpio.changed@450 level=high edge=rising active=true", "gpio.double_press@450 held_ms=250", "gpio.changed@550 level=low edge=falling active=false",
				"gpio.changed@700 level=high edge=rising active=true", "gpio.changed@800 level=low edge=falling active=false"}, 3 * time.Second},
		{"presses further apart are not double", LineConfig{Active: hi, Button: true, DoublePress: 200 * time.Millisecond},
			[]step{{100 * time.Millisecond, hi}, {200 * time.Millisecond, lo}, {450 * time.Millisecond, hi}, {500 * time.Millisecond, lo}},
			[]string{"gpio.level@0 level=low active=false", "gpio.changed@100 level=high edge=rising active=true", "gpio.changed@200 level=low edge=falling active=false",
				"gpio.changed@450 level=high edge=rising active=true", "gpio.changed@500 level=low edge=falling active=false"}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock, err := body.NewClock()
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				base := hal.MonoNow()
				now := func() hal.Mono { return base.Add(time.Since(start)) }
				chip := haltest.NewChip("c")
				initial := lo
				if tc.cfg.Active == lo {
					initial = hi
				}
				src := chip.AddIn("BUTTON", initial)
				line, err := chip.In("BUTTON", hal.InConfig{Edge: hal.BothEdges})
				if err != nil {
					t.Fatal(err)
				}
				o := NewOutlet(Source{Channel: "gpio.button", Clock: clock}, 64)
				c, err := NewLineChannel(o, line, tc.cfg)
				if err != nil {
					t.Fatal(err)
				}
				c.now = now
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- c.Run(ctx) }()
				for _, s := range tc.steps {
					time.Sleep(s.at - time.Since(start)) // the bubble's fake clock
					src.Set(s.level, now())
				}
				time.Sleep(tc.runFor - time.Since(start))
				line.Halt()
				if err := <-done; err != nil {
					t.Fatalf("Run: %v", err)
				}
				cancel()
				got := drain(t, o, base)
				if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
					t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
				}
			})
		})
	}
}

// At start a line channel reports the level it reads, active or not by
// the line's config, once and before any change; a line it cannot read
// at start is not reported until it changes.
func TestLineChannelLevelAtStart(t *testing.T) {
	const lo, hi = hal.Low, hal.High
	for _, tc := range []struct {
		name    string
		cfg     LineConfig
		initial hal.Level
		fail    bool
		want    []string
	}{
		{"active-high, low", LineConfig{Active: hi}, lo, false, []string{"gpio.level@0 level=low active=false"}},
		{"active-high, high", LineConfig{Active: hi}, hi, false, []string{"gpio.level@0 level=high active=true"}},
		{"active-low, low", LineConfig{Active: lo}, lo, false, []string{"gpio.level@0 level=low active=true"}},
		{"active-low, high", LineConfig{Active: lo}, hi, false, []string{"gpio.level@0 level=high active=false"}},
		{"a button held at start: its level, and no press of ours", LineConfig{Active: lo, Button: true}, lo, false,
			[]string{"gpio.level@0 level=low active=true", "gpio.changed@2000 level=high edge=rising active=false"}},
		{"a failed read: nothing", LineConfig{Active: hi}, hi, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock, err := body.NewClock()
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				base := hal.MonoNow()
				now := func() hal.Mono { return base.Add(time.Since(start)) }
				src := haltest.NewChip("c").AddIn("DOOR", tc.initial)
				if tc.fail {
					src.Fail(fmt.Errorf("haltest: read DOOR: %w", hal.ErrAbsent))
				}
				o := NewOutlet(Source{Channel: "gpio.door", Clock: clock}, 8)
				c, err := NewLineChannel(o, src, tc.cfg)
				if err != nil {
					t.Fatal(err)
				}
				c.now = now
				done := make(chan error, 1)
				go func() { done <- c.Run(t.Context()) }()
				time.Sleep(2 * time.Second) // the bubble's fake clock: past a long press
				if tc.cfg.Button {
					src.Set(hi, now())
					synctest.Wait()
				}
				src.Halt()
				if err := <-done; err != nil {
					t.Fatalf("Run: %v", err)
				}
				got := drain(t, o, base)
				if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
					t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
				}
			})
		})
	}
}

// Gaps in the driver's sequence are counted; a reconciled edge says so.
func TestLineChannelCountsLostEdges(t *testing.T) {
	o := NewOutlet(Source{Channel: "gpio.x"}, 8)
	c, err := NewLineChannel(o, haltest.NewChip("c").AddIn("X", hal.Low), LineConfig{Active: hal.High})
	if err != nil {
		t.Fatal(err)
	}
	c.edge(hal.EdgeEvent{Line: "X", Edge: hal.RisingEdge, Level: hal.High, Seq: 1, Time: 1})
	c.edge(hal.EdgeEvent{Line: "X", Edge: hal.FallingEdge, Level: hal.Low, Seq: 4, Time: 2})
	c.edge(hal.EdgeEvent{Line: "X", Edge: hal.RisingEdge, Level: hal.High, Seq: 4, Time: 3, Reconciled: true})
	got := strings.Join(drain(t, o, 0), "\n")
	want := "gpio.changed@0 level=high edge=rising active=true\ngpio.changed@0 level=low edge=falling active=false lost=2\ngpio.changed@0 level=high edge=rising active=true reconciled=true"
	if got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
}

func TestLineConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  LineConfig
		want string
	}{
		{LineConfig{}, ""},
		{LineConfig{LongPress: time.Millisecond}, "long_press 1ms outside"},
		{LineConfig{DoublePress: time.Hour}, "double_press 1h0m0s outside"},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
