//go:build lab && portaudio

package act

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/audio"
)

// The audio channels against snd-aloop in the lab VM, through PortAudio
// on both sides: what is played on the loopback card's PCM 0 is captured
// on its PCM 1, so the microphone hears exactly the speaker, over a
// room that is digital silence. A tone played through the real playback
// is verified through the real capture; a halted (muted) playback plays
// nothing and its verification fails; the e-stop cuts a running tone,
// and the capture goes quiet.
func TestLabAudioTone(t *testing.T) {
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
	ears := CaptureMic("audio.mic", mic)
	b := newAudioBench(t, &Speaker{Name: "speaker", Channel: "audio.speaker", Out: spk, Mic: ears, Clips: clipsDir(t)})

	t.Run("tone heard", func(t *testing.T) {
		res := b.do("audio.tone", map[string]string{"freq_hz": "440", "ms": "300"})
		if res.Verification != nil {
			t.Logf("%s: %s", res.Verification.Result, res.Verification.Evidence)
		}
		if res.Status != Succeeded || res.Verification == nil || res.Verification.Result != "verified" ||
			!strings.Contains(res.Verification.Evidence, "audio.mic heard 440 Hz at") {
			t.Fatalf("got %+v", res)
		}
	})
	t.Run("clip heard", func(t *testing.T) {
		res := b.do("audio.play", map[string]string{"clip": "chime.wav"})
		if res.Verification != nil {
			t.Logf("%s: %s", res.Verification.Result, res.Verification.Evidence)
		}
		if res.Status != Succeeded || res.Verification == nil || res.Verification.Result != "verified" {
			t.Fatalf("got %+v", res)
		}
	})
	t.Run("halted playback not heard", func(t *testing.T) {
		if err := spk.Halt(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := spk.Rearm(); err != nil {
				t.Fatal(err)
			}
		}()
		res := b.do("audio.tone", map[string]string{"freq_hz": "440", "ms": "300"})
		if res.Verification != nil {
			t.Logf("%s: %s", res.Verification.Result, res.Verification.Evidence)
		}
		if res.Status != Failed || res.Verification == nil || res.Verification.Result != "failed" ||
			!strings.Contains(res.Verification.Evidence, "audio.mic did not hear 440 Hz") {
			t.Fatalf("got %+v", res)
		}
	})
	t.Run("estop cuts a tone", func(t *testing.T) {
		start := time.Now()
		time.AfterFunc(time.Second, func() { b.e.Trip("lab", hal.MonoNow()) })
		res := b.do("audio.tone", map[string]string{"freq_hz": "440", "ms": "5000"})
		took := time.Since(start)
		t.Logf("a 5 s tone cut after 1 s: the action returned after %v: %s %s; %+v", took.Round(time.Millisecond), res.Status, res.Receipt, res.Verification)
		if res.Status != Cancelled || res.Reason != ReasonEStopLatched || took > 3*time.Second {
			t.Fatalf("got %+v after %v", res, took)
		}
		// What the capture hears from now on: no tone. Frames already in
		// the capture's ring from before the halt are skipped by time.
		l, err := ears.Listen()
		if err != nil {
			t.Fatal(err)
		}
		after := hal.MonoNow().Add(100 * time.Millisecond)
		f := hal.AudioFrame{Samples: make([]int16, l.Format().Len())}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		loudest, heard := quiet, 0
		for heard < 15 {
			if err := l.ReadFrame(ctx, &f); err != nil {
				l.Close()
				t.Fatal(err)
			}
			if f.Time < after {
				continue
			}
			heard++
			loudest = max(loudest, bandLevel(440)(f.Samples, l.Format()))
		}
		l.Close() // the microphone has one listener at a time
		t.Logf("after the trip the capture's loudest 440 Hz in %d frames: %.1f dBFS", heard, loudest)
		if loudest > heardFloor {
			t.Errorf("the tone goes on after the e-stop: %.1f dBFS at 440 Hz", loudest)
		}
		if err := spk.Play(context.Background(), make([]int16, 160)); err == nil {
			t.Error("the speaker plays while the e-stop is latched")
		}
		if err := b.e.Reset(Principal{Kind: LocalAdmin, Subject: "admin:uid=0"}); err != nil {
			t.Fatal(err)
		}
		res = b.do("audio.tone", map[string]string{"freq_hz": "440", "ms": "300"})
		if res.Status != Succeeded {
			t.Errorf("after the reset: %+v %+v", res, res.Verification)
		}
	})
}
