//go:build lab && portaudio

package sense

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/holoplot/go-evdev"
	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/audio"
	"github.com/tobe-body/tobe-body/hal/camera"
	"github.com/tobe-body/tobe-body/hal/camera/vivid"
	"github.com/tobe-body/tobe-body/hal/input"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense/motion"
	"github.com/tobe-body/tobe-body/sense/sound"
)

// The sense channels against real drivers in the lab VM: vivid's test
// pattern for the camera channel, the snd-aloop loopback card (played on
// its PCM 0, captured on its PCM 1) for the microphone channel, uinput
// devices read through evdev for the input channel.

// labOutlet is an outlet stamping events with the system's clock, so that
// their MonotonicNS are CLOCK_MONOTONIC like the drivers' timestamps.
func labOutlet(t *testing.T, channel string) *Outlet {
	t.Helper()
	clock, err := body.NewClock()
	if err != nil {
		t.Fatal(err)
	}
	return NewOutlet(Source{Channel: channel, Clock: clock}, 1024)
}

// recv is an event and when the test took it from the outlet's queue.
type recv struct {
	ev ledger.Event
	at hal.Mono
}

func (r recv) String() string {
	var p map[string]any
	if err := ledger.UnmarshalPayload(r.ev.Payload, &p); err != nil {
		return fmt.Sprintf("%s at %d: %v", r.ev.Type, r.ev.MonotonicNS, err)
	}
	return fmt.Sprintf("%s at %d %v", r.ev.Type, r.ev.MonotonicNS, p)
}

// events reads a channel's events from its outlet's queue as they come.
type events struct {
	t    *testing.T
	o    *Outlet
	seen []recv
}

// next waits up to d for the next event; ok is false when none came.
func (e *events) next(d time.Duration) (recv, bool) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case q := <-e.o.q:
		ev := q.ev
		r := recv{ev: ev, at: hal.MonoNow()}
		e.seen = append(e.seen, r)
		return r, true
	case <-tm.C:
		return recv{}, false
	}
}

// until waits up to d for an event for which want holds, keeping the
// others; it fails the test when none comes.
func (e *events) until(what string, d time.Duration, want func(recv) bool) recv {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for {
		r, ok := e.next(time.Until(deadline))
		if !ok {
			e.t.Fatalf("%s: not within %v; events so far:\n%s", what, d, e.list(e.seen))
		}
		if want(r) {
			return r
		}
	}
}

// during collects every event that comes in the next d.
func (e *events) during(d time.Duration) []recv {
	var got []recv
	deadline := time.Now().Add(d)
	for {
		r, ok := e.next(time.Until(deadline))
		if !ok {
			return got
		}
		got = append(got, r)
	}
}

func (e *events) list(rs []recv) string {
	var b bytes.Buffer
	for _, r := range rs {
		fmt.Fprintf(&b, "  %v\n", r)
	}
	return b.String()
}

func ofType(typ string) func(recv) bool {
	return func(r recv) bool { return r.ev.Type == typ }
}

func payload[T any](t *testing.T, r recv) T {
	t.Helper()
	var p T
	if err := ledger.UnmarshalPayload(r.ev.Payload, &p); err != nil {
		t.Fatalf("%s: %v", r.ev.Type, err)
	}
	return p
}

// mono is an event's time on the monotonic clock.
func mono(r recv) hal.Mono { return hal.Mono(r.ev.MonotonicNS) }

// --- Camera: vivid ---------------------------------------------------------

// vividControls is vivid's capture node, open for its controls beside
// the camera's descriptor.
type vividControls struct {
	t *testing.T
	c *vivid.Controls
}

// openVivid finds vivid's capture node and its controls; the controls
// the test sets are put back as they were when it ends.
func openVivid(t *testing.T) *vividControls {
	t.Helper()
	c, err := vivid.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &vividControls{t: t, c: c}
}

// set sets the control called name to value, or to the menu item called
// value when it is a string, and puts the old value back at the end of
// the test.
func (v *vividControls) set(name string, value any) {
	v.t.Helper()
	var val int32
	switch x := value.(type) {
	case int:
		val = int32(x)
	case string:
		var err error
		if val, err = v.c.Item(name, x); err != nil {
			v.t.Fatal(err)
		}
	default:
		panic(fmt.Sprintf("control value %T", value))
	}
	old, err := v.c.Get(name)
	if err != nil {
		v.t.Fatal(err)
	}
	if err := v.c.Set(name, val); err != nil {
		v.t.Fatal(err)
	}
	v.t.Cleanup(func() { v.c.Set(name, old) })
}

