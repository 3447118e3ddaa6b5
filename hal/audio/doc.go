// Package audio captures and plays 16-bit PCM on Linux sound cards
// through PortAudio's ALSA host API (github.com/gordonklaus/portaudio):
// OpenCapture and OpenPlayback fit hal.Drivers.
//
// # Why a build tag
//
// PortAudio is a C library, so this driver needs cgo, libportaudio at run
// time and its development files at build time. It is compiled only with
// the build tag portaudio (on Linux); the Makefile adds the tag when
// pkg-config finds portaudio-2.0. Without it the package is pure Go, the
// binary still builds for every target with CGO_ENABLED=0, and
// OpenCapture and OpenPlayback return an error wrapping hal.ErrUnsupported
// that says the binary was built without PortAudio, which a board check
// reports as Skipped with that reason. Version says which it is. What
// needs no C (choosing a device by name, the frame ring and its overrun
// accounting, the playback queue and its halt latch, tones and levels) is
// in untagged files and tested in every build.
//
// # Devices
//
// AudioConfig.Device names a PCM the way ALSA does: "default" (or empty)
// for ALSA's default PCM; a card by its id (/proc/asound/cards), its name
// or its number, with an optional ",DEV" for its PCM device, as
// "Loopback" or "Loopback,1" (DEV is 0 when left out, as in ALSA's
// hw:CARD); or a name exactly as PortAudio lists it ("Loopback: PCM
// (hw:0,1)", "sysdefault", "pulse"). A card's PCM is opened as hw:C,D, so
// it must do the rate and channels itself; "default" converts. The errors
// wrap hal.ErrAbsent when there is no such device and list the devices
// there are. Only the ALSA host API is used: JACK and OSS devices, which
// PortAudio may list too, are not chosen.
//
// PortAudio keeps process-wide state and lists the devices once when it
// is initialised. The first device opened initialises it and the last one
// closed terminates it (counted, under one lock with every call that
// touches that state), so a card plugged in while another device is open
// is seen only once all are closed. PortAudio's ALSA host API probes every
// PCM ALSA's configuration names while it lists them, and ALSA and JACK
// print each failed probe on stderr; this package mutes those two
// libraries' message handlers. What goes wrong comes back as an error.
//
// # Capture: frames, timestamps and overruns
//
// PortAudio calls back from a thread of its own with exactly one frame
// (FrameSamples samples a channel; 20 ms at 16 kHz mono by default). The
// callback never waits for a reader: it stamps the frame, puts it in a
// ring of 500 ms and returns. ReadFrame takes frames out in order.
//
// A frame's Time is the hal.Mono of its first sample. PortAudio's ALSA
// host API gives each buffer an ADC time, the ALSA status timestamp minus
// the delay, and alsa-lib stamps hw PCMs with CLOCK_MONOTONIC (it asks the
// kernel for that clock when it opens one; PortAudio's own PaUtil_GetTime
// was the wall clock until V19.7). Plugins may stamp with the wall clock
// instead. So at the first callback the capture checks which clock
// PortAudio's current time is on: when it is within a second of
// CLOCK_MONOTONIC and not of the wall clock, ADC times are used as they
// are; otherwise each frame is stamped hal.MonoNow at the callback minus
// the audio PortAudio says is buffered behind it (its current time minus
// its ADC time, both on its own clock, so their difference is good on any
// clock). A board whose wall clock still counts from boot has both
// clocks alike and gets the estimate, since its wall clock will jump.
//
// Seq counts the frames the device delivered, from 1. Overruns counts the
// losses since the frame before, of two kinds: the device overran (an ALSA
// xrun: PortAudio's thread was late, and PortAudio restarts the device
// and flags the host buffer after it, counted once though every frame cut
// from that buffer carries the flag), which shows as a jump in Time; or the
// readers fell a whole ring behind and the oldest frames were dropped to
// keep the newest, which shows as a gap in Seq and counts once however
// long the readers stay behind. Either way capture goes on.
//
// # Playback
//
// Play queues a clip and returns once its last sample was handed to the
// device (the device plays it within its latency, which Format's frame
// and the device's buffer set). Between clips the device plays silence,
// so a short tone starts without opening anything. Underflows counts the
// times the device ran dry mid-clip. Halt hands the device nothing more,
// aborts the stream, which drops what ALSA holds, so the sound stops now,
// and latches: Play returns hal.ErrHalted until Rearm restarts the stream.
//
// Both directions ask ALSA for a buffer of at least four frames and at
// least the device's "high latency" suggestion, so a busy board does not
// xrun at every hiccup. Close implies Halt and may be called more than
// once; every method returns hal.ErrClosed after it. A device whose
// stream thread ended (unplugged, a driver error) makes ReadFrame and Play
// return ErrStalled after two seconds without a callback.
package audio
