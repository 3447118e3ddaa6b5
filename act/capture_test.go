package act

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/jpeg"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/evidence"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
)

// frameYUYV is a w×h YUYV frame of mid grey.
func frameYUYV(w, h int) *hal.Frame {
	data := bytes.Repeat([]byte{128}, 2*w*h)
	return hal.NewFrame(hal.FrameFormat{Pixel: hal.PixelYUYV, Width: w, Height: h, Stride: 2 * w}, data, 7, hal.Mono(time.Second), nil)
}

// captureBench is a runner with camera.snapshot and audio.clip over fake
// cameras and a fake microphone, keeping evidence in a real store.
type captureBench struct {
	r     *Runner
	store *ledger.Store
	ev    *evidence.Store
	grabs int
}

func newCaptureBench(t *testing.T, grants []Grant) *captureBench {
	t.Helper()
	b := &captureBench{}
	classes := ledger.DefaultClasses()
	store, err := ledger.Open(ledger.Options{Path: filepath.Join(t.TempDir(), "ledger.db"), Classes: &classes,
		Projections: append(Projections(), evidence.Projections()...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	b.store = store
	b.ev, err = evidence.Open(t.Context(), evidence.Options{Dir: filepath.Join(t.TempDir(), "evidence"), Ledger: store})
	if err != nil {
		t.Fatal(err)
	}
	rig := newRig(t, false)
	rig.e.Check()
	reg := body.NewRegistry(time.Now)
	for _, id := range []string{"camera.front", "audio.mic"} {
		reg.Register(body.Channel{ID: id, Kind: "camera", State: body.Enabled})
	}
	lens := &Lens{Channel: "camera.front", Privacy: ledger.Sensitive, Zones: map[string][4]float64{"door": {0.5, 0, 1, 1}},
		Grab: func(ctx context.Context) (*hal.Frame, error) {
			b.grabs++
			return frameYUYV(640, 480), nil
		},
		Motion: func() ([4]float64, bool) { return [4]float64{0, 0, 0.25, 0.5}, true }}
	f := hal.AudioFormat{Rate: 16 * physic.KiloHertz, Channels: 1, FrameSamples: 320}
	ear := &Ear{Channel: "audio.mic", Privacy: ledger.Sensitive, Ring: 5 * time.Second,
		Clip: func(ctx context.Context, before, after time.Duration) (hal.AudioSpan, error) {
			n := int((before + after).Seconds() * 16000)
			s := make([]int16, n)
			for i := range s {
				s[i] = int16(8000 * math.Sin(2*math.Pi*440*float64(i)/16000))
			}
			return hal.AudioSpan{Format: f, Samples: s, Start: hal.Mono(time.Second)}, nil
		}}
	b.r = NewRunner(Environment{EStop: rig.e, Registry: reg, Health: func() body.Degradation { return body.LevelNormal },
		Grants: func() []Grant { return grants }}, store)
	for _, a := range []Action{NewCameraSnapshot([]*Lens{lens}, b.ev, 0, 0), NewAudioClip([]*Ear{ear}, b.ev)} {
		if err := b.r.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func TestCaptureThroughTheRunner(t *testing.T) {
	agent := Principal{Kind: AgentSession, Subject: "agent:pi", Session: "s1", Trust: ledger.High}
	grants := []Grant{
		{ID: "g-cam", Subject: "agent:pi", Capability: "camera.snapshot", Scope: "camera.front", By: "admin:uid=0", ByTrust: ledger.Max},
		{ID: "g-mic", Subject: "agent:pi", Capability: "audio.clip", Scope: "audio.*", By: "admin:uid=0", ByTrust: ledger.Max},
	}
	b := newCaptureBench(t, grants)
	ctx := context.Background()
	res := b.r.Submit(ctx, Invocation{Principal: agent, Capability: "camera.snapshot", Target: "camera.front", Note: "who is at the door?",
		Params: map[string]string{"crop": "zone", "zone": "door", "width": "160"}})
	if res.Status != Succeeded || res.Evidence == "" || res.Verification.Result != "verified" {
		t.Fatalf("snapshot: %+v %+v", res, res.Verification)
	}
	it, data, err := b.ev.ReadBack(res.Evidence)
	if err != nil {
		t.Fatal(err)
	}
	if it.By != "agent:pi" || it.Why != "who is at the door?" || it.Grant != "g-cam" || it.Action != res.ActionID || it.Source != "camera.front" ||
		it.Width != 160 || it.Height != 240 || it.Kind != evidence.Snapshot || it.Privacy != "sensitive" || it.FrameSeq != 7 {
		t.Errorf("kept %+v", it)
	}
	if !strings.Contains(res.Receipt, res.Evidence) || !strings.Contains(res.Receipt, it.SHA256) {
		t.Errorf("receipt %q does not name the evidence", res.Receipt)
	}
	if _, err := jpeg.Decode(bytes.NewReader(data)); err != nil {
		t.Errorf("not a JPEG: %v", err)
	}
	// The clip: two seconds before the request and one after.
	res = b.r.Submit(ctx, Invocation{Principal: agent, Capability: "audio.clip", Target: "audio.mic", Params: map[string]string{"before_ms": "2000", "after_ms": "1000"}})
	if res.Status != Succeeded || res.Verification.Result != "verified" {
		t.Fatalf("clip: %+v %+v", res, res.Verification)
	}
	it, data, err = b.ev.ReadBack(res.Evidence)
	if err != nil {
		t.Fatal(err)
	}
	c, err := decodeWAV(data, math.MaxInt32)
	if err != nil || c.Rate != 16000 || c.Channels != 1 || c.frames() != 48000 || it.DurationMS != 3000 || it.Kind != evidence.Clip || it.Grant != "g-mic" {
		t.Errorf("clip: %d Hz x%d, %d frames, %v; kept %+v", c.Rate, c.Channels, c.frames(), err, it)
	}
	// Refused: another principal with no grant, and malformed requests;
	// none of them grabs a frame or keeps anything.
	grabs := b.grabs
	for _, tc := range []struct {
		name   string
		inv    Invocation
		reason Reason
		detail string
	}{
		{"no grant", Invocation{Principal: Principal{Kind: AgentSession, Subject: "agent:guest", Trust: ledger.High}, Capability: "camera.snapshot", Target: "camera.front"}, ReasonNoGrant, ""},
		{"too little trust", Invocation{Principal: Principal{Kind: AgentSession, Subject: "agent:pi", Trust: ledger.Medium}, Capability: "camera.snapshot", Target: "camera.front"}, ReasonRiskExceedsTrust, ""},
		{"unknown zone", Invocation{Principal: agent, Capability: "camera.snapshot", Target: "camera.front", Params: map[string]string{"crop": "zone", "zone": "garden"}}, ReasonInvalidRequest, `params.zone "garden"`},
		{"zone without crop", Invocation{Principal: agent, Capability: "camera.snapshot", Target: "camera.front", Params: map[string]string{"zone": "door"}}, ReasonInvalidRequest, "only with crop zone"},
		{"too wide", Invocation{Principal: agent, Capability: "camera.snapshot", Target: "camera.front", Params: map[string]string{"width": "4000"}}, ReasonInvalidRequest, "params.width"},
		{"bad quality", Invocation{Principal: agent, Capability: "camera.snapshot", Target: "camera.front", Params: map[string]string{"quality": "100"}}, ReasonInvalidRequest, "params.quality"},
		{"unknown param", Invocation{Principal: agent, Capability: "camera.snapshot", Target: "camera.front", Params: map[string]string{"flash": "on"}}, ReasonInvalidRequest, "params.flash"},
		{"unknown camera", Invocation{Principal: agent, Capability: "camera.snapshot", Target: "camera.back"}, ReasonInvalidRequest, `no camera "camera.back"`},
		{"more before than the ring", Invocation{Principal: agent, Capability: "audio.clip", Target: "audio.mic", Params: map[string]string{"before_ms": "6000"}}, ReasonInvalidRequest, "params.before_ms"},
		{"too long", Invocation{Principal: agent, Capability: "audio.clip", Target: "audio.mic", Params: map[string]string{"before_ms": "5000", "after_ms": "26000"}}, ReasonInvalidRequest, "want 100 ms to 30s"},
		{"too short", Invocation{Principal: agent, Capability: "audio.clip", Target: "audio.mic", Params: map[string]string{"after_ms": "50"}}, ReasonInvalidRequest, "want 100 ms"},
		{"after longer than the timeout", Invocation{Principal: agent, Capability: "audio.clip", Target: "audio.mic", Params: map[string]string{"after_ms": "20000"}, Timeout: 10 * time.Second}, ReasonInvalidRequest, "does not fit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.r.Submit(ctx, tc.inv)
			if res.Status != Refused || res.Reason != tc.reason || !strings.Contains(res.Detail, tc.detail) || res.Evidence != "" {
				t.Errorf("got %s %s %q, want refused %s containing %q", res.Status, res.Reason, res.Detail, tc.reason, tc.detail)
			}
		})
	}
	if b.grabs != grabs {
		t.Errorf("refused requests grabbed %d frames", b.grabs-grabs)
	}
	if items, _ := b.ev.List(evidence.Filter{}); len(items) != 2 {
		t.Errorf("%d pieces kept, want the snapshot and the clip", len(items))
	}
}

// A snapshot of the latest motion's box, and one of a camera that saw
// none, or whose frame does not come.
func TestSnapshotOfMotion(t *testing.T) {
	keep := &memKeeper{}
	lens := &Lens{Channel: "camera.front", Grab: func(context.Context) (*hal.Frame, error) { return frameYUYV(640, 480), nil }}
	a := NewCameraSnapshot([]*Lens{lens}, keep, 0, 0)
	inv := &Invocation{Principal: Principal{Subject: "agent:pi"}, Target: "camera.front", Params: map[string]string{"crop": "motion"}}
	if _, err := a.Do(context.Background(), inv); err == nil || !strings.Contains(err.Error(), "reports no motion") {
		t.Errorf("a camera without motion: %v", err)
	}
	seen := false
	lens.Motion = func() ([4]float64, bool) { return [4]float64{0.75, 0.5, 1, 1}, seen }
	if _, err := a.Do(context.Background(), inv); err == nil || !strings.Contains(err.Error(), "no motion since it started") {
		t.Errorf("no motion yet: %v", err)
	}
	seen = true
	if _, err := a.Do(context.Background(), inv); err != nil || keep.m.Width != 160 || keep.m.Height != 240 {
		t.Fatalf("motion box: %v, kept %dx%d", err, keep.m.Width, keep.m.Height)
	}
	if v := a.Verify(context.Background(), inv); v.Result != "verified" {
		t.Errorf("verify: %+v", v)
	}
	lens.Grab = func(ctx context.Context) (*hal.Frame, error) { <-ctx.Done(); return nil, ctx.Err() }
	if _, err := a.Do(context.Background(), &Invocation{Target: "camera.front"}); err == nil || !strings.Contains(err.Error(), "no frame came") {
		t.Errorf("a camera that sends nothing: %v", err)
	}
	if v := a.Verify(context.Background(), &Invocation{}); v.Result != "failed" {
		t.Errorf("verify of nothing kept: %+v", v)
	}
}

// memKeeper keeps the last piece in memory.
type memKeeper struct {
	m  evidence.Media
	id string
}

func (k *memKeeper) Keep(_ context.Context, m evidence.Media) (evidence.Item, error) {
	k.m, k.id = m, ledger.NewID().String()
	return evidence.Item{Captured: evidence.Captured{ID: k.id, Width: m.Width, Height: m.Height, Bytes: int64(len(m.Data))}}, nil
}

func (k *memKeeper) Delete(_ context.Context, id, by, why string) (evidence.Item, error) {
	if id != k.id {
		return evidence.Item{}, fmt.Errorf("%w: %s", evidence.ErrUnknown, id)
	}
	k.id = ""
	return evidence.Item{}, nil
}

func (k *memKeeper) ReadBack(id string) (evidence.Item, []byte, error) {
	if id != k.id {
		return evidence.Item{}, nil, fmt.Errorf("%w: %s", evidence.ErrUnknown, id)
	}
	return evidence.Item{Captured: evidence.Captured{ID: id, Width: k.m.Width, Height: k.m.Height}}, k.m.Data, nil
}

func TestEncodeWAVRoundTrip(t *testing.T) {
	for _, ch := range []int{1, 2} {
		f := hal.AudioFormat{Rate: 48 * physic.KiloHertz, Channels: ch, FrameSamples: 480}
		s := make([]int16, 480*ch)
		for i := range s {
			s[i] = int16(i*37 - 9000)
		}
		c, err := decodeWAV(evidence.EncodeWAV(f, s), math.MaxInt32)
		if err != nil || c.Rate != 48000 || c.Channels != ch || fmt.Sprint(c.Samples) != fmt.Sprint(s) {
			t.Errorf("%d channels: %d Hz x%d, %v", ch, c.Rate, c.Channels, err)
		}
	}
	if _, err := decodeWAV(evidence.EncodeWAV(hal.AudioFormat{Rate: 16 * physic.KiloHertz, Channels: 1}, nil), 10); !errors.Is(err, ErrNotWAV) && err != nil {
		t.Errorf("an empty WAV: %v", err)
	}
}
