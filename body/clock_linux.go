//go:build linux

package body

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/hal"
)

var systemClock = clockSource{
	mono:   hal.MonoNow,
	utc:    time.Now,
	sync:   kernelSync,
	bootID: kernelBootID,
	watch:  watchSettings,
}

// kernelSync reads the kernel's clock state without changing it.
func kernelSync() (ClockSync, error) {
	var tx unix.Timex // modes 0: read only, no privilege needed
	state, err := unix.Adjtimex(&tx)
	if err != nil {
		return ClockSync{}, os.NewSyscallError("adjtimex", err)
	}
	return ClockSync{
		Synced:   state != unix.TIME_ERROR && tx.Status&unix.STA_UNSYNC == 0,
		MaxError: time.Duration(tx.Maxerror) * time.Microsecond,
		EstError: time.Duration(tx.Esterror) * time.Microsecond,
	}, nil
}

func kernelBootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if len(id) != 36 {
		return "", fmt.Errorf("boot id %q is not a UUID", id)
	}
	return id, nil
}

// watchSettings sends on set every time the wall clock is set, until ctx
// is done: a timerfd on CLOCK_REALTIME armed far ahead with
// TFD_TIMER_CANCEL_ON_SET, whose read fails with ECANCELED when the
// clock has been set since the last read. The kernel keeps the timer
// armed through a cancellation, so it is armed once, and again only
// should it ever expire; arming fails with ECANCELED too when the clock
// was set just before, which is a setting like any other (the timer is
// armed all the same). It returns an error only when the kernel cannot
// watch.
func watchSettings(ctx context.Context, set chan<- struct{}) error {
	fd, err := unix.TimerfdCreate(unix.CLOCK_REALTIME, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return os.NewSyscallError("timerfd_create", err)
	}
	f := os.NewFile(uintptr(fd), "timerfd")
	defer f.Close()
	signal := func() {
		select {
		case set <- struct{}{}:
		default: // one already waits: the clock is read once for both
		}
	}
	arm := func() error {
		// Far enough ahead never to expire in practice; should it, the
		// read returns a count and the clock is simply measured again.
		sec := time.Now().Add(10 * 365 * 24 * time.Hour).Unix()
		var spec unix.ItimerSpec
		spec.Value = unix.NsecToTimespec(sec * 1e9)
		if int64(spec.Value.Sec) != sec {
			spec.Value = unix.NsecToTimespec((1<<31 - 1) * 1e9) // a 32-bit time_t
		}
		err := unix.TimerfdSettime(fd, unix.TFD_TIMER_ABSTIME|unix.TFD_TIMER_CANCEL_ON_SET, &spec, nil)
		if errors.Is(err, unix.ECANCELED) {
			signal()
			return nil
		}
		return os.NewSyscallError("timerfd_settime", err)
	}
	if err := arm(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Now()) })
	defer stop()
	var buf [8]byte
	for {
		_, err := f.Read(buf[:])
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case errors.Is(err, unix.ECANCELED):
			signal()
		case err == nil:
			// The timer expired (ten years on, or the clock was set past
			// it): arm it again, and measure, as the clock may have been set.
			if err := arm(); err != nil {
				return err
			}
			signal()
		case errors.Is(err, os.ErrDeadlineExceeded):
			// Only ctx sets a deadline; loop to see it.
		default:
			return fmt.Errorf("timerfd read: %w", err)
		}
	}
}
