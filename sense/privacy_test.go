package sense

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest"
	"github.com/tobe-body/tobe-body/ledger"
)

// recorder is a ledger that keeps what is appended.
type recorder struct {
	mu  sync.Mutex
	evs []ledger.Event
}

func (r *recorder) Append(_ context.Context, evs ...ledger.Event) ([]ledger.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, evs...)
	return make([]ledger.Result, len(evs)), nil
}

// causes are the causes of the privacy.changed records so far.
func (r *recorder) causes(t *testing.T) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.evs {
		var pc PrivacyChanged
		if err := ledger.UnmarshalPayload(e.Payload, &pc); err != nil || e.Type != PrivacyType {
			t.Fatalf("%s: %v", e.Type, err)
		}
		out = append(out, fmt.Sprintf("%s paused=%v", pc.Cause, pc.Paused))
	}
	return out
}

type privacyRig struct {
	p       *Privacy
	cam     *haltest.Camera
	mic     *haltest.Capture
	sw      *haltest.LineIn
	reg     *body.Registry
	rec     *recorder
	running atomic.Int64
	seen    []PrivacyState
}

func newPrivacyRig(t *testing.T, restored []Pause) *privacyRig {
	g := &privacyRig{cam: haltest.NewCamera(hal.FrameFormat{Pixel: hal.PixelGrey, Width: 4, Height: 4, Stride: 4}, 1),
		mic: haltest.NewCapture(hal.AudioFormat{Channels: 1, FrameSamples: 4}, 1), rec: &recorder{}, reg: body.NewRegistry(time.Now)}
	chip := haltest.NewChip("c")
	g.sw = chip.AddIn("PRIVACY", hal.High) // off: slid away from ground
	line, err := chip.In("PRIVACY", hal.InConfig{Edge: hal.BothEdges})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"camera.front", "audio.mic"} {
		g.reg.Register(body.Channel{ID: id, Kind: "camera", State: body.Enabled, Health: "ok"})
	}
	g.p = NewPrivacy(PrivacyConfig{Devices: []PrivacyDevice{{"camera.front", g.cam}, {"audio.mic", g.mic}}, Switch: line, Active: hal.Low,
		Registry: g.reg, Running: func() time.Duration { return time.Duration(g.running.Load()) }}, restored)
	g.p.Watch(func(st PrivacyState) { g.seen = append(g.seen, st) })
	return g
}

func (g *privacyRig) channel(t *testing.T, id string) string {
	t.Helper()
	c, err := g.reg.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return string(c.State) + ": " + c.Health
}

