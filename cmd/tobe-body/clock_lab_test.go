//go:build lab

package main

import (
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/ledger"
)

// T1 of RELIABILITY.md in the lab VM, which may set its own clock: the
// daemon runs on the lab's lines while the VM's wall clock is stepped as
// NTP steps a Pi's after a boot from fake-hwclock (and as an
// administrator's `date -s` does), and is restarted between steps.

// stepWall moves the VM's wall clock by d (clock_settime, as `date -s`).
func stepWall(t *testing.T, d time.Duration) {
	t.Helper()
	ts := unix.NsecToTimespec(time.Now().Add(d).UnixNano())
	if err := unix.ClockSettime(unix.CLOCK_REALTIME, &ts); err != nil {
		t.Fatalf("clock_settime: %v", err)
	}
}

// setSynced tells the kernel its clock is (or is not) synchronised, as an
// NTP client does once it has set it: STA_UNSYNC cleared, a small
// maximum error.
func setSynced(t *testing.T, synced bool) {
	t.Helper()
	tx := unix.Timex{Modes: unix.ADJ_STATUS | unix.ADJ_MAXERROR | unix.ADJ_ESTERROR, Maxerror: 5000, Esterror: 1000}
	if !synced {
		tx.Status = unix.STA_UNSYNC
		tx.Maxerror = 16_000_000
	}
	if _, err := unix.Adjtimex(&tx); err != nil {
		t.Fatalf("adjtimex: %v", err)
	}
}

// stepped waits for the body.clock_stepped record after seq and returns it.
func (b *labBody) stepped(t *testing.T, after uint64) ledger.EventView {
	t.Helper()
	var got ledger.EventView
	waitFor(t, "the step in the ledger", 10*time.Second, func() (bool, string) {
		for _, e := range b.events(t, body.EventClockStepped) {
			if e.Seq > after {
				got = e
				return true, ""
			}
		}
		return false, "no " + body.EventClockStepped + " yet"
	})
	return got
}

func (b *labBody) lastSeq(t *testing.T) uint64 {
	t.Helper()
	evs := b.events(t)
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

func (b *labBody) grants(t *testing.T) map[string]awareness.GrantView {
	t.Helper()
	out, err := b.cli(t, "grant", "list", "--all", "--json")
	if err != nil {
		t.Fatalf("grant list: %v\n%s", err, out)
	}
	var list []awareness.GrantView
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("grant list: %v\n%s", err, out)
	}
	m := map[string]awareness.GrantView{}
	for _, g := range list {
		m[g.ID] = g
	}
	return m
}

// stop ends the daemon as systemd does (SIGTERM) and waits for it.
func (b *labBody) stop(t *testing.T) {
	t.Helper()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.exited:
	case <-time.After(time.Minute):
		t.Fatal("the daemon did not stop within a minute of SIGTERM")
	}
	if b.err != nil {
		t.Fatalf("the daemon ended with %v", b.err)
	}
}

