package act

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/jpeg"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/tobe-body/tobe-body/body/evidence"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
)

// Keeper is where a capture keeps what it took: the body's evidence
// store (*evidence.Store).
type Keeper interface {
	Keep(ctx context.Context, m evidence.Media) (evidence.Item, error)
	// ReadBack reads a kept piece whole, checked against its record.
	ReadBack(id string) (evidence.Item, []byte, error)
	Delete(ctx context.Context, id, by, why string) (evidence.Item, error)
}

// kept ends a capture that kept it: its request is given the evidence,
// unless it was cancelled meanwhile (the e-stop, its caller, its grant's
// revocation), when what was kept is deleted again, so a capture its
// grant no longer covers leaves nothing behind.
func kept(ctx context.Context, keep Keeper, inv *Invocation, it evidence.Item) error {
	if err := context.Cause(ctx); err != nil && ctx.Err() != nil {
		_, derr := keep.Delete(context.WithoutCancel(ctx), it.ID, "body", "its request was cancelled as it was kept: "+err.Error())
		if derr != nil && !errors.Is(derr, evidence.ErrUnknown) {
			return fmt.Errorf("cancelled, and what it kept (evidence %s) could not be deleted: %w", it.ID, derr)
		}
		return fmt.Errorf("cancelled as it was kept; evidence %s deleted", it.ID)
	}
	inv.SetEvidence(it.ID)
	return nil
}

// Lens is a camera as camera.snapshot sees it: the channel that reads it
// (the camera's one reader) hands it frames.
type Lens struct {
	// Channel is its registry id ("camera.front"): the target, and what
	// grants scope.
	Channel string
	// Privacy is the class of what the camera sees.
	Privacy ledger.Privacy
	// Grab copies the next frame the camera gives (its pixels, and its
	// own JPEG when it sent one).
	Grab func(ctx context.Context) (*hal.Frame, error)
	// Zones are its motion zones by name, each as its bounding box
	// ([x0, y0, x1, y1], normalised).
	Zones map[string][4]float64
	// Motion is the box of the latest motion it reported, and false when
	// it reported none; nil: none can be.
	Motion func() ([4]float64, bool)
}

// Ear is a microphone as audio.clip hears it.
type Ear struct {
	// Channel is its registry id ("audio.mic").
	Channel string
	Privacy ledger.Privacy
	// Ring is how much it keeps of what it heard before a request (0:
	// nothing; a clip then starts at the request).
	Ring time.Duration
	// Clip returns what it heard from before ago to after from now.
	Clip func(ctx context.Context, before, after time.Duration) (hal.AudioSpan, error)
}

// Limits of captures.
const (
	// DefaultSnapshotWidth bounds a snapshot's width in pixels unless the
	// config says otherwise; a wider frame is scaled down.
	DefaultSnapshotWidth = 1920
	// DefaultSnapshotBytes bounds a snapshot's JPEG: one over it is
	// encoded again at a lower quality, down to minQuality.
	DefaultSnapshotBytes = 2 << 20
	// MaxClip bounds an audio clip, before and after together.
	MaxClip = 30 * time.Second

	defaultQuality = 80
	minQuality     = evidence.MinQuality
	maxQuality     = 95
	minSnapWidth   = 16
	minClipMS      = 100
	// grabWait bounds the wait for a camera's next frame.
	grabWait = 3 * time.Second
)

// CameraSnapshot is camera.snapshot: a JPEG of a camera's next frame,
// kept as evidence.
type CameraSnapshot struct {
	lenses   map[string]*Lens
	keep     Keeper
	maxWidth int
	maxBytes int
}

// NewCameraSnapshot makes camera.snapshot over the lenses, keeping what
// it takes in keep, at most maxWidth pixels wide and maxBytes long (0:
// the defaults).
func NewCameraSnapshot(lenses []*Lens, keep Keeper, maxWidth, maxBytes int) *CameraSnapshot {
	a := &CameraSnapshot{lenses: map[string]*Lens{}, keep: keep, maxWidth: maxWidth, maxBytes: maxBytes}
	if a.maxWidth <= 0 {
		a.maxWidth = DefaultSnapshotWidth
	}
	if a.maxBytes <= 0 {
		a.maxBytes = DefaultSnapshotBytes
	}
	for _, l := range lenses {
		a.lenses[l.Channel] = l
	}
	return a
}

