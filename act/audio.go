package act

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

// Speaker is a speaker the body owns, as audio.tone and audio.play see
// it. Invocations name it by Channel, its registry id ("audio.speaker"),
// which is also what grants scope.
type Speaker struct {
	// Name is the profile's name ("speaker"); Channel its registry id
	// ("audio.speaker").
	Name, Channel string
	Out           hal.AudioPlayback
	// Mic hears the room for verification; nil when the board has no
	// microphone (then every result is unknown).
	Mic *Mic
	// MaxLevel bounds how loud a sound may be: a tone's level_dbfs, and a
	// clip's peak (a louder clip is turned down to it). dBFS of the peak,
	// below 0; zero means DefaultMaxLevel.
	MaxLevel float64
	// Clips is the directory audio.play takes clips from; "" refuses
	// every clip.
	Clips string
	// MaxClip bounds a clip's length; zero means DefaultMaxClip.
	MaxClip time.Duration
}

// Defaults and bounds of the audio channels.
const (
	DefaultMaxLevel = -6.0 // dBFS peak
	DefaultMaxClip  = 10 * time.Second
	DefaultToneDBFS = -20.0 // a tone's level when level_dbfs is not given (or the maximum, when lower)

	minToneHz   = 50
	maxToneHz   = 8000
	minToneMS   = 50
	maxToneMS   = 5000
	minToneDBFS = -60.0 // quieter than this no microphone tells from a room
	toneRamp    = 5 * time.Millisecond
)

// Mic is a microphone audio verification listens through.
type Mic struct {
	// Name is its registry id ("audio.mic"), for the evidence.
	Name string
	// Listen starts a stream of the frames captured from about now on;
	// the caller closes it. It may refuse (another sound is being
	// listened for); the verification is then unknown.
	Listen func() (Listening, error)
}

// Listening is one stream of frames from a Mic.
type Listening interface {
	Format() hal.AudioFormat
	// ReadFrame blocks for the next frame, as hal.AudioCapture's does.
	ReadFrame(ctx context.Context, f *hal.AudioFrame) error
	Close() error
}

// CaptureMic listens through a capture nothing else reads, one listener
// at a time. Closing what Listen returns leaves the capture open.
func CaptureMic(name string, c hal.AudioCapture) *Mic {
	var busy sync.Mutex
	return &Mic{Name: name, Listen: func() (Listening, error) {
		if !busy.TryLock() {
			return nil, fmt.Errorf("%s is listening for another sound", name)
		}
		return &captureListening{c: c, unlock: sync.OnceFunc(busy.Unlock)}, nil
	}}
}

type captureListening struct {
	c      hal.AudioCapture
	unlock func()
}

func (l *captureListening) Format() hal.AudioFormat { return l.c.Format() }
func (l *captureListening) ReadFrame(ctx context.Context, f *hal.AudioFrame) error {
	return l.c.ReadFrame(ctx, f)
}
func (l *captureListening) Close() error { l.unlock(); return nil }

// speakers is what audio.tone and audio.play share: the speakers by
// channel, one sound at a time on each, and what the microphone heard
// while each action played, until its verification takes it.
type speakers struct {
	outs map[string]*speaker

	mu    sync.Mutex
	heard map[string]*hearing // by action id
}

type speaker struct {
	*Speaker
	busy chan struct{} // one sound at a time: a second would blur the first's verification
}