func TestLabClockSteps(t *testing.T) {
	setSynced(t, true)
	var stepped time.Duration // put the VM's clock back at the end
	defer func() { stepWall(t, -stepped); setSynced(t, false) }()
	// As an NTP client does: set the clock, then say it is synchronised
	// (setting the clock marks it unsynchronised).
	step := func(d time.Duration) { stepWall(t, d); stepped += d; setSynced(t, true) }

	l := newLabLines(t)
	l.setPulls(t)
	data, cfg := labData(t)
	b := startBody(t, data, cfg)
	b.ready(t)
	b.arm(t, l)

	// An action with an idempotency key, and a grant for 24 h, both while
	// the clock is synchronised.
	const key = "heater-on-2026-12-01"
	first, err := b.submit(t, awareness.DoIn{Capability: "gpio.set", Target: "gpio.relay2", Params: map[string]string{"state": "on"}, IdempotencyKey: key})
	if err != nil || first.Status != act.Succeeded {
		t.Fatalf("first: %+v %v", first, err)
	}
	if v := l.read(t, "RELAY2"); v != "1" {
		t.Fatalf("RELAY2 reads %s after it was set on", v)
	}
	out, err := b.cli(t, "grant", "add", "--subject", "agent:pi", "--capability", "gpio.set", "--scope", "gpio.led", "--expires", "24h")
	if err != nil {
		t.Fatalf("grant add: %v\n%s", err, out)
	}
	id := strings.Fields(strings.TrimPrefix(out, "granted "))[0]
	id = strings.TrimSuffix(id, ":")
	if g := b.grants(t)[id]; g.State != "active" {
		t.Fatalf("grant %s after adding it: %+v", id, g)
	}
	// The relay off again, by another key: a second run of the first
	// action would turn it on.
	if res, err := b.submit(t, awareness.DoIn{Capability: "gpio.set", Target: "gpio.relay2", Params: map[string]string{"state": "off"}}); err != nil || res.Status != act.Succeeded {
		t.Fatalf("off: %+v %v", res, err)
	}

	// +25 h: NTP after a day switched off. The step is recorded with its
	// size; the grant, 24 h by the wall clock, ends, and says how early.
	seq := b.lastSeq(t)
	step(25 * time.Hour)
	e := b.stepped(t, seq)
	size := time.Duration(int64(field(e, "size_ns").(float64)))
	if d := (size - 25*time.Hour).Abs(); d > time.Second {
		t.Errorf("%s says %v, want 25h", body.EventClockStepped, size)
	}
	t.Logf("%s: size %s, noticed by the %v", e.Type, field(e, "size"), field(e, "noticed"))
	waitFor(t, "the grant to end", 90*time.Second, func() (bool, string) {
		g := b.grants(t)[id]
		return g.State == "expired", g.State
	})

	// repeat restarts the daemon and asks again with the first key: the
	// recorded result, and nothing driven.
	repeat := func(when string) {
		t.Helper()
		b.stop(t)
		var w *outputWatch
		b, _, w = restart(t, l, b)
		w.end()
		b.arm(t, l)
		again, err := b.submit(t, awareness.DoIn{Capability: "gpio.set", Target: "gpio.relay2", Params: map[string]string{"state": "on"}, IdempotencyKey: key})
		if err != nil || !again.Repeat || again.ActionID != first.ActionID || again.Status != first.Status {
			t.Errorf("%s: the repeat: %+v %v; want the first's record %s %s", when, again, err, first.ActionID, first.Status)
		}
		if v := l.read(t, "RELAY2"); v != "0" {
			t.Errorf("%s: RELAY2 reads %s after the repeat: the action ran again", when, v)
		}
		t.Logf("%s: the repeat answered %s %s (repeat %v) and drove nothing", when, again.ActionID, again.Status, again.Repeat)
	}
	repeat("+25 h and a restart")

	// Back: recorded too; the grant stays ended.
	seq = b.lastSeq(t)
	step(-25 * time.Hour)
	e = b.stepped(t, seq)
	t.Logf("%s: size %s", e.Type, field(e, "size"))
	if g := b.grants(t)[id]; g.State != "expired" {
		t.Errorf("the grant after the clock went back: %+v, want expired", g)
	}
	for _, e := range b.events(t, "grant.expired") {
		t.Logf("grant.expired: %v", e.Payload)
	}
	repeat("back 25 h and a restart")

	// +30 days: retention deletes nothing of this boot, in the pass the
	// step starts and after a restart. The button pressed first, for
	// telemetry (which expires) among what must be kept.
	for i, high := range []bool{false, true} { // pressed, released: each held past the debounce
		l.pull(t, "BUTTON", high)
		// A sensed event commits within ledger.telemetry_commit_ms (15 s)
		// of its channel handing it over.
		waitFor(t, "the button in the ledger", 30*time.Second, func() (bool, string) {
			return len(b.events(t, "gpio.changed")) > i, "no gpio.changed yet"
		})
	}
	before := b.events(t)
	expiring := 0
	for _, e := range before {
		for _, p := range []string{"gpio.", "camera.", "audio.", "input.", "channel.", "body.self"} {
			if strings.HasPrefix(e.Type, p) {
				expiring++
				break
			}
		}
	}
	seq = b.lastSeq(t)
	step(30 * 24 * time.Hour)
	b.stepped(t, seq)
	waitFor(t, "the retention pass after the step", 30*time.Second, func() (bool, string) {
		out, _ := os.ReadFile(b.log)
		return strings.Contains(string(out), "ledger retention after the clock step events=0 "), "no pass in the log yet"
	})
	b.stop(t)
	b = startBody(t, b.data, b.cfg)
	b.ready(t)
	after := b.events(t)
	have := map[uint64]bool{}
	for _, e := range after {
		have[e.Seq] = true
	}
	lost := 0
	for _, e := range before {
		if !have[e.Seq] {
			lost++
			t.Errorf("lost after +30 days: %d %s", e.Seq, e.Type)
		}
	}
	t.Logf("+30 days and a restart: %d events of this boot before (%d of classes that expire), %d kept, %d lost", len(before), expiring, len(before)-lost, lost)
}