// TestLabMotionFromVivid shows the camera channel vivid's "Ten Pixels
// Wide Cross", a black cross on white: still, no motion; moving sideways
// (vivid's Horizontal Movement), the cross's vertical bar crosses the
// frame and motion starts in the zone it is in; stopped, every zone that
// started ends.
func TestLabMotionFromVivid(t *testing.T) {
	v := openVivid(t)
	v.set("Timestamp Source", 1) // start of exposure: in the past when the frame is dequeued
	v.set("Test Pattern", "Ten Pixels Wide Cross")
	v.set("OSD Text Mode", "None") // vivid's text overlay counts frames: a change in every frame
	v.set("Horizontal Movement", "No Movement")

	cam, err := camera.Open(hal.CameraConfig{Device: "vivid", Pixel: []hal.PixelFormat{hal.PixelYUYV}, Width: 320, Height: 240, Rate: 30 * physic.Hertz})
	if err != nil {
		t.Fatal(err)
	}
	defer cam.Close()
	o := labOutlet(t, "camera.front")
	zones := []motion.Zone{
		{Name: "left", Polygon: []motion.Point{{X: 0, Y: 0}, {X: 0.5, Y: 0}, {X: 0.5, Y: 1}, {X: 0, Y: 1}}},
		{Name: "right", Polygon: []motion.Point{{X: 0.5, Y: 0}, {X: 1, Y: 0}, {X: 1, Y: 1}, {X: 0.5, Y: 1}}},
	}
	c, err := NewCameraChannel(o, cam, motion.Config{Zones: zones}, Snapshots{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	evs := &events{t: t, o: o}

	// Still: the pattern does not move, nothing is reported.
	still := evs.during(3 * time.Second)
	st := c.Stats()
	t.Logf("opened %s: %v; %d frames analysed in the first 3 s, still", cam.Name(), cam.Format(), st.Frames)
	if len(still) > 0 {
		t.Errorf("events while the pattern was still:\n%s", evs.list(still))
	}
	if st.Frames < 10 {
		t.Fatalf("only %d frames analysed in 3 s: %+v", st.Frames, st)
	}

	// Moving: motion starts.
	moved := hal.MonoNow()
	v.set("Horizontal Movement", "Move Right")
	first := evs.until("camera.motion_started after the pattern began to move", 10*time.Second, ofType("camera.motion_started"))
	t.Logf("movement on -> motion_started in %v (first moving frame %v after it; %d frames analysed so far): %v",
		first.at.Sub(moved).Round(time.Millisecond), mono(first).Sub(moved).Round(time.Millisecond), c.Stats().Frames, first)
	evs.during(2 * time.Second) // the bar crosses on

	// Stopped: every zone that started ends.
	stopped := hal.MonoNow()
	v.set("Horizontal Movement", "No Movement")
	open := func() []string {
		on := map[string]bool{}
		for _, r := range evs.seen {
			on[zoneOf(t, r)] = r.ev.Type == "camera.motion_started"
		}
		var zs []string
		for z, moving := range on {
			if moving {
				zs = append(zs, z)
			}
		}
		return zs
	}
	for deadline := time.Now().Add(15 * time.Second); len(open()) > 0; {
		if _, ok := evs.next(time.Until(deadline)); !ok {
			t.Fatalf("motion still on in %v 15 s after the pattern stopped; events:\n%s", open(), evs.list(evs.seen))
		}
	}
	lastEnd := evs.seen[len(evs.seen)-1]
	t.Logf("movement off -> last motion_ended in %v: %v", lastEnd.at.Sub(stopped).Round(time.Millisecond), lastEnd)
	if after := evs.during(2 * time.Second); len(after) > 0 {
		t.Errorf("events after motion ended with the pattern still:\n%s", evs.list(after))
	}

	// Each zone's episodes alternate start, end; times are those of the
	// frames, between the movement and when the event was taken.
	starts := map[string]recv{}
	var pairs []string
	for _, r := range evs.seen {
		zone := zoneOf(t, r)
		if mono(r) < moved || mono(r) > r.at {
			t.Errorf("%v: time not between the pattern's first move (%d) and when the event was taken (%d)", r, moved, r.at)
		}
		switch r.ev.Type {
		case "camera.motion_started":
			if _, on := starts[zone]; on {
				t.Errorf("%v: zone %q started twice", r, zone)
			}
			p := payload[MotionStarted](t, r)
			if p.Area <= 0 || p.Area > 0.5 || !inZone(zone, p.Box) {
				t.Errorf("%v: want an area, a box inside the zone", r)
			}
			starts[zone] = r
		case "camera.motion_ended":
			p := payload[MotionEnded](t, r)
			if !inZone(zone, p.Box) {
				t.Errorf("%v: box outside the zone", r)
			}
			s, on := starts[zone]
			if !on {
				t.Errorf("%v: zone %q ended without starting", r, zone)
				continue
			}
			delete(starts, zone)
			d := time.Duration(p.DurationMS) * time.Millisecond
			if p.Frames <= 0 || p.DurationMS <= 0 || p.Cut || p.PeakArea <= 0 {
				t.Errorf("%v: want frames, a duration and a peak area, not cut", r)
			}
			if got := mono(r).Sub(mono(s)); got < d-time.Millisecond || got > d+time.Millisecond {
				t.Errorf("%v: %v after its start, but lasted %v", r, got, d)
			}
			pairs = append(pairs, fmt.Sprintf("%s %v (%d frames, peak area %.3f)", p.Zone, d, p.Frames, p.PeakArea))
		default:
			t.Errorf("unexpected %v", r)
		}
	}
	t.Logf("episodes: %q", pairs)
	if len(pairs) == 0 {
		t.Error("no motion episode")
	}
}

// zoneOf is the zone of a camera.motion_started or _ended event.
func zoneOf(t *testing.T, r recv) string {
	t.Helper()
	var p map[string]any
	if err := ledger.UnmarshalPayload(r.ev.Payload, &p); err != nil {
		t.Fatal(err)
	}
	z, _ := p["zone"].(string)
	return z
}

// inZone says whether box lies in the zone of that name: the left or the
// right half (a cell belongs to the zone its centre is in, so the box of
// the left zone ends at 0.5 at most).
func inZone(zone string, box [4]float64) bool {
	switch zone {
	case "left":
		return box[0] >= 0 && box[2] <= 0.5 && box[0] < box[2] && box[1] < box[3]
	case "right":
		return box[0] >= 0.5 && box[2] <= 1 && box[0] < box[2] && box[1] < box[3]
	}
	return false
}

// --- Microphone: the loopback card -----------------------------------------

const (
	toneHz    = 1000 * physic.Hertz
	toneDBFS  = -6.0 // hal/audio's Tone: relative to a full-scale sine (AES17)
	toneLen   = 2500 * time.Millisecond
	voiceDBFS = -45.0 // RMS, as sound reports it: its peaks stay under the loud threshold
)

// toneRMS is the tone's RMS as sound reports it: its 0 dBFS is a
// full-scale square wave, so a sine reads 3.01 dB under its AES17 level.
var toneRMS = toneDBFS + 20*math.Log10(1/math.Sqrt2)

// voice renders d of a voice-like sound at rate: syllables, four a
// second with a pause after each, of a harmonic series (falling 6 dB an
// octave, up to 4 kHz) on a fundamental gliding from 160 to 120 Hz with a
// slight waver, through two formant resonances that change each syllable,
// scaled to rms dBFS as sound reports levels. A smaller sibling of the
// synthetic speech sense/sound's tests use.
func voice(rate int, d time.Duration, rms float64) []int16 {
	n := int(d.Seconds() * float64(rate))
	x := make([]float64, n)
	formants := [][2]float64{{730, 1090}, {270, 2290}, {530, 1840}, {570, 840}, {300, 870}}
	type res struct{ a1, a2, g, y1, y2 float64 }
	set := func(r *res, f, bw float64) {
		rad := math.Exp(-math.Pi * bw / float64(rate))
		r.a1, r.a2 = 2*rad*math.Cos(2*math.Pi*f/float64(rate)), -rad*rad
		r.g = 1 - r.a1 - r.a2
	}
	var rs [2]res
	syl := rate / 4
	var phase float64
	for i := range n {
		k := i / syl
		j := i % syl
		if j == 0 {
			set(&rs[0], formants[k%len(formants)][0], 80)
			set(&rs[1], formants[k%len(formants)][1], 120)
		}
		t := float64(i) / float64(rate)
		f0 := (160 - 40*t/d.Seconds()) * (1 + 0.02*math.Sin(2*math.Pi*5*t))
		phase = math.Mod(phase+2*math.Pi*f0/float64(rate), 2*math.Pi)
		var s float64
		for h := 1; float64(h)*f0 < 4000; h++ {
			s += math.Sin(float64(h)*phase) / float64(h)
		}
		for r := range rs {
			y := rs[r].g*s + rs[r].a1*rs[r].y1 + rs[r].a2*rs[r].y2
			rs[r].y2, rs[r].y1 = rs[r].y1, y
			s = y
		}
		voiced := syl * 7 / 10
		if j < voiced {
			e := math.Sin(math.Pi * float64(j) / float64(voiced))
			x[i] = s * e * e
		}
	}
	var sum float64
	for _, v := range x {
		sum += v * v
	}
	// sound's 0 dBFS is an RMS of full scale.
	g := math.Pow(10, rms/20) / math.Sqrt(sum/float64(n))
	out := make([]int16, n)
	for i, v := range x {
		out[i] = int16(max(-32768, min(32767, math.Round(v*g*32768))))
	}
	return out
}

// TestLabSoundThroughLoopback plays nothing, a tone, and a voice-like
// sound through the loopback card and reads its capture side with the
// microphone channel: silence is reported at the silence floor with
// nothing else; the tone is loud, at its level, and not voice; the
// voice-like sound is voice.
func TestLabSoundThroughLoopback(t *testing.T) {
	mic, err := audio.OpenCapture(hal.AudioConfig{Device: "Loopback,1"})
	if err != nil {
		t.Fatal(err)
	}
	defer mic.Close()
	spk, err := audio.OpenPlayback(hal.AudioConfig{Device: "Loopback,0"})
	if err != nil {
		t.Fatal(err)
	}
	defer spk.Close()
	t.Logf("capture %s (%s), playback %s (%s)", mic.Name(), mic.Format(), spk.Name(), spk.Format())
	o := labOutlet(t, "audio.mic")
	c, err := NewMicChannel(o, mic, sound.Config{SummaryEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	opened := hal.MonoNow()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	evs := &events{t: t, o: o}
	inTime := func(r recv, from hal.Mono) {
		t.Helper()
		if mono(r) < from || mono(r) > r.at {
			t.Errorf("%v: time not between %d and when the event was taken (%d)", r, from, r.at)
		}
	}

	// Silence: levels at the floor, nothing else.
	quiet := evs.during(3500 * time.Millisecond)
	var levels int
	for _, r := range quiet {
		inTime(r, opened)
		if r.ev.Type != "audio.level" {
			t.Errorf("in silence: %v", r)
			continue
		}
		levels++
		p := payload[SoundLevel](t, r)
		if p.RMS > sound.Silence+1 || p.Peak > sound.Silence+1 || p.Floor > sound.Silence+1 || p.VoiceMS != 0 {
			t.Errorf("in silence: %v, want the silence floor (%v dBFS)", r, sound.Silence)
		}
	}
	t.Logf("silence: %d audio.level events, %v", levels, quiet)
	if levels < 2 {
		t.Errorf("%d audio.level events in 3.5 s of silence, want one a second", levels)
	}

	// A tone: loud, then loud_ended; the levels of the seconds inside it
	// are its level; never voice.
	rate := int(mic.Format().Rate / physic.Hertz)
	played := hal.MonoNow()
	if err := spk.Play(t.Context(), audio.Tone(spk.Format(), toneHz, toneDBFS, toneLen)); err != nil {
		t.Fatal(err)
	}
	loud := evs.until("audio.loud for the tone", 5*time.Second, ofType("audio.loud"))
	ended := evs.until("audio.loud_ended after the tone", 5*time.Second, ofType("audio.loud_ended"))
	evs.during(1500 * time.Millisecond) // the level of the second after it
	inTime(loud, played)
	inTime(ended, played)
	lp, ep := payload[Loud](t, loud), payload[Loud](t, ended)
	dur := time.Duration(ep.DurationMS) * time.Millisecond
	t.Logf("tone %v at %.1f dBFS (RMS %.2f as sound reports it): loud %v after Play was called, peak %.1f rms %.1f; ended after %v, peak %.1f rms %.1f",
		toneLen, toneDBFS, toneRMS, mono(loud).Sub(played).Round(time.Millisecond), lp.Peak, lp.RMS, dur, ep.Peak, ep.RMS)
	// audio.loud carries the window that reached the threshold: the
	// tone's onset, part of it silence and fade; audio.loud_ended the
	// whole stretch.
	if lp.Peak < sound.DefaultLoudDBFS || lp.Peak > toneDBFS+0.5 || math.Abs(ep.Peak-toneDBFS) > 0.5 || math.Abs(ep.RMS-toneRMS) > 1 {
		t.Errorf("loud %+v, ended %+v: want the onset's peak over %.0f dBFS, and for the stretch peak %.1f, RMS %.1f dBFS",
			lp, ep, sound.DefaultLoudDBFS, toneDBFS, toneRMS)
	}
	if ep.Cut || dur < toneLen-100*time.Millisecond || dur > toneLen+100*time.Millisecond {
		t.Errorf("loud stretch of %v (cut %v), want the tone's %v within 100 ms", dur, ep.Cut, toneLen)
	}
	var inside []float64
	for _, r := range evs.seen {
		if r.ev.Type != "audio.level" || mono(r) < played {
			continue
		}
		p := payload[SoundLevel](t, r)
		from := mono(r).Add(-time.Duration(p.PeriodMS) * time.Millisecond)
		if from < mono(loud) || mono(r) > mono(ended) {
			if p.RMS > toneRMS+1 {
				t.Errorf("%v: louder than the tone", r)
			}
			continue
		}
		inside = append(inside, p.RMS)
		if math.Abs(p.RMS-toneRMS) > 1 || math.Abs(p.Peak-toneDBFS) > 0.5 || p.CoveredMS < p.PeriodMS-20 {
			t.Errorf("%v: within the tone, want RMS %.1f ±1 dB, peak %.1f, the whole period covered", r, toneRMS, toneDBFS)
		}
	}
	t.Logf("audio.level RMS of the seconds inside the tone: %v dBFS (want %.2f ±1)", inside, toneRMS)
	if len(inside) == 0 {
		t.Errorf("no audio.level period inside the tone:\n%s", evs.list(evs.seen))
	}

	// A voice-like sound, quieter than the loud threshold: a voice pair.
	speech := voice(rate, 2*time.Second, voiceDBFS)
	spoken := hal.MonoNow()
	if err := spk.Play(t.Context(), speech); err != nil {
		t.Fatal(err)
	}
	vs := evs.until("audio.voice_started for the voice-like sound", 5*time.Second, ofType("audio.voice_started"))
	ve := evs.until("audio.voice_ended after it", 5*time.Second, ofType("audio.voice_ended"))
	evs.during(time.Second)
	inTime(vs, spoken)
	inTime(ve, spoken)
	vp := payload[Voice](t, ve)
	t.Logf("voice-like sound of 2 s at %.0f dBFS: voice_started %v after Play was called, ended after %v, SNR %.1f dB",
		voiceDBFS, mono(vs).Sub(spoken).Round(time.Millisecond), time.Duration(vp.DurationMS)*time.Millisecond, vp.SNR)
	if vp.Cut || vp.DurationMS < 1000 || vp.DurationMS > 2500 {
		t.Errorf("voice ended %+v, want about the sound's 2 s, not cut", vp)
	}

	var voices, louds int
	for _, r := range evs.seen {
		switch r.ev.Type {
		case "audio.voice_started":
			voices++
			if mono(r) < spoken {
				t.Errorf("%v: voice in the tone", r)
			}
		case "audio.loud":
			louds++
		}
	}
	if voices != 1 || louds != 1 {
		t.Errorf("%d voice segments and %d loud stretches, want one each (the voice-like sound, the tone):\n%s", voices, louds, evs.list(evs.seen))
	}
	// An overrun here is the VM starved by a loaded host, not the channel:
	// the events above already show whether the audio analysed was whole
	// (lost audio ends a segment cut).
	if s := c.Stats(); s.Overruns != 0 {
		t.Logf("stats %+v: the capture overran (the VM was starved)", s)
	}
}

// --- Input: uinput ---------------------------------------------------------

// uinputDevice makes a uinput device and waits, through the hotplug
// watcher, until its node is there; it is destroyed when the test ends.
func uinputDevice(t *testing.T, name string, caps map[evdev.EvType][]evdev.EvCode) *evdev.InputDevice {
	t.Helper()
	w, err := input.Watch()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	dev, err := evdev.CreateDevice(name, evdev.InputID{BusType: 0x06, Vendor: 1, Product: 2, Version: 1}, caps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { evdev.DestroyDevice(dev) })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for {
		c, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("%s never appeared: %v", name, err)
		}
		if c.Added && c.Info.Name == name {
			return dev
		}
	}
}

func write(t *testing.T, dev *evdev.InputDevice, evs ...evdev.InputEvent) {
	t.Helper()
	for _, e := range evs {
		if err := dev.WriteOne(&e); err != nil {
			t.Fatal(err)
		}
	}
}

var synReport = evdev.InputEvent{Type: evdev.EV_SYN, Code: evdev.SYN_REPORT}

// runInputChannel opens the device called name with hal/input and runs
// an input channel of cfg on it until the test ends.
func runInputChannel(t *testing.T, name string, cfg InputConfig) (*events, func()) {
	t.Helper()
	dev, err := input.Open(hal.InputConfig{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	o := labOutlet(t, "input."+name)
	c, err := NewInputChannel(o, dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	stop := func() {
		t.Helper()
		dev.Halt()
		if err := <-done; err != nil {
			t.Error(err)
		}
		dev.Close()
	}
	return &events{t: t, o: o}, stop
}

// TestLabControlPressesAndDial is a keypad with a button and a dial: a
// press and a release name the key; a burst of dial steps is one
// rotation with their sum.
func TestLabControlPressesAndDial(t *testing.T) {
	const name = "tobe-lab-keypad"
	dev := uinputDevice(t, name, map[evdev.EvType][]evdev.EvCode{
		evdev.EV_KEY: {evdev.BTN_0},
		evdev.EV_REL: {evdev.REL_DIAL},
	})
	evs, stop := runInputChannel(t, name, InputConfig{Role: Control})
	defer stop()

	before := hal.MonoNow()
	write(t, dev, evdev.InputEvent{Type: evdev.EV_KEY, Code: evdev.BTN_0, Value: 1}, synReport)
	pressed := evs.until("input.pressed", 5*time.Second, ofType("input.pressed"))
	write(t, dev, evdev.InputEvent{Type: evdev.EV_KEY, Code: evdev.BTN_0, Value: 0}, synReport)
	released := evs.until("input.released", 5*time.Second, ofType("input.released"))
	for _, r := range []recv{pressed, released} {
		if p := payload[Key](t, r); p.Key != "BTN_0" || p.Device != name {
			t.Errorf("%v: want key BTN_0 of %s", r, name)
		}
		if mono(r) < before || mono(r) > r.at {
			t.Errorf("%v: time not between the press (%d) and when the event was taken (%d)", r, before, r.at)
		}
	}
	if mono(released) < mono(pressed) {
		t.Errorf("released at %d before pressed at %d", released.ev.MonotonicNS, pressed.ev.MonotonicNS)
	}
	t.Logf("press -> input.pressed taken after %v; release -> input.released", pressed.at.Sub(before).Round(time.Microsecond))

	// Dial steps in a burst, well inside the rotation window.
	steps := []int32{1, 1, 2, -1, 1, 1}
	var sum int64
	turned := hal.MonoNow()
	for _, s := range steps {
		write(t, dev, evdev.InputEvent{Type: evdev.EV_REL, Code: evdev.REL_DIAL, Value: s}, synReport)
		sum += int64(s)
	}
	rot := evs.until("input.rotated", 5*time.Second, ofType("input.rotated"))
	p := payload[Rotated](t, rot)
	t.Logf("dial steps %v -> %v, taken %v after the first step (window %v)", steps, rot, rot.at.Sub(turned).Round(time.Millisecond), DefaultRotateWindow)
	if p.Axis != "dial" || p.Delta != sum || p.Device != name {
		t.Errorf("%v: want one rotation of the dial by %d", rot, sum)
	}
	if mono(rot) < turned || mono(rot) > rot.at {
		t.Errorf("%v: time not between the first step (%d) and when the event was taken (%d)", rot, turned, rot.at)
	}
	if more := evs.during(500 * time.Millisecond); len(more) > 0 {
		t.Errorf("after the rotation:\n%s", evs.list(more))
	}

	// The channel reads on after the rotation window closed.
	write(t, dev, evdev.InputEvent{Type: evdev.EV_KEY, Code: evdev.BTN_0, Value: 1}, synReport,
		evdev.InputEvent{Type: evdev.EV_KEY, Code: evdev.BTN_0, Value: 0}, synReport)
	evs.until("input.pressed after the rotation", 5*time.Second, ofType("input.pressed"))
	evs.until("input.released after the rotation", 5*time.Second, ofType("input.released"))
	var types []string
	for _, r := range evs.seen {
		types = append(types, r.ev.Type)
	}
	if want := []string{"input.pressed", "input.released", "input.rotated", "input.pressed", "input.released"}; !slices.Equal(types, want) {
		t.Errorf("events:\n%swant %q", evs.list(evs.seen), want)
	}
}

// TestLabKeyboardIsOnlyActivity types on a keyboard that is not a
// control: the channel reports how much it was used, never a key.
func TestLabKeyboardIsOnlyActivity(t *testing.T) {
	const name = "tobe-lab-keyboard"
	letters := []evdev.EvCode{evdev.KEY_H, evdev.KEY_E, evdev.KEY_L, evdev.KEY_L, evdev.KEY_O, evdev.KEY_SPACE, evdev.KEY_T, evdev.KEY_O, evdev.KEY_B, evdev.KEY_E}
	dev := uinputDevice(t, name, map[evdev.EvType][]evdev.EvCode{evdev.EV_KEY: slices.Compact(slices.Sorted(slices.Values(letters)))})
	const window = time.Second
	evs, stop := runInputChannel(t, name, InputConfig{Role: Activity, Window: window})

	typed := hal.MonoNow()
	for _, k := range letters {
		write(t, dev, evdev.InputEvent{Type: evdev.EV_KEY, Code: k, Value: 1}, synReport,
			evdev.InputEvent{Type: evdev.EV_KEY, Code: k, Value: 0}, synReport)
	}
	act := evs.until("input.activity", 5*time.Second, ofType("input.activity"))
	// One more key after the window: a window of its own.
	write(t, dev, evdev.InputEvent{Type: evdev.EV_KEY, Code: evdev.KEY_T, Value: 1}, synReport,
		evdev.InputEvent{Type: evdev.EV_KEY, Code: evdev.KEY_T, Value: 0}, synReport)
	again := evs.until("input.activity of the second window", 5*time.Second, ofType("input.activity"))
	stop()
	for len(evs.o.q) > 0 {
		evs.next(time.Second)
	}
	t.Logf("typed %d keys -> %v, taken %v after the first (window %v); one more -> %v", len(letters), act, act.at.Sub(typed).Round(time.Millisecond), window, again)

	p := payload[ActivityReport](t, act)
	if p.Events != 2*len(letters) || p.WindowMS != window.Milliseconds() || p.Device != name {
		t.Errorf("%v: want %d events (press and release) in a %v window", act, 2*len(letters), window)
	}
	if mono(act) < typed || mono(act) > act.at {
		t.Errorf("%v: time not between the typing (%d) and when the event was taken (%d)", act, typed, act.at)
	}
	for _, r := range evs.seen {
		var m map[string]any
		if err := ledger.UnmarshalPayload(r.ev.Payload, &m); err != nil {
			t.Fatal(err)
		}
		if r.ev.Type != "input.activity" || bytes.Contains(r.ev.Payload, []byte("KEY_")) || len(m) != 3 {
			t.Errorf("%v: want only input.activity with the device, a count and a window", r)
		}
	}
	if p := payload[ActivityReport](t, again); p.Events != 2 || mono(again) <= mono(act) {
		t.Errorf("%v: want the one key's press and release, in a later window", again)
	}
	if len(evs.seen) != 2 {
		t.Errorf("events:\n%swant the two windows' activity", evs.list(evs.seen))
	}
}