// Capability: a snapshot is R2. It moves nothing, but it keeps an image
// of whoever is in the room, which is an effect on people as a
// notification to them is; it cannot be taken back once looked at.
func (a *CameraSnapshot) Capability() Capability {
	return Capability{Name: "camera.snapshot", Risk: R2, Reversible: false, Verify: "the evidence read back: its hash, and a JPEG of the size recorded"}
}

// Params of camera.snapshot.
func (a *CameraSnapshot) Params() []Param {
	return []Param{
		{Name: "crop", Type: "string", Enum: []string{"frame", "zone", "motion"},
			Description: "frame (the default) keeps the whole frame; zone the bounding box of the motion zone named by zone; motion the box of the latest motion the camera reported"},
		{Name: "zone", Type: "string", Description: "the motion zone to crop to, with crop zone"},
		{Name: "width", Type: "integer", Min: bound(minSnapWidth), Max: bound(float64(a.maxWidth)), Description: "the widest the image may be, in pixels (it keeps its aspect)"},
		{Name: "quality", Type: "integer", Min: bound(minQuality), Max: bound(maxQuality), Description: "JPEG quality (80 when not given)"},
	}
}

// Targets of camera.snapshot: the cameras, by channel id.
func (a *CameraSnapshot) Targets() []string { return sortedKeys(a.lenses) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// snap is a checked camera.snapshot request.
type snap struct {
	lens    *Lens
	crop    string
	box     [4]float64 // with crop zone
	width   int
	quality int
}

func (a *CameraSnapshot) parse(target string, params map[string]string) (snap, error) {
	l, ok := a.lenses[target]
	if !ok {
		return snap{}, fmt.Errorf("no camera %q (cameras: %q)", target, a.Targets())
	}
	if err := checkParams(params, "crop", "zone", "width", "quality"); err != nil {
		return snap{}, err
	}
	s := snap{lens: l, crop: "frame", box: [4]float64{0, 0, 1, 1}, width: a.maxWidth, quality: defaultQuality}
	if v, ok := params["crop"]; ok {
		s.crop = v
	}
	switch s.crop {
	case "frame", "motion":
		if _, ok := params["zone"]; ok {
			return snap{}, fmt.Errorf("params.zone: only with crop zone")
		}
	case "zone":
		z := params["zone"]
		b, ok := l.Zones[z]
		if !ok {
			return snap{}, fmt.Errorf("params.zone %q: %s has no such motion zone (zones: %q)", z, target, sortedKeys(l.Zones))
		}
		s.box = b
	default:
		return snap{}, fmt.Errorf("params.crop %q: want frame, zone or motion", s.crop)
	}
	if v, ok := params["width"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < minSnapWidth || n > a.maxWidth {
			return snap{}, fmt.Errorf("params.width %q: want a whole number of pixels in %d..%d", v, minSnapWidth, a.maxWidth)
		}
		s.width = n
	}
	if v, ok := params["quality"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < minQuality || n > maxQuality {
			return snap{}, fmt.Errorf("params.quality %q: want a whole number in %d..%d", v, minQuality, maxQuality)
		}
		s.quality = n
	}
	return s, nil
}

func (a *CameraSnapshot) Channel(target string, params map[string]string) (string, error) {
	if _, err := a.parse(target, params); err != nil {
		return "", err
	}
	return target, nil
}

// Do takes the camera's next frame, encodes the region asked for (or
// passes an MJPEG camera's own JPEG on, when the whole frame at its size
// is asked for) and keeps it as evidence under the request's principal,
// note, action and grant.
func (a *CameraSnapshot) Do(ctx context.Context, inv *Invocation) (string, error) {
	s, err := a.parse(inv.Target, inv.Params)
	if err != nil {
		return "", err
	}
	if s.crop == "motion" {
		if s.lens.Motion == nil {
			return "", fmt.Errorf("%s reports no motion", inv.Target)
		}
		b, ok := s.lens.Motion()
		if !ok {
			return "", fmt.Errorf("%s has reported no motion since it started", inv.Target)
		}
		s.box = b
	}
	gctx, cancel := context.WithTimeout(ctx, grabWait)
	f, err := s.lens.Grab(gctx)
	cancel()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return "", fmt.Errorf("no frame came from %s within %v", inv.Target, grabWait)
		}
		return "", fmt.Errorf("%s: %w", inv.Target, err)
	}
	jpg, w, h, err := evidence.EncodeJPEG(f, s.box, s.width, s.quality, a.maxBytes)
	if err != nil {
		return "", fmt.Errorf("%s: %w", inv.Target, err)
	}
	it, err := a.keep.Keep(ctx, evidence.Media{Kind: evidence.Snapshot, Source: inv.Target, MediaType: "image/jpeg", Data: jpg, Width: w, Height: h,
		FrameSeq: f.Seq, By: inv.Principal.Subject, Why: inv.Note, Action: inv.ActionID, Grant: inv.Grant(), Privacy: s.lens.Privacy})
	if err != nil {
		return "", err
	}
	if err := kept(ctx, a.keep, inv, it); err != nil {
		return "", err
	}
	return fmt.Sprintf("evidence %s: a %dx%d JPEG of frame %d, %d bytes, sha256 %s", it.ID, w, h, f.Seq, it.Bytes, it.SHA256), nil
}