func (g *speakers) get(target string) (*speaker, error) {
	s, ok := g.outs[target]
	if !ok {
		names := make([]string, 0, len(g.outs))
		for n := range g.outs {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("no speaker %q (speakers: %q)", target, names)
	}
	return s, nil
}

// AudioTone is audio.tone: a sine tone of a frequency, a length and a
// level on a speaker.
type AudioTone struct{ g *speakers }

// AudioPlay is audio.play: a short WAV clip from the speaker's clips
// directory.
type AudioPlay struct{ g *speakers }

// NewAudioActions makes audio.tone and audio.play over the speakers.
func NewAudioActions(outs []*Speaker) (*AudioTone, *AudioPlay) {
	g := &speakers{outs: map[string]*speaker{}, heard: map[string]*hearing{}}
	for _, s := range outs {
		g.outs[s.Channel] = &speaker{Speaker: s, busy: make(chan struct{}, 1)}
	}
	return &AudioTone{g}, &AudioPlay{g}
}

func (s *speaker) maxLevel() float64 {
	if s.MaxLevel == 0 {
		return DefaultMaxLevel
	}
	return s.MaxLevel
}

func (s *speaker) maxClip() time.Duration {
	if s.MaxClip <= 0 {
		return DefaultMaxClip
	}
	return s.MaxClip
}

func (s *speaker) rate() int { return int(s.Out.Format().Rate / physic.Hertz) }

// Capability: a tone is R1. It cannot be taken back once heard (not
// reversible), but it is bounded to 5 s and to the speaker's maximum
// level, carries nothing but a pitch, and the e-stop silences it.
func (a *AudioTone) Capability() Capability {
	return Capability{Name: "audio.tone", Risk: R1, Reversible: false, Verify: "microphone level in the tone's band against the room's just before", Shared: true}
}

// Capability: a clip is R2. It is as bounded as a tone, but it may carry
// words or an alarm meant for whoever is in the room: an external side
// effect on people, like a notification to a person, and it cannot be
// taken back.
func (a *AudioPlay) Capability() Capability {
	return Capability{Name: "audio.play", Risk: R2, Reversible: false, Verify: "microphone level against the room's just before", Shared: true}
}

// tone is a checked audio.tone request.
type tone struct {
	hz    int
	dur   time.Duration
	level float64 // dBFS peak
}

func checkParams(params map[string]string, known ...string) error {
	for k := range params {
		if !slices.Contains(known, k) {
			return fmt.Errorf("params.%s: unknown (this capability takes %s)", k, strings.Join(known, ", "))
		}
	}
	return nil
}

// parseTone reads freq_hz, ms and level_dbfs.
func parseTone(s *speaker, params map[string]string) (tone, error) {
	if err := checkParams(params, "freq_hz", "ms", "level_dbfs"); err != nil {
		return tone{}, err
	}
	hz, err := strconv.Atoi(params["freq_hz"])
	if err != nil || hz < minToneHz || hz > maxToneHz {
		return tone{}, fmt.Errorf("params.freq_hz %q: want a whole number of hertz in %d..%d", params["freq_hz"], minToneHz, maxToneHz)
	}
	// Well below the Nyquist frequency, so the tone is a tone.
	if r := s.rate(); float64(hz) > 0.45*float64(r) {
		return tone{}, fmt.Errorf("params.freq_hz %d: %s plays at %d Hz, so a tone must stay below %d Hz", hz, s.Name, r, int(0.45*float64(r)))
	}
	ms, err := strconv.Atoi(params["ms"])
	if err != nil || ms < minToneMS || ms > maxToneMS {
		return tone{}, fmt.Errorf("params.ms %q: want a whole number of milliseconds in %d..%d", params["ms"], minToneMS, maxToneMS)
	}
	t := tone{hz: hz, dur: time.Duration(ms) * time.Millisecond, level: min(DefaultToneDBFS, s.maxLevel())}
	if v, ok := params["level_dbfs"]; ok {
		l, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(l) || math.IsInf(l, 0) {
			return tone{}, fmt.Errorf("params.level_dbfs %q: want a number of dBFS", v)
		}
		t.level = l
	}
	if max := s.maxLevel(); t.level > max || t.level < minToneDBFS {
		return tone{}, fmt.Errorf("params.level_dbfs %g: want %g..%g dBFS (%s's maximum is %g)", t.level, minToneDBFS, max, s.Name, max)
	}
	return t, nil
}

// samples synthesises the tone for format f, with short raised-cosine
// ramps so it starts and ends without a click.
func (t tone) samples(f hal.AudioFormat) []int16 {
	rate := int(f.Rate / physic.Hertz)
	n := int(int64(t.dur) * int64(rate) / int64(time.Second))
	ramp := int(int64(toneRamp) * int64(rate) / int64(time.Second))
	amp := 32767 * math.Pow(10, t.level/20)
	out := make([]int16, n*f.Channels)
	for i := range n {
		g := 1.0
		if k := min(i, n-1-i); k < ramp {
			g = 0.5 - 0.5*math.Cos(math.Pi*float64(k)/float64(ramp))
		}
		v := int16(math.Round(amp * g * math.Sin(2*math.Pi*float64(t.hz)*float64(i)/float64(rate))))
		for c := range f.Channels {
			out[i*f.Channels+c] = v
		}
	}
	return out
}

func (a *AudioTone) Channel(target string, params map[string]string) (string, error) {
	s, err := a.g.get(target)
	if err != nil {
		return "", err
	}
	if _, err := parseTone(s, params); err != nil {
		return "", err
	}
	return s.Channel, nil
}

// Duration is how long the tone takes, with the listening around it: the
// runner refuses one that would not finish within the invocation's
// timeout.
func (a *AudioTone) Duration(inv *Invocation) (time.Duration, string, error) {
	s, err := a.g.get(inv.Target)
	if err != nil {
		return 0, "", err
	}
	t, err := parseTone(s, inv.Params)
	if err != nil {
		return 0, "", err
	}
	d, around := s.soundTime(t.dur)
	return d, fmt.Sprintf("params.ms %d%s", t.dur.Milliseconds(), around), nil
}

// Do plays the tone, listening to the room before and while it plays.
// Cancelled (the e-stop, a timeout, the session's end) it stops the tone
// at once: what was not handed to the device is dropped.
func (a *AudioTone) Do(ctx context.Context, inv *Invocation) (string, error) {
	s, err := a.g.get(inv.Target)
	if err != nil {
		return "", err
	}
	t, err := parseTone(s, inv.Params)
	if err != nil {
		return "", err
	}
	what := fmt.Sprintf("%d Hz for %v at %g dBFS", t.hz, t.dur, t.level)
	return a.g.sound(ctx, s, inv, t.samples(s.Out.Format()), what, bandLevel(float64(t.hz)), t.dur)
}

// Verify compares what the microphone heard in the tone's band while it
// played with the room's level in that band just before.
func (a *AudioTone) Verify(ctx context.Context, inv *Invocation) Verification {
	s, err := a.g.get(inv.Target)
	if err != nil {
		return Verification{Result: "unknown", Evidence: err.Error()}
	}
	t, err := parseTone(s, inv.Params)
	if err != nil {
		return Verification{Result: "unknown", Evidence: err.Error()}
	}
	return a.g.verify(s, inv, fmt.Sprintf("%d Hz", t.hz), toneMargin)
}

// Channel checks the request without touching the clips directory: the
// parameters, the clip's name, and that the speaker has clips at all. The
// clip itself is read by Prepare, only once the request is allowed.
func (a *AudioPlay) Channel(target string, params map[string]string) (string, error) {
	s, err := a.g.get(target)
	if err != nil {
		return "", err
	}
	if _, err := clipName(s, params); err != nil {
		return "", err
	}
	return s.Channel, nil
}

// Prepare reads the clip of an allowed request (see Preparer) and keeps
// it in inv for Duration and Do, so it is read once.
func (a *AudioPlay) Prepare(inv *Invocation) error {
	s, err := a.g.get(inv.Target)
	if err != nil {
		return err
	}
	c, err := loadClip(s, inv.Params)
	if err != nil {
		return err
	}
	inv.SetPrepared(c)
	return nil
}

// clip is inv's prepared clip, read now if it was not prepared.
func (a *AudioPlay) clip(s *speaker, inv *Invocation) (wavClip, error) {
	if c, ok := inv.Prepared().(wavClip); ok {
		return c, nil
	}
	return loadClip(s, inv.Params)
}

// Duration is how long the prepared clip takes, with the listening
// around it: the runner refuses one that would not finish within the
// invocation's timeout.
func (a *AudioPlay) Duration(inv *Invocation) (time.Duration, string, error) {
	s, err := a.g.get(inv.Target)
	if err != nil {
		return 0, "", err
	}
	c, err := a.clip(s, inv)
	if err != nil {
		return 0, "", err
	}
	plays := c.duration()
	d, around := s.soundTime(plays)
	return d, fmt.Sprintf("params.clip %q (it plays %v%s)", inv.Params["clip"], plays.Round(time.Millisecond), around), nil
}

// soundTime is how long a sound of dur takes to play on s: with a
// microphone, the room is listened to for baselineFor before it and
// playTail after. around says so, for a refusal to name.
func (s *speaker) soundTime(dur time.Duration) (d time.Duration, around string) {
	if s.Mic == nil {
		return dur, ""
	}
	return baselineFor + dur + playTail, fmt.Sprintf(", and %v listening to the room around it", baselineFor+playTail)
}

// Do plays the clip, listening to the room before and while it plays;
// cancelled, it stops at once.
func (a *AudioPlay) Do(ctx context.Context, inv *Invocation) (string, error) {
	s, err := a.g.get(inv.Target)
	if err != nil {
		return "", err
	}
	c, err := a.clip(s, inv)
	if err != nil {
		return "", err
	}
	samples, gain := fitClip(c, s.Out.Format(), s.maxLevel())
	dur := c.duration()
	what := fmt.Sprintf("clip %s (%v, %d Hz, %d channels)", inv.Params["clip"], dur.Round(time.Millisecond), c.Rate, c.Channels)
	if gain < 0 {
		what += fmt.Sprintf(", turned down %.1f dB to the maximum level", -gain)
	}
	return a.g.sound(ctx, s, inv, samples, what, rmsLevel, dur)
}

// Verify compares the microphone's level while the clip played with the
// room's just before.
func (a *AudioPlay) Verify(ctx context.Context, inv *Invocation) Verification {
	s, err := a.g.get(inv.Target)
	if err != nil {
		return Verification{Result: "unknown", Evidence: err.Error()}
	}
	return a.g.verify(s, inv, "the clip", clipMargin)
}

// loadClip checks params.clip and reads it from the clips directory: a
// relative name of a .wav file inside it, not leaving it by "..", an
// absolute path or a symbolic link, and no longer than the speaker's
// maximum.
func loadClip(s *speaker, params map[string]string) (wavClip, error) {
	name, err := clipName(s, params)
	if err != nil {
		return wavClip{}, err
	}
	b, err := readClip(s.Clips, name, s.maxClip())
	if err != nil {
		return wavClip{}, err
	}
	maxFrames := int(int64(s.maxClip()) * wavMaxRate / int64(time.Second))
	c, err := decodeWAV(b, maxFrames)
	if err != nil {
		return wavClip{}, fmt.Errorf("params.clip %q: %w", name, err)
	}
	if d := c.duration(); d > s.maxClip() {
		return wavClip{}, fmt.Errorf("params.clip %q: plays %v, longer than %s's maximum of %v", name, d.Round(time.Millisecond), s.Name, s.maxClip())
	}
	return c, nil
}

// clipName checks params and the clip's name, touching no file.
func clipName(s *speaker, params map[string]string) (string, error) {
	if err := checkParams(params, "clip"); err != nil {
		return "", err
	}
	name := params["clip"]
	if s.Clips == "" {
		return "", fmt.Errorf("%s has no clips directory: audio.play is off", s.Name)
	}
	return name, checkClipName(name)
}

// duration is how long c plays.
func (c wavClip) duration() time.Duration {
	return time.Duration(int64(c.frames()) * int64(time.Second) / int64(c.Rate))
}

// checkClipName refuses a name that is not a plain relative path to a
// .wav file.
func checkClipName(name string) error {
	switch {
	case name == "":
		return errors.New("params.clip is empty: name a .wav file in the clips directory")
	case filepath.IsAbs(name) || strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`):
		return fmt.Errorf("params.clip %q: an absolute path; name a file inside the clips directory", name)
	case slices.Contains(strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }), ".."):
		return fmt.Errorf("params.clip %q: \"..\" leaves the clips directory", name)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("params.clip %q: a NUL byte in the name", name)
	case !strings.EqualFold(filepath.Ext(name), ".wav"):
		return fmt.Errorf("params.clip %q: not a .wav file", name)
	}
	return nil
}

// readClip reads name inside dir through an os.Root, which refuses a
// symbolic link that leads outside dir, however deep. It opens without
// blocking (a FIFO or a device planted in the directory would block a
// plain open until someone writes to it) and reads only a regular file,
// by fstat of what it opened.
func readClip(dir, name string, maxDur time.Duration) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("the clips directory: %w", err)
	}
	defer root.Close()
	f, err := root.OpenFile(filepath.FromSlash(name), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("params.clip %q: no such clip in the clips directory", name)
		case escapes(dir, name):
			return nil, fmt.Errorf("params.clip %q: a symbolic link leading outside the clips directory", name)
		}
		return nil, fmt.Errorf("params.clip %q: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("params.clip %q: %w", name, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("params.clip %q: not a regular file (%s)", name, fileKind(st.Mode()))
	}
	// The longest clip at the highest rate, stereo, and room for other chunks.
	limit := int64(maxDur)*wavMaxRate/int64(time.Second)*4 + 64<<10
	if st.Size() > limit {
		return nil, fmt.Errorf("params.clip %q: %d bytes, more than a clip of %v can be", name, st.Size(), maxDur)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("params.clip %q: %w", name, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("params.clip %q: more than %d bytes", name, limit)
	}
	return b, nil
}

// fileKind names what a file that is not regular is.
func fileKind(m fs.FileMode) string {
	switch m.Type() {
	case fs.ModeDir:
		return "a directory"
	case fs.ModeNamedPipe:
		return "a FIFO"
	case fs.ModeSocket:
		return "a socket"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "a device"
	}
	return m.Type().String()
}

// escapes tells whether dir/name resolves outside dir (a symbolic link
// that leads out), for the error's sake; os.Root is what refuses it.
func escapes(dir, name string) bool {
	d, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	p, err := filepath.EvalSymlinks(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		// A dangling link: see where it points.
		l, lerr := os.Readlink(filepath.Join(dir, filepath.FromSlash(name)))
		if lerr != nil {
			return false
		}
		if !filepath.IsAbs(l) {
			l = filepath.Join(filepath.Dir(filepath.Join(d, filepath.FromSlash(name))), l)
		}
		p = filepath.Clean(l)
	}
	rel, err := filepath.Rel(d, p)
	return err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// fitClip converts c to the playback's format (mixed to mono and copied
// to each of the speaker's channels, the rate converted by linear
// interpolation) and turns it down
// so its peak is at most maxLevel dBFS. It returns the samples and the
// gain applied, in dB (0 or negative).
func fitClip(c wavClip, f hal.AudioFormat, maxLevel float64) ([]int16, float64) {
	n := c.frames()
	mono := make([]float64, n)
	peak := 0.0
	for i := range n {
		var v float64
		for ch := range c.Channels {
			v += float64(c.Samples[i*c.Channels+ch])
		}
		mono[i] = v / float64(c.Channels)
		peak = max(peak, math.Abs(mono[i]))
	}
	gain, gainDB := 1.0, 0.0
	if peak > 0 {
		if p := 20 * math.Log10(peak/32768); p > maxLevel {
			gainDB = maxLevel - p
			gain = math.Pow(10, gainDB/20)
		}
	}
	rate := int(f.Rate / physic.Hertz)
	m := int(int64(n) * int64(rate) / int64(c.Rate))
	out := make([]int16, m*f.Channels)
	for j := range m {
		x := float64(j) * float64(c.Rate) / float64(rate)
		i := int(x)
		v := mono[min(i, n-1)]
		if i+1 < n {
			v += (mono[i+1] - v) * (x - float64(i))
		}
		s := int16(max(-32768, min(32767, math.Round(v*gain))))
		for ch := range f.Channels {
			out[j*f.Channels+ch] = s
		}
	}
	return out, gainDB
}
