//go:build portaudio

package audio

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>

static void tobe_alsa_quiet(const char *file, int line, const char *function, int err, const char *fmt, ...) {}
static void tobe_jack_quiet(const char *msg) {}

// tobe_quiet mutes the message handlers of ALSA and JACK, which PortAudio
// loads, when they are there: both print every failed probe on stderr.
// They are looked up rather than linked, so a PortAudio built without
// JACK needs nothing more.
static void tobe_quiet(void) {
	int (*alsa)(void *) = (int (*)(void *))dlsym(RTLD_DEFAULT, "snd_lib_error_set_handler");
	if (alsa) alsa((void *)tobe_alsa_quiet);
	void (*jack)(void (*)(const char *));
	jack = (void (*)(void (*)(const char *)))dlsym(RTLD_DEFAULT, "jack_set_error_function");
	if (jack) jack(tobe_jack_quiet);
	jack = (void (*)(void (*)(const char *)))dlsym(RTLD_DEFAULT, "jack_set_info_function");
	if (jack) jack(tobe_jack_quiet);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gordonklaus/portaudio"
	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

// Built says whether this binary drives sound devices (built with the
// portaudio tag, on Linux).
const Built = true

// Version is PortAudio's own version text and the host API used, as
// "PortAudio V19.6.0-devel, revision 396fe4b... over ALSA".
func Version() string { return portaudio.VersionText() + " over ALSA" }

var quiet sync.Once

// pa is PortAudio's process-wide state. It is a package variable because
// PortAudio's is: one per process, whoever opens it.
var pa = &library{
	initialize: func() error {
		quiet.Do(func() { C.tobe_quiet() })
		if err := portaudio.Initialize(); err != nil {
			return fmt.Errorf("PortAudio: initialise: %w", err)
		}
		return nil
	},
	terminate: func() error {
		if err := portaudio.Terminate(); err != nil {
			return fmt.Errorf("PortAudio: terminate: %w", err)
		}
		return nil
	},
}

// OpenCapture opens the device cfg names for capture and starts it.
// Zero fields of cfg take the defaults (16 kHz, mono, 20 ms frames).
func OpenCapture(cfg hal.AudioConfig) (hal.AudioCapture, error) {
	f, err := formatFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("audio: capture %q: %w", cfg.Device, err)
	}
	var c *Capture
	// open finds the device by cfg's name and opens a stream of it, now
	// and at every Resume.
	open := func() (stream, error) {
		var s *paStream
		err := pa.acquire(func() error {
			info, err := find(cfg.Device, true, f.Channels)
			if err != nil {
				return err
			}
			if c == nil {
				c = newCapture(info.Name, f)
			}
			p := streamParams(f)
			p.Input = portaudio.StreamDeviceParameters{Device: info, Channels: f.Channels, Latency: latencyFor(f, info.DefaultHighInputLatency)}
			st, err := portaudio.OpenStream(p, c.callback)
			if err != nil {
				return openError(info.Name, f, err)
			}
			s = &paStream{s: st}
			return nil
		})
		return s, err
	}
	s, err := open()
	if err != nil {
		return nil, fmt.Errorf("audio: capture %q: %w", cfg.Device, err)
	}
	c.reopen = open
	if err := c.run(s); err != nil {
		return nil, err
	}
	return c, nil
}

// OpenPlayback opens the device cfg names for playback and starts it
// playing silence. Zero fields of cfg take the defaults (16 kHz, mono,
// 20 ms buffers).
func OpenPlayback(cfg hal.AudioConfig) (hal.AudioPlayback, error) {
	f, err := formatFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("audio: playback %q: %w", cfg.Device, err)
	}
	var pb *Playback
	var s *paStream
	err = pa.acquire(func() error {
		info, err := find(cfg.Device, false, f.Channels)
		if err != nil {
			return err
		}
		pb = newPlayback(info.Name, f)
		p := streamParams(f)
		p.Output = portaudio.StreamDeviceParameters{Device: info, Channels: f.Channels, Latency: latencyFor(f, info.DefaultHighOutputLatency)}
		st, err := portaudio.OpenStream(p, pb.callback)
		if err != nil {
			return openError(info.Name, f, err)
		}
		s = &paStream{s: st}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("audio: playback %q: %w", cfg.Device, err)
	}
	if err := pb.run(s); err != nil {
		return nil, err
	}
	return pb, nil
}

func streamParams(f hal.AudioFormat) portaudio.StreamParameters {
	return portaudio.StreamParameters{
		SampleRate:      float64(f.Rate / physic.Hertz),
		FramesPerBuffer: f.FrameSamples,
		// Samples are int16 both sides; should the device want another
		// format, converting without dither keeps a loopback bit-exact.
		Flags: portaudio.DitherOff,
	}
}

// find chooses among the ALSA host API's devices. Call it with pa's lock
// held.
func find(name string, capture bool, channels int) (*portaudio.DeviceInfo, error) {
	host, err := portaudio.HostApi(portaudio.ALSA)
	if err != nil {
		return nil, fmt.Errorf("PortAudio has no ALSA host API: %w", err)
	}
	ids := cardIDs("/")
	devs := make([]device, len(host.Devices))
	var def *device
	want := host.DefaultOutputDevice
	if capture {
		want = host.DefaultInputDevice
	}
	for i, d := range host.Devices {
		devs[i] = newDevice(i, d.Name, d.MaxInputChannels, d.MaxOutputChannels, ids)
		if d == want {
			def = &devs[i]
		}
	}
	d, err := choose(name, devs, def, capture, channels)
	if err != nil {
		return nil, err
	}
	return host.Devices[d.index], nil
}

// openError says why PortAudio would not open the device, wrapping
// hal.ErrUnsupported for a format it cannot do and hal.ErrBusy when
// another program has it.
func openError(name string, f hal.AudioFormat, err error) error {
	var pe portaudio.Error
	if errors.As(err, &pe) {
		switch pe {
		case portaudio.InvalidSampleRate, portaudio.InvalidChannelCount, portaudio.SampleFormatNotSupported, portaudio.BadIODeviceCombination:
			return fmt.Errorf("%q cannot do %s: %v: %w", name, f, err, hal.ErrUnsupported)
		case portaudio.DeviceUnavailable:
			return fmt.Errorf("%q: %v (another program has it): %w", name, err, hal.ErrBusy)
		}
	}
	return fmt.Errorf("%q: open: %w", name, err)
}

// callback is PortAudio's capture callback, on PortAudio's thread.
func (c *Capture) callback(in []int16, t portaudio.StreamCallbackTimeInfo, flags portaudio.StreamCallbackFlags) {
	var fl callbackFlags
	if flags&portaudio.InputOverflow != 0 {
		fl |= inputOverflow
	}
	c.deliver(in, t.InputBufferAdcTime, t.CurrentTime, fl)
}

// callback is PortAudio's playback callback, on PortAudio's thread.
func (p *Playback) callback(out []int16, t portaudio.StreamCallbackTimeInfo, flags portaudio.StreamCallbackFlags) {
	var fl callbackFlags
	if flags&portaudio.OutputUnderflow != 0 {
		fl |= outputUnderflow
	}
	p.fill(out, t.CurrentTime, fl)
}

// paStream is a PortAudio stream holding one reference to the library.
type paStream struct {
	s *portaudio.Stream
}

func (s *paStream) start() error { return s.s.Start() }

func (s *paStream) abort() error {
	if err := s.s.Abort(); err != nil && !errors.Is(err, portaudio.StreamIsStopped) {
		return err
	}
	return nil
}

func (s *paStream) close() error { return pa.release(s.s.Close) }
