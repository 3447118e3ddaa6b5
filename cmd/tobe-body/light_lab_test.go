//go:build lab

package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal/i2c"
	"github.com/tobe-body/tobe-body/hal/i2c/bme280/bme280test"
	"github.com/tobe-body/tobe-body/hal/led/uleds"
)

// labDevices makes what the lab profile names besides gpio-sim's lines,
// for as long as the test runs: a BME280 programmed onto the kernel's
// i2c-stub at 0x76 (a typical chip's calibration, 25.08 °C and 100,653
// Pa by the datasheet's raw readings), and the LED tobe-lab::status
// (uleds; a GPIO LED's max_brightness of 1).
func labDevices(t *testing.T) *uleds.LED {
	t.Helper()
	led, err := uleds.Make("tobe-lab::status", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	bus, err := i2c.Open("SMBus stub driver")
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	if err := bme280test.Program(bus, 0x76, bme280test.IDBME280, bme280test.TypicalCalibration()); err != nil {
		t.Fatal(err)
	}
	if err := bme280test.SetRawOn(bus, 0x76, 519888, 415148, 30000); err != nil {
		t.Fatal(err)
	}
	return led
}

// TestLabBoardLightAndAir: on the lab board with a BME280 on the
// kernel's i2c-stub and an LED class device (uleds) named as the lab
// profile names them, `tobe-body board` lists both Loaded; the body
// takes the LED, blinks it through the runner (light.blink), and the
// e-stop switches it off mid-blink, the kernel's brightness going to 0,
// and cancels the blink.
func TestLabBoardLightAndAir(t *testing.T) {
	led := labDevices(t)
	cmd := exec.Command(os.Args[0], "board", "--board", "lab")
	cmd.Env = append(os.Environ(), "TOBE_BODY_TEST_MAIN=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tobe-body board: %v\n%s", err, out)
	}
	// The sensor and the status LED (this test makes no indicator LED:
	// that one is absent here).
	for _, want := range []string{"env-sensor", "led             status"} {
		loaded := false
		for l := range strings.Lines(string(out)) {
			loaded = loaded || strings.HasPrefix(l, want) && strings.Contains(l, " Loaded ")
		}
		if !loaded {
			t.Errorf("tobe-body board: no %s Loaded in\n%s", want, out)
		}
	}
	t.Logf("tobe-body board --board lab:\n%s", out)

	l := newLabLines(t)
	l.setPulls(t)
	data, cfg := labDir(t)
	b := startBody(t, data, cfg)
	b.ready(t)
	b.arm(t, l)
	done := make(chan string, 1)
	go func() {
		out, err := b.cli(t, "do", "light.blink", "light.status", "period_ms=400", "count=50")
		done <- fmt.Sprintf("%v\n%s", err, out)
	}()
	if err := led.WaitFor(1, 10*time.Second); err != nil {
		t.Fatalf("blinking: %v", err)
	}
	tripped := time.Now()
	l.pull(t, "ESTOP", true)
	if err := led.WaitFor(0, 2*time.Second); err != nil {
		t.Fatalf("after the trip: %v", err)
	}
	t.Logf("the LED went off %v after the e-stop's line opened", time.Since(tripped).Round(time.Millisecond))
	select {
	case res := <-done:
		if !strings.Contains(res, "cancelled") || !strings.Contains(res, "estop") {
			t.Errorf("the blink after the trip: %s", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the blink did not end after the trip")
	}
	// Off it stays: nothing blinks on after the trip.
	if err := led.WaitFor(1, time.Second); err == nil {
		t.Error("the LED came on again after the trip")
	}
}
