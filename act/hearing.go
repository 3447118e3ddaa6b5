package act

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

// How a sound is verified: the microphone listens to the room for
// baselineFor before the sound starts, then while it plays and for
// playTail after (the device plays what it was handed within its
// latency). Each frame gives a level (in the tone's band, or broadband
// for a clip), in dBFS RMS as the sound channel reports them: 0 dBFS is
// a full-scale square wave, a full-scale sine -3 dBFS. The room's level
// is the energy mean of the frames before; the sound was heard when, in
// need frames running while it played (two for a sound that spans three
// frames, so one click or one chance peak of noise is not enough), the
// quieter is margin dB above the room, and above heardFloor whatever the
// room.
const (
	baselineFor  = 200 * time.Millisecond
	baselineWait = time.Second // gives up waiting for the room's level
	playTail     = 250 * time.Millisecond
	toneMargin   = 10.0  // dB, in the tone's band
	clipMargin   = 6.0   // dB, broadband: a clip is heard over all the room's noise
	heardFloor   = -90.0 // dBFS
	quiet        = -120.0
)

// levelFunc measures one frame's level in dBFS.
type levelFunc func(samples []int16, f hal.AudioFormat) float64

// rmsLevel is a frame's level, its channels together.
func rmsLevel(samples []int16, _ hal.AudioFormat) float64 {
	if len(samples) == 0 {
		return quiet
	}
	var sum float64
	for _, v := range samples {
		x := float64(v) / 32768
		sum += x * x
	}
	return toDB(sum / float64(len(samples)))
}

// bandLevel measures a frame's level at hz: the Goertzel algorithm over
// the frame mixed to mono, Hann-windowed, so what is around hz (voices,
// hum) leaks little into it.
func bandLevel(hz float64) levelFunc {
	return func(samples []int16, f hal.AudioFormat) float64 {
		ch := max(f.Channels, 1)
		n := len(samples) / ch
		rate := float64(f.Rate / physic.Hertz)
		if n == 0 || rate <= 0 || hz >= rate/2 {
			return quiet
		}
		coeff := 2 * math.Cos(2*math.Pi*hz/rate)
		var s1, s2, wsum float64
		for i := range n {
			var x float64
			for c := range ch {
				x += float64(samples[i*ch+c])
			}
			w := 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(n))
			wsum += w
			s0 := w*x/float64(ch)/32768 + coeff*s1 - s2
			s2, s1 = s1, s0
		}
		power := s1*s1 + s2*s2 - coeff*s1*s2
		if !(power > 0) || wsum == 0 {
			return quiet
		}
		amp := 2 * math.Sqrt(power) / wsum // the sine's peak
		return toDB(amp * amp / 2)
	}
}

func toDB(ms float64) float64 {
	if !(ms > 0) {
		return quiet
	}
	return max(quiet, 10*math.Log10(ms))
}

// hearing is what the microphone heard around one sound.
type hearing struct {
	mic     string
	measure levelFunc
	need    int
	ready   chan struct{} // closed once the room's level is measured, or listening ended
	readyOK sync.Once
	cancel  context.CancelFunc
	done    chan struct{} // closed when the listener ended

	mu         sync.Mutex
	playing    bool
	base, play []float64
	baseAudio  time.Duration
	err        error
}

