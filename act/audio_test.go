package act

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest"
	"github.com/tobe-body/tobe-body/hal/sim"
	"github.com/tobe-body/tobe-body/ledger"
)

var mono16k = hal.AudioFormat{Rate: 16 * physic.KiloHertz, Channels: 1, FrameSamples: 320}

func TestAudioToneParams(t *testing.T) {
	s := &speaker{Speaker: &Speaker{Name: "speaker", Channel: "audio.speaker", Out: haltest.NewPlayback(mono16k), MaxLevel: -10}}
	slow := &speaker{Speaker: &Speaker{Name: "buzzer", Channel: "audio.buzzer", Out: haltest.NewPlayback(hal.AudioFormat{Rate: 8 * physic.KiloHertz, Channels: 1, FrameSamples: 160})}}
	for _, tc := range []struct {
		name   string
		s      *speaker
		params map[string]string
		want   tone
		err    string
	}{
		{"defaults", s, map[string]string{"freq_hz": "440", "ms": "300"}, tone{440, 300 * time.Millisecond, DefaultToneDBFS}, ""},
		{"level given", s, map[string]string{"freq_hz": "1000", "ms": "5000", "level_dbfs": "-12.5"}, tone{1000, 5 * time.Second, -12.5}, ""},
		{"at the maximum level", s, map[string]string{"freq_hz": "50", "ms": "50", "level_dbfs": "-10"}, tone{50, 50 * time.Millisecond, -10}, ""},
		{"a maximum below the default level", &speaker{Speaker: &Speaker{Name: "quiet", Out: haltest.NewPlayback(mono16k), MaxLevel: -30}}, map[string]string{"freq_hz": "440", "ms": "300"}, tone{440, 300 * time.Millisecond, -30}, ""},
		{"no frequency", s, map[string]string{"ms": "300"}, tone{}, `params.freq_hz "": want a whole number of hertz in 50..8000`},
		{"frequency too low", s, map[string]string{"freq_hz": "20", "ms": "300"}, tone{}, `params.freq_hz "20"`},
		{"frequency too high", s, map[string]string{"freq_hz": "9000", "ms": "300"}, tone{}, `params.freq_hz "9000"`},
		{"frequency not a number", s, map[string]string{"freq_hz": "440Hz", "ms": "300"}, tone{}, `params.freq_hz "440Hz"`},
		{"above what the speaker's rate plays", slow, map[string]string{"freq_hz": "4000", "ms": "300"}, tone{}, "buzzer plays at 8000 Hz, so a tone must stay below 3600 Hz"},
		{"no length", s, map[string]string{"freq_hz": "440"}, tone{}, `params.ms "": want a whole number of milliseconds in 50..5000`},
		{"too short", s, map[string]string{"freq_hz": "440", "ms": "10"}, tone{}, `params.ms "10"`},
		{"too long", s, map[string]string{"freq_hz": "440", "ms": "5001"}, tone{}, `params.ms "5001"`},
		{"louder than the maximum", s, map[string]string{"freq_hz": "440", "ms": "300", "level_dbfs": "-3"}, tone{}, "params.level_dbfs -3: want -60..-10 dBFS (speaker's maximum is -10)"},
		{"above full scale", slow, map[string]string{"freq_hz": "440", "ms": "300", "level_dbfs": "3"}, tone{}, "want -60..-6 dBFS"},
		{"too quiet to hear", s, map[string]string{"freq_hz": "440", "ms": "300", "level_dbfs": "-80"}, tone{}, "params.level_dbfs -80"},
		{"level not a number", s, map[string]string{"freq_hz": "440", "ms": "300", "level_dbfs": "NaN"}, tone{}, `params.level_dbfs "NaN": want a number of dBFS`},
		{"unknown parameter", s, map[string]string{"freq_hz": "440", "ms": "300", "volume": "11"}, tone{}, "params.volume: unknown (this capability takes freq_hz, ms, level_dbfs)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTone(tc.s, tc.params)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// The tone is what was asked: its frequency, level and length, starting
// and ending at zero.
func TestToneSamples(t *testing.T) {
	tn := tone{hz: 1000, dur: 100 * time.Millisecond, level: -6}
	st := hal.AudioFormat{Rate: 16 * physic.KiloHertz, Channels: 2, FrameSamples: 320}
	s := tn.samples(st)
	if len(s) != 2*1600 {
		t.Fatalf("%d samples, want %d", len(s), 2*1600)
	}
	if s[0] != 0 || math.Abs(float64(s[len(s)-1])) > 100 {
		t.Errorf("starts at %d, ends at %d: want no click", s[0], s[len(s)-1])
	}
	var peak int16
	for i := 0; i < len(s); i += 2 {
		if s[i] != s[i+1] {
			t.Fatalf("channels differ at %d", i)
		}
		peak = max(peak, s[i])
	}
	if want := 32767 * math.Pow(10, -6.0/20); math.Abs(float64(peak)-want) > 50 {
		t.Errorf("peak %d, want %.0f", peak, want)
	}
	frame := s[2*800 : 2*800+2*320]
	if got := bandLevel(1000)(frame, st); math.Abs(got-(-9.03)) > 0.5 {
		t.Errorf("band level at 1000 Hz %.2f dBFS, want -9.03 (a -6 dBFS peak sine)", got)
	}
	if got := bandLevel(3000)(frame, st); got > -60 {
		t.Errorf("band level at 3000 Hz %.2f dBFS: the window leaks", got)
	}
	if got := rmsLevel(frame, st); math.Abs(got-(-9.03)) > 0.5 {
		t.Errorf("rms %.2f dBFS, want -9.03", got)
	}
}

// clipsDir makes a clips directory with good and bad clips, and files
// and links around it.
func clipsDir(t *testing.T) string {
	t.Helper()
	top := t.TempDir()
	dir := filepath.Join(top, "clips")
	write := func(name string, b []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(old, name string) {
		t.Helper()
		if err := os.Symlink(old, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	good := wavFile(wavPCM, 1, 16000, 16, sine(5000, 16000, 0.5, 8000))
	write(filepath.Join(dir, "chime.wav"), good)
	write(filepath.Join(dir, "sub", "Bell.WAV"), good)
	write(filepath.Join(dir, "notes.txt"), []byte("not a clip"))
	write(filepath.Join(dir, "fake.wav"), []byte("ID3\x04 an mp3 named .wav"))
	write(filepath.Join(dir, "long.wav"), wavFile(wavPCM, 1, 8000, 16, make([]int16, 8000*3)))
	write(filepath.Join(top, "outside.wav"), good)
	if err := os.Mkdir(filepath.Join(dir, "folder.wav"), 0o755); err != nil {
		t.Fatal(err)
	}
	link("chime.wav", "inside-link.wav")
	link("../outside.wav", "escape.wav")
	link(filepath.Join(top, "outside.wav"), "absolute-link.wav")
	link("../nowhere.wav", "dangling-out.wav")
	if err := os.Mkdir(filepath.Join(dir, "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	link("../../outside.wav", "deep/escape.wav")
	return dir
}

// sine is n samples of a sine of hz at rate, of peak amp (of full scale).
func sine(hz, rate int, amp float64, n int) []int16 {
	out := make([]int16, n)
	for i := range out {
		out[i] = int16(math.Round(amp * 32767 * math.Sin(2*math.Pi*float64(hz)*float64(i)/float64(rate))))
	}
	return out
}

func TestAudioClipPaths(t *testing.T) {
	dir := clipsDir(t)
	s := &speaker{Speaker: &Speaker{Name: "speaker", Channel: "audio.speaker", Out: haltest.NewPlayback(mono16k), Clips: dir, MaxClip: 2 * time.Second}}
	for _, tc := range []struct {
		clip string
		err  string
	}{
		{"chime.wav", ""},
		{"sub/Bell.WAV", ""},
		{"./sub/Bell.WAV", ""},
		{"inside-link.wav", ""},
		{"", "params.clip is empty"},
		{"/etc/passwd.wav", `params.clip "/etc/passwd.wav": an absolute path`},
		{filepath.Join(dir, "chime.wav"), "an absolute path"},
		{"../outside.wav", `params.clip "../outside.wav": ".." leaves the clips directory`},
		{"sub/../../outside.wav", `".." leaves the clips directory`},
		{`sub\..\..\outside.wav`, `".." leaves the clips directory`},
		{"notes.txt", `params.clip "notes.txt": not a .wav file`},
		{"chime.mp3", "not a .wav file"},
		{"missing.wav", `params.clip "missing.wav": no such clip in the clips directory`},
		{"escape.wav", `params.clip "escape.wav": a symbolic link leading outside the clips directory`},
		{"absolute-link.wav", "a symbolic link leading outside the clips directory"},
		{"dangling-out.wav", "leading outside the clips directory"},
		{"deep/escape.wav", "leading outside the clips directory"},
		{"folder.wav", `params.clip "folder.wav": not a regular file`},
		{"fake.wav", `params.clip "fake.wav": not a 16-bit PCM WAV file: no RIFF WAVE header`},
		{"long.wav", `params.clip "long.wav": plays 3s, longer than speaker's maximum of 2s`},
		{"chime.wav\x00.wav", "NUL"},
	} {
		t.Run(tc.clip, func(t *testing.T) {
			c, err := loadClip(s, map[string]string{"clip": tc.clip})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil || c.frames() != 8000 {
				t.Fatalf("got %d frames, %v", c.frames(), err)
			}
		})
	}
	t.Run("unknown parameter", func(t *testing.T) {
		if _, err := loadClip(s, map[string]string{"clip": "chime.wav", "loop": "yes"}); err == nil || !strings.Contains(err.Error(), "params.loop: unknown") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("no clips directory", func(t *testing.T) {
		off := &speaker{Speaker: &Speaker{Name: "speaker", Out: haltest.NewPlayback(mono16k)}}
		if _, err := loadClip(off, map[string]string{"clip": "chime.wav"}); err == nil || !strings.Contains(err.Error(), "no clips directory") {
			t.Fatalf("got %v", err)
		}
	})
}

// A clip is converted to the speaker's rate and channels, and turned
// down to the maximum level.
func TestFitClip(t *testing.T) {
	c := wavClip{Rate: 8000, Channels: 2, Samples: make([]int16, 2*800)}
	for i := range 800 {
		v := int16(math.Round(32767 * math.Sin(2*math.Pi*500*float64(i)/8000)))
		c.Samples[2*i], c.Samples[2*i+1] = v, v
	}
	out, gain := fitClip(c, mono16k, -6)
	if len(out) != 1600 {
		t.Fatalf("%d samples, want 1600 (100 ms at 16 kHz)", len(out))
	}
	if math.Abs(gain-(-6)) > 0.1 {
		t.Errorf("gain %.2f dB, want -6", gain)
	}
	var peak int16
	for _, v := range out {
		peak = max(peak, v)
	}
	if want := 32767 * math.Pow(10, -6.0/20); math.Abs(float64(peak)-want) > 200 {
		t.Errorf("peak %d, want about %.0f", peak, want)
	}
	quietClip := wavClip{Rate: 16000, Channels: 1, Samples: []int16{100, -100}}
	if out, gain := fitClip(quietClip, hal.AudioFormat{Rate: 16 * physic.KiloHertz, Channels: 2, FrameSamples: 320}, -6); gain != 0 || len(out) != 4 || out[0] != 100 || out[1] != 100 {
		t.Errorf("a quiet clip on a stereo speaker: %v, gain %g", out, gain)
	}
}

// audioBench is a runner with an e-stop (whose trip silences the
// speaker), a real ledger and a grant for agent:pi on audio.*, and the
// audio channels over one speaker.
type audioBench struct {
	r     *Runner
	store *ledger.Store
	e     *EStop
	agent Principal
}

func newAudioBench(t *testing.T, spk *Speaker) *audioBench {
	t.Helper()
	chip := haltest.NewChip("c")
	chip.AddIn("ESTOP", hal.Low)
	main, err := chip.In("ESTOP", hal.InConfig{})
	if err != nil {
		t.Fatal(err)
	}
	b := &audioBench{agent: Principal{Kind: AgentSession, Subject: "agent:pi", Session: "s1", Trust: ledger.High}}
	if b.e, err = NewEStop(EStopConfig{Main: main, MainStop: hal.High, Speakers: []hal.AudioPlayback{spk.Out}}); err != nil {
		t.Fatal(err)
	}
	b.e.Check()
	b.store = openTestLedger(t, filepath.Join(t.TempDir(), "ledger.db"))
	reg := body.NewRegistry(time.Now)
	reg.Register(body.Channel{ID: spk.Channel, Kind: "audio-playback", State: body.Enabled})
	grants := []Grant{{ID: "g1", Subject: "agent:pi", Capability: "audio.*", Scope: "audio.*", By: "admin:uid=0", ByTrust: ledger.Max}}
	b.r = NewRunner(Environment{EStop: b.e, Registry: reg, Health: func() body.Degradation { return body.LevelNormal },
		Grants: func() []Grant { return grants }, Leases: NewLeaseTable(time.Minute)}, b.store)
	b.e.SetRunner(b.r, b.r.env.Leases)
	tone, play := NewAudioActions([]*Speaker{spk})
	for _, a := range []Action{tone, play} {
		if err := b.r.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func (b *audioBench) do(capability string, params map[string]string) Result {
	return b.r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: capability, Target: "audio.speaker", Params: params})
}

// simAudio opens the sim board's speaker and microphone, which hears it.
func simAudio(t *testing.T) (hal.AudioPlayback, *Mic) {
	t.Helper()
	d := sim.New(1).Drivers()
	out, err := d.OpenPlayback(hal.AudioConfig{Device: sim.SpeakerName})
	if err != nil {
		t.Fatal(err)
	}
	mic, err := d.OpenCapture(hal.AudioConfig{Device: sim.MicName})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close(); mic.Close() })
	return out, CaptureMic("audio.mic", mic)
}

// A tone the microphone hears well above the room is verified, with the
// levels as evidence. 5 kHz is above the sim scene's voices, so its room
// is only its noise.
func TestAudioToneVerified(t *testing.T) {
	out, mic := simAudio(t)
	b := newAudioBench(t, &Speaker{Name: "speaker", Channel: "audio.speaker", Out: out, Mic: mic})
	res := b.do("audio.tone", map[string]string{"freq_hz": "5000", "ms": "300"})
	if res.Status != Succeeded || res.Verification == nil || res.Verification.Result != "verified" {
		t.Fatalf("got %+v %+v", res, res.Verification)
	}
	t.Logf("%s: %s", res.Verification.Result, res.Verification.Evidence)
	if ev := res.Verification.Evidence; !strings.Contains(ev, "audio.mic heard 5000 Hz at") || !strings.Contains(ev, "the room before") {
		t.Errorf("evidence %q", ev)
	}
	if !strings.Contains(res.Receipt, "played 5000 Hz for 300ms at -20 dBFS on speaker") {
		t.Errorf("receipt %q", res.Receipt)
	}
}

// A speaker the microphone does not hear (unplugged, muted, broken):
// the tone was played, but its verification fails, and so does the
// action.
func TestAudioToneNotHeard(t *testing.T) {
	_, mic := simAudio(t)
	dead := haltest.NewPlayback(mono16k)
	b := newAudioBench(t, &Speaker{Name: "speaker", Channel: "audio.speaker", Out: dead, Mic: mic})
	res := b.do("audio.tone", map[string]string{"freq_hz": "5000", "ms": "200"})
	if res.Status != Failed || res.Verification == nil || res.Verification.Result != "failed" || !strings.HasPrefix(res.Detail, "verification failed: audio.mic did not hear 5000 Hz") {
		t.Fatalf("got %+v %+v", res, res.Verification)
	}
	t.Logf("%s: %s", res.Verification.Result, res.Verification.Evidence)
	if len(dead.Played()) != 1 {
		t.Errorf("played %d times, want 1", len(dead.Played()))
	}
}

// Without a microphone the tone plays, and its result is unknown.
func TestAudioToneNoMic(t *testing.T) {
	out := haltest.NewPlayback(mono16k)
	b := newAudioBench(t, &Speaker{Name: "speaker", Channel: "audio.speaker", Out: out})
	res := b.do("audio.tone", map[string]string{"freq_hz": "440", "ms": "100"})
	if res.Status != Unknown || res.Verification == nil || res.Verification.Result != "unknown" || !strings.Contains(res.Detail, "speaker has no microphone to hear it with") {
		t.Fatalf("got %+v %+v", res, res.Verification)
	}
	if len(out.Played()) != 1 || len(out.Played()[0]) != 1600 {
		t.Errorf("played %d buffers", len(out.Played()))
	}
}

// A microphone whose capture fails gives an unknown result, not a failed
// or a verified one.
func TestAudioToneCaptureFails(t *testing.T) {
	c := haltest.NewCapture(mono16k, 1)
	c.Halt()
	b := newAudioBench(t, &Speaker{Name: "speaker", Channel: "audio.speaker", Out: haltest.NewPlayback(mono16k), Mic: CaptureMic("audio.mic", c)})
	res := b.do("audio.tone", map[string]string{"freq_hz": "440", "ms": "100"})
	if res.Status != Unknown || res.Verification == nil || !strings.Contains(res.Verification.Evidence, "capture failed: hal: halted") {
		t.Fatalf("got %+v %+v", res, res.Verification)
	}
}

// The e-stop cuts a running tone: the speaker is halted, the action
// cancelled at once, and the speaker plays again after a reset.
func TestAudioToneCancelled(t *testing.T) {
	out, mic := simAudio(t)
	b := newAudioBench(t, &Speaker{Name: "speaker", Channel: "audio.speaker", Out: out, Mic: mic})
	t.Run("estop", func(t *testing.T) {
		start := time.Now()
		time.AfterFunc(600*time.Millisecond, func() { b.e.Trip("test", hal.MonoNow()) })
		res := b.do("audio.tone", map[string]string{"freq_hz": "5000", "ms": "5000"})
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("a 5 s tone cut by the e-stop took %v", took)
		}
		if res.Status != Cancelled || res.Reason != ReasonEStopLatched {
			t.Fatalf("got %+v", res)
		}
		if err := out.Play(context.Background(), make([]int16, 16)); err == nil {
			t.Error("the speaker plays while the e-stop is latched")
		}
		if err := b.e.Reset(Principal{Kind: LocalAdmin, Subject: "admin:uid=0"}); err != nil {
			t.Fatal(err)
		}
		if err := out.Play(context.Background(), make([]int16, 16)); err != nil {
			t.Errorf("after the reset: %v", err)
		}
	})
	t.Run("session ended", func(t *testing.T) {
		start := time.Now()
		time.AfterFunc(600*time.Millisecond, func() { b.r.EndSession("s1") })
		res := b.do("audio.tone", map[string]string{"freq_hz": "5000", "ms": "5000"})
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("a 5 s tone cut by the session's end took %v", took)
		}
		if res.Status != Cancelled || res.Reason != "session_ended" {
			t.Fatalf("got %+v", res)
		}
	})
}

// A clip from the clips directory is played and heard; a bad one is
// refused before anything plays.
func TestAudioPlay(t *testing.T) {
	out, mic := simAudio(t)
	dir := clipsDir(t)
	b := newAudioBench(t, &Speaker{Name: "speaker", Channel: "audio.speaker", Out: out, Mic: mic, Clips: dir})
	res := b.do("audio.play", map[string]string{"clip": "chime.wav"})
	if res.Status != Succeeded || res.Verification == nil || res.Verification.Result != "verified" || !strings.Contains(res.Verification.Evidence, "heard the clip at") {
		t.Fatalf("got %+v %+v", res, res.Verification)
	}
	if !strings.Contains(res.Receipt, "played clip chime.wav (500ms, 16000 Hz, 1 channels) on speaker") {
		t.Errorf("receipt %q", res.Receipt)
	}
	res = b.do("audio.play", map[string]string{"clip": "../outside.wav"})
	if res.Status != Refused || res.Reason != ReasonInvalidRequest || !strings.Contains(res.Detail, `".." leaves the clips directory`) {
		t.Fatalf("got %+v", res)
	}
	if caps := b.r.Capabilities(); len(caps) != 2 || caps[0].Name != "audio.play" || caps[0].Risk != R2 || caps[1].Name != "audio.tone" || caps[1].Risk != R1 || caps[0].Reversible || caps[1].Reversible {
		t.Errorf("capabilities %+v", caps)
	}
}

// One listener at a time on a capture nothing else reads.
func TestCaptureMicOneListener(t *testing.T) {
	m := CaptureMic("audio.mic", haltest.NewCapture(mono16k, 1))
	l, err := m.Listen()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Listen(); err == nil || !strings.Contains(err.Error(), "audio.mic is listening for another sound") {
		t.Fatalf("second listener: %v", err)
	}
	l.Close()
	l.Close()
	l, err = m.Listen()
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

// A halted (muted) speaker plays nothing: the action fails, and so does
// its verification, since the microphone heard nothing while it should
// have played.
func TestAudioToneHalted(t *testing.T) {
	out, mic := simAudio(t)
	b := newAudioBench(t, &Speaker{Name: "speaker", Channel: "audio.speaker", Out: out, Mic: mic})
	out.Halt()
	res := b.do("audio.tone", map[string]string{"freq_hz": "5000", "ms": "300"})
	if res.Status != Failed || !strings.Contains(res.Detail, "speaker is halted") || res.Verification == nil || res.Verification.Result != "failed" {
		t.Fatalf("got %+v %+v", res, res.Verification)
	}
}

// A tone or a clip that cannot finish within the invocation's effective
// timeout is refused up front, naming it and the value, and nothing is
// recorded as running; with a microphone, the listening before and after
// the sound counts too. A clip longer than the speaker's MaxClip is the
// channel's to refuse.
func TestSoundsThatCannotFinishAreRefused(t *testing.T) {
	dir := clipsDir(t) // chime.wav plays 500ms, long.wav 3s
	for _, tc := range []struct {
		name       string
		capability string
		params     map[string]string
		mic        bool
		maxClip    time.Duration
		timeout    time.Duration
		detail     string // "" allowed
	}{
		{"a tone just inside a timeout", "audio.tone", map[string]string{"freq_hz": "440", "ms": "1999"}, false, 0, 2 * time.Second, ""},
		{"a tone as long as a timeout", "audio.tone", map[string]string{"freq_hz": "440", "ms": "2000"}, false, 0, 2 * time.Second,
			"params.ms 2000: lasts 2s, which does not fit in the action's timeout of 2s"},
		{"the longest tone in the default timeout", "audio.tone", map[string]string{"freq_hz": "440", "ms": "5000"}, true, 0, 0, ""},
		{"a tone with listening, just inside", "audio.tone", map[string]string{"freq_hz": "440", "ms": "1549"}, true, 0, 2 * time.Second, ""},
		{"a tone with listening, just outside", "audio.tone", map[string]string{"freq_hz": "440", "ms": "1550"}, true, 0, 2 * time.Second,
			"params.ms 1550, and 450ms listening to the room around it: lasts 2s, which does not fit in the action's timeout of 2s"},
		{"a clip just inside a timeout", "audio.play", map[string]string{"clip": "long.wav"}, false, 0, 3*time.Second + time.Millisecond, ""},
		{"a clip as long as a timeout", "audio.play", map[string]string{"clip": "long.wav"}, false, 0, 3 * time.Second,
			`params.clip "long.wav" (it plays 3s): lasts 3s, which does not fit in the action's timeout of 3s`},
		{"a clip with listening, just inside", "audio.play", map[string]string{"clip": "chime.wav"}, true, 0, 951 * time.Millisecond, ""},
		{"a clip with listening, just outside", "audio.play", map[string]string{"clip": "chime.wav"}, true, 0, 950 * time.Millisecond,
			`params.clip "chime.wav" (it plays 500ms, and 450ms listening to the room around it): lasts 950ms, which does not fit in the action's timeout of 950ms`},
		{"a clip at the speaker's maximum", "audio.play", map[string]string{"clip": "long.wav"}, false, 3 * time.Second, 0, ""},
		{"a clip over the speaker's maximum", "audio.play", map[string]string{"clip": "long.wav"}, false, 3*time.Second - time.Millisecond, 0,
			`params.clip "long.wav": plays 3s, longer than speaker's maximum of 2.999s`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spk := &Speaker{Name: "speaker", Channel: "audio.speaker", Out: haltest.NewPlayback(mono16k), Clips: dir, MaxClip: tc.maxClip}
			if tc.mic {
				// Never listened through: requests run in shadow, or are refused.
				spk.Mic = &Mic{Name: "audio.mic"}
			}
			b := newAudioBench(t, spk)
			res := b.r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: tc.capability, Target: "audio.speaker", Params: tc.params, Timeout: tc.timeout, Mode: Shadow})
			if tc.detail == "" {
				if res.Status != Succeeded {
					t.Errorf("got %s %s %q, want succeeded", res.Status, res.Reason, res.Detail)
				}
				return
			}
			if res.Status != Refused || res.Reason != ReasonInvalidRequest || res.Detail != tc.detail {
				t.Errorf("got %s %s %q, want refused invalid_request %q", res.Status, res.Reason, res.Detail, tc.detail)
			}
			if recs := actionTypes(t, b.store, res.ActionID); !slices.Equal(recs, []string{"action.proposed", "action.refused"}) {
				t.Errorf("recorded %v, want proposed then refused", recs)
			}
		})
	}
}

// The attack of a FIFO planted in the clips directory: a plain open of it
// blocks until someone writes, and sixteen requests for it once left
// sixteen threads blocked before the policy had even decided. Now a
// refused request never touches the clip, and an allowed one opens it
// without blocking and is refused because it is not a regular file.
func TestAudioPlayFIFOBlocksNothing(t *testing.T) {
	dir := clipsDir(t)
	if err := unix.Mkfifo(filepath.Join(dir, "pipe.wav"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, mic := simAudio(t)
	b := newAudioBench(t, &Speaker{Name: "speaker", Channel: "audio.speaker", Out: out, Mic: mic, Clips: dir})
	nobody := Principal{Kind: AgentSession, Subject: "agent:stranger", Session: "s2", Trust: ledger.High} // no grant
	const n = 16
	results := make(chan Result, 2*n)
	for i := range 2 * n {
		p := b.agent
		if i%2 == 0 {
			p = nobody
		}
		go func() {
			results <- b.r.Submit(context.Background(), Invocation{Principal: p, Capability: "audio.play", Target: "audio.speaker",
				Params: map[string]string{"clip": "pipe.wav"}, Mode: Shadow})
		}()
	}
	// A blocked open never returns: the guard is against hanging, not a
	// timing.
	guard := time.After(time.Minute)
	for range 2 * n {
		select {
		case res := <-results:
			switch res.Reason {
			case ReasonNoGrant:
			case ReasonInvalidRequest:
				if res.Status != Refused || res.Detail != `params.clip "pipe.wav": not a regular file (a FIFO)` {
					t.Errorf("allowed request: got %s %q", res.Status, res.Detail)
				}
			default:
				t.Errorf("got %s %s %q, want refused no_grant or invalid_request", res.Status, res.Reason, res.Detail)
			}
		case <-guard:
			t.Fatal("requests for a FIFO clip are still blocked after a minute")
		}
	}
}

// A clip is read once the request is allowed, and only then: a refused
// request leaves a clip that would fail to load unread, so it is refused
// for its policy reason, not for the file.
func TestAudioPlayReadsTheClipOnlyWhenAllowed(t *testing.T) {
	dir := clipsDir(t)
	out, mic := simAudio(t)
	b := newAudioBench(t, &Speaker{Name: "speaker", Channel: "audio.speaker", Out: out, Mic: mic, Clips: dir})
	nobody := Principal{Kind: AgentSession, Subject: "agent:stranger", Session: "s2", Trust: ledger.High}
	res := b.r.Submit(context.Background(), Invocation{Principal: nobody, Capability: "audio.play", Target: "audio.speaker", Params: map[string]string{"clip": "missing.wav"}})
	if res.Status != Refused || res.Reason != ReasonNoGrant {
		t.Fatalf("refused request: got %s %s %q, want refused no_grant", res.Status, res.Reason, res.Detail)
	}
	res = b.do("audio.play", map[string]string{"clip": "missing.wav"})
	if res.Status != Refused || res.Reason != ReasonInvalidRequest || res.Detail != `params.clip "missing.wav": no such clip in the clips directory` {
		t.Fatalf("allowed request: got %s %s %q", res.Status, res.Reason, res.Detail)
	}
	if recs := actionTypes(t, b.store, res.ActionID); !slices.Equal(recs, []string{"action.proposed", "action.refused"}) {
		t.Errorf("recorded %v, want proposed then refused", recs)
	}
}
