//go:build linux

package body

import (
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