// Verify reads the snapshot back from the store: its bytes must be
// those recorded and a JPEG of the recorded size.
func (a *CameraSnapshot) Verify(_ context.Context, inv *Invocation) Verification {
	return verifyEvidence(a.keep, inv, func(it evidence.Item, b []byte) error {
		cfg, err := jpeg.DecodeConfig(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("not a JPEG: %w", err)
		}
		if cfg.Width != it.Width || cfg.Height != it.Height {
			return fmt.Errorf("a %dx%d JPEG, recorded %dx%d", cfg.Width, cfg.Height, it.Width, it.Height)
		}
		return nil
	})
}

// verifyEvidence reads inv's evidence back from keep and checks it.
func verifyEvidence(keep Keeper, inv *Invocation, check func(evidence.Item, []byte) error) Verification {
	if inv.evidence == "" {
		return Verification{Result: "failed", Evidence: "nothing was kept"}
	}
	it, b, err := keep.ReadBack(inv.evidence)
	if err == nil {
		err = check(it, b)
	}
	if err != nil {
		return Verification{Result: "failed", Evidence: fmt.Sprintf("evidence %s read back: %v", inv.evidence, err)}
	}
	return Verification{Result: "verified", Evidence: fmt.Sprintf("evidence %s read back: %d bytes of sha256 %s", it.ID, it.Bytes, it.SHA256)}
}

// AudioClip is audio.clip: a WAV of what a microphone heard, the seconds
// before the request (from its ring in memory) and after it, kept as
// evidence.
type AudioClip struct {
	ears map[string]*Ear
	keep Keeper
}

// NewAudioClip makes audio.clip over the ears, keeping what it takes in
// keep.
func NewAudioClip(ears []*Ear, keep Keeper) *AudioClip {
	a := &AudioClip{ears: map[string]*Ear{}, keep: keep}
	for _, e := range ears {
		a.ears[e.Channel] = e
	}
	return a
}

// Capability: a clip is R2, for the reasons a snapshot is: it keeps what
// whoever is in the room said.
func (a *AudioClip) Capability() Capability {
	return Capability{Name: "audio.clip", Risk: R2, Reversible: false, Verify: "the evidence read back: its hash, and a WAV of the length recorded"}
}

// Params of audio.clip.
func (a *AudioClip) Params() []Param {
	ring := time.Duration(0)
	for _, e := range a.ears {
		ring = max(ring, e.Ring)
	}
	return []Param{
		{Name: "before_ms", Type: "integer", Min: bound(0), Max: bound(float64(ring.Milliseconds())),
			Description: "how much of what the microphone heard before the request, in milliseconds (at most what it keeps in memory)"},
		{Name: "after_ms", Type: "integer", Min: bound(0), Max: bound(float64(MaxClip.Milliseconds())),
			Description: "how much after it, in milliseconds; before and after together last 100 ms to 30 s"},
	}
}

