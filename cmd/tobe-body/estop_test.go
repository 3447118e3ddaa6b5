package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEStopThroughTheDaemon: status, trip and reset through the command,
// the records in the ledger, and the latch surviving a restart.
func TestEStopThroughTheDaemon(t *testing.T) {
	d := startDaemon(t, "")
	cfg := filepath.Join(filepath.Dir(d.data), "config.json")
	out, err := runCmd(t, "estop", "status", "--data", d.data)
	if err != nil || !strings.Contains(out, "e-stop    armed") || !strings.Contains(out, "main ok, second ok; verified true") {
		t.Fatalf("status: %v\n%s", err, out)
	}
	out, err = runCmd(t, "estop", "trip", "--data", d.data)
	if err != nil || !strings.Contains(out, "tripped: requested by admin:uid=") || !strings.Contains(out, "outputs safe: true") || !strings.Contains(out, "RELAY1     safe low  read back low") {
		t.Fatalf("trip: %v\n%s", err, out)
	}
	out, _ = runCmd(t, "estop", "status", "--data", d.data)
	if !strings.Contains(out, "LATCHED: requested by admin") {
		t.Errorf("after a trip:\n%s", out)
	}
	out, _ = runCmd(t, "status", "--data", d.data)
	if !strings.Contains(out, "estop") {
		t.Errorf("status does not show the e-stop:\n%s", out)
	}
	d.stop(t)

	// Restarted: it comes up latched, because it was.
	d = startDaemonIn(t, d.data, cfg)
	out, _ = runCmd(t, "estop", "status", "--data", d.data)
	if !strings.Contains(out, "LATCHED: latched at start: it was latched when the body stopped") {
		t.Errorf("after a restart:\n%s", out)
	}
	out, err = runCmd(t, "estop", "reset", "--data", d.data)
	if err != nil || !strings.Contains(out, "e-stop    armed") {
		t.Errorf("reset: %v\n%s", err, out)
	}
	d.stop(t)

	// And after a reset it comes up armed.
	d = startDaemonIn(t, d.data, cfg)
	out, _ = runCmd(t, "estop", "status", "--data", d.data)
	if !strings.Contains(out, "e-stop    armed") {
		t.Errorf("after a reset and a restart:\n%s", out)
	}
	d.stop(t)
	out, err = runCmd(t, "ledger", "events", "--data", d.data, "--type", "estop.")
	for _, want := range []string{"estop.checked", "estop.tripped", "estop.reset"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("ledger lacks %s: %v\n%s", want, err, out)
		}
	}
}

// TestDoThroughTheRunner: a local administrator acts through the runner;
// the e-stop refuses everything while latched.
func TestDoThroughTheRunner(t *testing.T) {
	d := startDaemon(t, "")
	defer d.stop(t)
	out, err := runCmd(t, "do", "--list", "--data", d.data)
	if err != nil || !strings.Contains(out, "gpio.pulse") || !strings.Contains(out, "gpio.set") || !strings.Contains(out, "body.notify") ||
		!strings.Contains(out, "audio.tone   R1") || !strings.Contains(out, "audio.play   R2") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	out, err = runCmd(t, "do", "body.notify", "home", "message=the parcel is at the door", "attention=high", "--data", d.data)
	if err != nil || !strings.Contains(out, " succeeded") || !strings.Contains(out, "verified: verified: body.notified read back as event") {
		t.Errorf("notify: %v\n%s", err, out)
	}
	out, err = runCmd(t, "do", "gpio.set", "gpio.led", "state=on", "--data", d.data)
	if err != nil || !strings.Contains(out, " succeeded") || !strings.Contains(out, "verified: verified: led read back high") {
		t.Errorf("led on: %v\n%s", err, out)
	}
	// relay1's feedback contact follows it on the sim board.
	out, err = runCmd(t, "do", "gpio.pulse", "gpio.relay1", "duration_ms=50", "--data", d.data)
	if err != nil || !strings.Contains(out, " succeeded") || !strings.Contains(out, "reads low") {
		t.Errorf("relay pulse: %v\n%s", err, out)
	}
	// The sim board's microphone hears its speaker, through the
	// microphone channel's tap. 5 kHz is above the sim scene's voices.
	out, err = runCmd(t, "do", "audio.tone", "audio.speaker", "freq_hz=5000", "ms=300", "--data", d.data)
	if err != nil || !strings.Contains(out, " succeeded") || !strings.Contains(out, "verified: verified: audio.mic heard 5000 Hz at") {
		t.Errorf("tone: %v\n%s", err, out)
	}
	out, err = runCmd(t, "do", "audio.play", "audio.speaker", "clip=../chime.wav", "--data", d.data)
	if err == nil || !strings.Contains(out, `refused (invalid_request): params.clip "../chime.wav": ".." leaves the clips directory`) {
		t.Errorf("a clip outside the directory: %v\n%s", err, out)
	}
	out, err = runCmd(t, "do", "gpio.set", "gpio.nope", "state=on", "--data", d.data)
	if err == nil || !strings.Contains(out, "refused (invalid_request): no output \"gpio.nope\"") {
		t.Errorf("unknown output: %v\n%s", err, out)
	}
	// Simulation mode: the same runner and records, a simulated twin.
	out, err = runCmd(t, "do", "gpio.set", "gpio.relay1", "state=on", "--mode", "simulation", "--data", d.data)
	if err != nil || !strings.Contains(out, " succeeded") || !strings.Contains(out, "relay1 read back high") {
		t.Errorf("relay on in simulation: %v\n%s", err, out)
	}
	// A cause: an event the body recorded, by its id.
	out, err = runCmd(t, "ledger", "events", "--data", d.data, "--type", "body.notified", "--json")
	m := regexp.MustCompile(`"event_id":\s*"([0-9a-f-]{36})"`).FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("the notification's event: %v\n%s", err, out)
	}
	out, err = runCmd(t, "do", "gpio.set", "gpio.led", "state=off", "--caused-by", m[1], "--data", d.data)
	if err != nil || !strings.Contains(out, " succeeded") {
		t.Errorf("caused by the notification: %v\n%s", err, out)
	}
	for _, tc := range []struct{ cause, want string }{
		{"the-door", `invalid_params: caused_by "the-door": not an event id (a UUID)`},
		{"0190a6f2-0000-7000-8000-000000000000", "not_found: caused_by 0190a6f2-0000-7000-8000-000000000000: the ledger holds no such event"},
	} {
		out, err = runCmd(t, "do", "gpio.set", "gpio.led", "state=on", "--caused-by", tc.cause, "--data", d.data)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("caused by %s: got %v\n%s\nwant %q", tc.cause, err, out, tc.want)
		}
	}
	runCmd(t, "estop", "trip", "--data", d.data)
	out, err = runCmd(t, "do", "gpio.set", "gpio.led", "state=on", "--data", d.data)
	if err == nil || !strings.Contains(out, "refused (estop_latched)") {
		t.Errorf("while latched: %v\n%s", err, out)
	}
	out, _ = runCmd(t, "ledger", "events", "--data", d.data, "--type", "action.")
	for _, want := range []string{"action.proposed", "action.running", "action.succeeded", "action.refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("the ledger lacks %s:\n%s", want, out)
		}
	}
}