// The switch pauses the devices and their channels, and nothing but the
// switch ends that; an agent pauses but never resumes; a local
// administrator's resume ends the pauses, not the switch; a pause ends at
// its time on the running clock.
func TestPrivacy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newPrivacyRig(t, nil)
		ctx, cancel := context.WithCancel(t.Context())
		g.p.Start(ctx, g.rec)
		done := make(chan struct{})
		go func() { g.p.Run(ctx); close(done) }()
		if st := g.p.State(); st.Paused || !st.HasSwitch || len(g.rec.causes(t)) != 0 {
			t.Fatalf("at start, switch off: %+v, records %v", st, g.rec.causes(t))
		}
		g.sw.Set(hal.Low, hal.MonoNow()) // slid on
		synctest.Wait()
		if st := g.p.State(); !st.Paused || !st.Switch || st.Why != "the privacy switch is on" || g.cam.Pauses() != 1 || g.mic.Pauses() != 1 {
			t.Fatalf("switch on: %+v, pauses %d %d", st, g.cam.Pauses(), g.mic.Pauses())
		}
		if got := g.channel(t, "camera.front"); got != "paused: the privacy switch is on" {
			t.Errorf("camera channel %q", got)
		}
		// An agent's pause adds to it; the agent cannot resume.
		if _, err := g.p.Pause(ctx, "agent:pi", "agent", "the guests are here", 0); err != nil {
			t.Fatal(err)
		}
		if _, err := g.p.Resume(ctx, "agent:pi", false); !errors.Is(err, ErrNotLocal) {
			t.Errorf("an agent's resume: %v, want ErrNotLocal", err)
		}
		// A local administrator's resume ends the pause; the switch holds.
		st, err := g.p.Resume(ctx, "admin:uid=0", true)
		if err != nil || !st.Paused || len(st.Pauses) != 0 || g.cam.Pauses() != 1 {
			t.Fatalf("an administrator's resume with the switch on: %+v %v", st, err)
		}
		g.sw.Set(hal.High, hal.MonoNow()) // slid off
		synctest.Wait()
		if st := g.p.State(); st.Paused || st.Switch {
			t.Fatalf("switch off: %+v", st)
		}
		if got := g.channel(t, "audio.mic"); got != "enabled: ok" {
			t.Errorf("microphone channel %q", got)
		}
		// A pause of an hour of running time.
		if _, err := g.p.Pause(ctx, "admin:uid=0", "admin", "cleaning", time.Hour); err != nil {
			t.Fatal(err)
		}
		if g.cam.Pauses() != 2 {
			t.Fatal("a pause did not pause the camera")
		}
		if _, err := g.p.Pause(ctx, "agent:pi", "agent", "", 8*24*time.Hour); !errors.Is(err, ErrPauseInvalid) {
			t.Errorf("a pause of eight days: %v", err)
		}
		g.running.Add(int64(59 * time.Minute))
		time.Sleep(2 * time.Minute) // Run's timer, on the bubble's clock
		synctest.Wait()
		if !g.p.State().Paused {
			t.Fatal("the pause ended early")
		}
		g.running.Add(int64(2 * time.Minute))
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if st := g.p.State(); st.Paused || len(st.Pauses) != 0 {
			t.Fatalf("after its hour: %+v", st)
		}
		want := []string{"the privacy switch was turned on paused=true", "paused by agent:pi paused=true", "resumed by admin:uid=0 paused=true",
			"the privacy switch was turned off paused=false", "paused by admin:uid=0 for 1h0m0s paused=true", "the pause of admin:uid=0 ended paused=false"}
		if got := g.rec.causes(t); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if n := len(g.seen); n != 7 || g.seen[0].Paused || !g.seen[1].Paused {
			t.Errorf("watchers were told %d states", n)
		}
		cancel()
		<-done
	})
}

// A pause outlives a restart through the projection; one whose end
// passed meanwhile is dropped; the switch is read at start.
func TestPrivacyRestored(t *testing.T) {
	kv := ledger.MemKV{}
	pc := PrivacyChanged{PrivacyState: PrivacyState{Paused: true, Pauses: []Pause{{By: "agent:pi", Kind: "agent"}, {By: "admin:uid=0", Kind: "admin", UntilNS: int64(time.Hour)}}}}
	p, _ := ledger.MarshalPayload(pc)
	if err := PrivacyProjection().Apply(kv, &ledger.Event{Type: PrivacyType, Payload: p}); err != nil {
		t.Fatal(err)
	}
	var restored []Pause
	if err := ledger.UnmarshalPayload(kv.Get([]byte("pauses")), &restored); err != nil || len(restored) != 2 {
		t.Fatalf("projection: %v %v", restored, err)
	}
	g := newPrivacyRig(t, restored)
	g.running.Store(int64(2 * time.Hour))
	// Let go as soon as the devices are opened, recorded once the ledger
	// is there.
	g.p.Prepare()
	if g.cam.Pauses() != 1 || len(g.rec.causes(t)) != 0 {
		t.Fatalf("prepared: %d pauses, records %v", g.cam.Pauses(), g.rec.causes(t))
	}
	g.p.Start(t.Context(), g.rec)
	st := g.p.State()
	if !st.Paused || len(st.Pauses) != 1 || st.Pauses[0].By != "agent:pi" || g.cam.Pauses() != 1 {
		t.Fatalf("restored: %+v", st)
	}
	if got := g.rec.causes(t); len(got) != 1 || !strings.HasPrefix(got[0], "the body started") {
		t.Errorf("records at start %v", got)
	}
	// A switch that cannot be read counts as on.
	g2 := newPrivacyRig(t, nil)
	g2.sw.Fail(errors.New("gpio: EIO"))
	g2.p.Start(t.Context(), g2.rec)
	if st := g2.p.State(); !st.Paused || !st.Switch {
		t.Errorf("an unreadable switch: %+v", st)
	}
}