// Targets of audio.clip: the microphones, by channel id.
func (a *AudioClip) Targets() []string { return sortedKeys(a.ears) }

// clipReq is a checked audio.clip request.
type clipReq struct {
	ear           *Ear
	before, after time.Duration
}

func (a *AudioClip) parse(target string, params map[string]string) (clipReq, error) {
	e, ok := a.ears[target]
	if !ok {
		return clipReq{}, fmt.Errorf("no microphone %q (microphones: %q)", target, a.Targets())
	}
	if err := checkParams(params, "before_ms", "after_ms"); err != nil {
		return clipReq{}, err
	}
	ms := func(name string, most time.Duration) (time.Duration, error) {
		v, ok := params[name]
		if !ok {
			return 0, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || time.Duration(n)*time.Millisecond > most {
			return 0, fmt.Errorf("params.%s %q: want a whole number of milliseconds in 0..%d", name, v, most.Milliseconds())
		}
		return time.Duration(n) * time.Millisecond, nil
	}
	before, err := ms("before_ms", e.Ring)
	if err != nil {
		if e.Ring == 0 {
			err = fmt.Errorf("%w (%s keeps nothing of what it heard before a request)", err, target)
		}
		return clipReq{}, err
	}
	after, err := ms("after_ms", MaxClip)
	if err != nil {
		return clipReq{}, err
	}
	if total := before + after; total < minClipMS*time.Millisecond || total > MaxClip {
		return clipReq{}, fmt.Errorf("params.before_ms and params.after_ms: %v together; want %d ms to %v", total, minClipMS, MaxClip)
	}
	return clipReq{ear: e, before: before, after: after}, nil
}

func (a *AudioClip) Channel(target string, params map[string]string) (string, error) {
	if _, err := a.parse(target, params); err != nil {
		return "", err
	}
	return target, nil
}

// Duration: a clip keeps its action busy for what it hears after the
// request.
func (a *AudioClip) Duration(inv *Invocation) (time.Duration, string, error) {
	c, err := a.parse(inv.Target, inv.Params)
	if err != nil {
		return 0, "", err
	}
	return c.after, "params.after_ms " + inv.Params["after_ms"], nil
}

// Do listens for the clip and keeps it as a WAV.
func (a *AudioClip) Do(ctx context.Context, inv *Invocation) (string, error) {
	c, err := a.parse(inv.Target, inv.Params)
	if err != nil {
		return "", err
	}
	span, err := c.ear.Clip(ctx, c.before, c.after)
	if err != nil {
		return "", fmt.Errorf("%s: %w", inv.Target, err)
	}
	if len(span.Samples) == 0 {
		return "", fmt.Errorf("%s has heard nothing yet", inv.Target)
	}
	wav := evidence.EncodeWAV(span.Format, span.Samples)
	it, err := a.keep.Keep(ctx, evidence.Media{Kind: evidence.Clip, Source: inv.Target, MediaType: "audio/wav", Data: wav, Duration: span.Duration(),
		By: inv.Principal.Subject, Why: inv.Note, Action: inv.ActionID, Grant: inv.Grant(), Privacy: c.ear.Privacy})
	if err != nil {
		return "", err
	}
	if err := kept(ctx, a.keep, inv, it); err != nil {
		return "", err
	}
	lost := ""
	if span.Lost > 0 {
		lost = fmt.Sprintf(", %d frames lost in it", span.Lost)
	}
	return fmt.Sprintf("evidence %s: a WAV of %v (%v before the request), %d bytes, sha256 %s%s", it.ID, span.Duration(), c.before, it.Bytes, it.SHA256, lost), nil
}

// Verify reads the clip back from the store: its bytes must be those
// recorded and a WAV of the recorded length.
func (a *AudioClip) Verify(_ context.Context, inv *Invocation) Verification {
	return verifyEvidence(a.keep, inv, func(it evidence.Item, b []byte) error {
		c, err := decodeWAV(b, math.MaxInt32)
		if err != nil {
			return err
		}
		if got := time.Duration(int64(c.frames()) * int64(time.Second) / int64(c.Rate)); got.Milliseconds() != it.DurationMS {
			return fmt.Errorf("a WAV of %v, recorded %d ms", got, it.DurationMS)
		}
		return nil
	})
}