// listen starts listening through s's microphone; nil when it has none.
// dur is how long the sound lasts.
func listen(s *speaker, measure levelFunc, dur time.Duration) *hearing {
	if s.Mic == nil {
		return nil
	}
	h := &hearing{mic: s.Mic.Name, measure: measure, need: 1, ready: make(chan struct{}), done: make(chan struct{})}
	l, err := s.Mic.Listen()
	if err != nil {
		h.err = err
		close(h.ready)
		close(h.done)
		return h
	}
	f := l.Format()
	if fd := f.FrameDuration(); fd > 0 && dur >= 3*fd {
		h.need = 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go h.run(ctx, l, f)
	return h
}

func (h *hearing) run(ctx context.Context, l Listening, f hal.AudioFormat) {
	defer close(h.done)
	defer l.Close()
	defer h.readyOK.Do(func() { close(h.ready) })
	fr := hal.AudioFrame{Samples: make([]int16, f.Len())}
	for {
		if err := l.ReadFrame(ctx, &fr); err != nil {
			if ctx.Err() == nil {
				h.mu.Lock()
				h.err = err
				h.mu.Unlock()
			}
			return
		}
		v := h.measure(fr.Samples, f)
		h.mu.Lock()
		if h.playing {
			h.play = append(h.play, v)
		} else {
			h.base = append(h.base, v)
			h.baseAudio += f.FrameDuration()
			if h.baseAudio >= baselineFor {
				h.readyOK.Do(func() { close(h.ready) })
			}
		}
		h.mu.Unlock()
	}
}

// awaitRoom waits until the room's level is measured (or cannot be);
// it returns ctx's cause if ctx ends first.
func (h *hearing) awaitRoom(ctx context.Context) error {
	t := time.NewTimer(baselineWait)
	defer t.Stop()
	select {
	case <-h.ready:
	case <-t.C:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	h.mu.Lock()
	h.playing = true
	h.mu.Unlock()
	return nil
}

// stop ends listening and waits for the listener.
func (h *hearing) stop() {
	if h.cancel != nil {
		h.cancel()
	}
	<-h.done
}

// sound plays samples on s while its microphone listens, and keeps what
// it heard for the verification. what describes the sound for the
// receipt; dur is how long it lasts.
func (g *speakers) sound(ctx context.Context, s *speaker, inv *Invocation, samples []int16, what string, measure levelFunc, dur time.Duration) (string, error) {
	select {
	case s.busy <- struct{}{}:
	case <-ctx.Done():
		return "", fmt.Errorf("%s was busy with another sound: %w", s.Name, context.Cause(ctx))
	}
	defer func() { <-s.busy }()
	h := listen(s, measure, dur)
	if h != nil {
		defer func() {
			h.stop()
			g.mu.Lock()
			g.heard[inv.ActionID] = h
			g.mu.Unlock()
		}()
		if err := h.awaitRoom(ctx); err != nil {
			return "nothing played", err
		}
	}
	err := s.Out.Play(ctx, samples)
	if h != nil {
		// Listen on for what the device still plays, and, when Play failed
		// at once (a halted or broken speaker), long enough to tell that
		// nothing was heard.
		t := time.NewTimer(playTail)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	switch {
	case err == nil:
		return fmt.Sprintf("played %s on %s", what, s.Name), nil
	case errors.Is(err, hal.ErrHalted):
		return fmt.Sprintf("%s on %s, silenced by a halt: what had not played was dropped", what, s.Name),
			fmt.Errorf("%s is halted (the e-stop silenced it): %w", s.Name, err)
	case ctx.Err() != nil:
		return fmt.Sprintf("%s on %s, cut short", what, s.Name), err
	}
	return "", fmt.Errorf("%s: play: %w", s.Name, err)
}

// verify judges what the microphone heard while the action's sound
// played against the room's level just before.
func (g *speakers) verify(s *speaker, inv *Invocation, what string, margin float64) Verification {
	g.mu.Lock()
	h := g.heard[inv.ActionID]
	delete(g.heard, inv.ActionID)
	g.mu.Unlock()
	switch {
	case s.Mic == nil:
		return Verification{Result: "unknown", Evidence: fmt.Sprintf("%s has no microphone to hear it with", s.Name)}
	case h == nil:
		return Verification{Result: "unknown", Evidence: "nothing was listened for: the sound was never started"}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.base) == 0 || len(h.play) == 0 {
		why := "it gave no frames"
		if h.err != nil {
			why = "capture failed: " + h.err.Error()
		}
		return Verification{Result: "unknown", Evidence: fmt.Sprintf("%s heard %d frames before and %d while it played: %s", h.mic, len(h.base), len(h.play), why)}
	}
	var sum float64
	for _, v := range h.base {
		sum += math.Pow(10, v/10)
	}
	room := toDB(sum / float64(len(h.base)))
	heard := quiet
	for i := range h.play {
		// The quieter of need frames in a row: noise reaches a level in
		// one frame far more often than in two running.
		v := h.play[i]
		for _, w := range h.play[i+1 : min(len(h.play), i+h.need)] {
			v = min(v, w)
		}
		heard = max(heard, v)
	}
	needed := max(room+margin, heardFloor)
	if heard >= needed {
		return Verification{Result: "verified", Evidence: fmt.Sprintf("%s heard %s at %.1f dBFS; the room before: %.1f dBFS over %v; needed %.1f",
			h.mic, what, heard, room, h.baseAudio.Round(time.Millisecond), needed)}
	}
	if h.err != nil {
		return Verification{Result: "unknown", Evidence: fmt.Sprintf("%s heard %s at %.1f dBFS (the room before: %.1f, needed %.1f) before its capture failed: %v",
			h.mic, what, heard, room, needed, h.err)}
	}
	return Verification{Result: "failed", Evidence: fmt.Sprintf("%s did not hear %s: %.1f dBFS at most while it played, the room before %.1f dBFS over %v; needed %.1f",
		h.mic, what, heard, room, h.baseAudio.Round(time.Millisecond), needed)}
}
