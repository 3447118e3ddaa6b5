package sense

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest/stepclock"
)

// The snapshot sweep ages a snapshot of this boot by the monotonic time in
// its name, whatever the wall clock does; one of another boot (or named
// before names carried the boot) by its modification time, and only while
// the wall clock is synchronised. Steps of RELIABILITY.md's T1, within a
// run and across a reboot.
func TestSweepSnapshotsOnASteppedClock(t *testing.T) {
	const ttl = time.Minute
	type file struct {
		name string
		keep bool
	}
	for _, step := range []time.Duration{-10 * time.Minute, 25 * time.Hour, 30 * 24 * time.Hour, 365 * 24 * time.Hour} {
		for _, tc := range []struct {
			name   string
			reboot bool
			synced bool
		}{
			{"within a boot, synchronised", false, true},
			{"within a boot, not synchronised", false, false},
			{"after a reboot, synchronised", true, true},
			{"after a reboot, not synchronised", true, false},
		} {
			t.Run(fmt.Sprintf("%v %s", step, tc.name), func(t *testing.T) {
				sc := stepclock.New()
				// Monotonic times count from boot: the oldest snapshot is
				// two minutes old.
				dir := t.TempDir()
				now := sc.Mono()
				if now < hal.Mono(3*time.Minute) {
					t.Skipf("this machine booted %v ago; the test needs monotonic times 3 minutes back", now)
				}
				mk := func(name string, mtime time.Time) {
					p := filepath.Join(dir, name)
					if err := os.WriteFile(p, []byte("jpeg"), 0o640); err != nil {
						t.Fatal(err)
					}
					if err := os.Chtimes(p, mtime, mtime); err != nil {
						t.Fatal(err)
					}
				}
				wall := sc.Now()
				tag := bootTag(sc.BootID())
				young := fmt.Sprintf("%d-1-%s-%d.jpg", wall.UnixNano(), tag, int64(now.Add(-10*time.Second)))
				old := fmt.Sprintf("%d-2-%s-%d.jpg", wall.UnixNano(), tag, int64(now.Add(-2*time.Minute)))
				legacyYoung := fmt.Sprintf("%d-3.jpg", wall.UnixNano())
				legacyOld := fmt.Sprintf("%d-4.jpg", wall.Add(-2*time.Minute).UnixNano())
				mk(young, wall.Add(-10*time.Second))
				mk(old, wall.Add(-2*time.Minute))
				mk(legacyYoung, wall.Add(-10*time.Second))
				mk(legacyOld, wall.Add(-2*time.Minute))
				sc.Step(step)
				if tc.reboot {
					sc.Reboot()
				}
				sc.SetSynced(tc.synced)
				if _, err := SweepSnapshots(dir, ttl, sc); err != nil {
					t.Fatal(err)
				}
				ents, _ := os.ReadDir(dir)
				var left []string
				for _, e := range ents {
					left = append(left, e.Name())
				}
				wallAge := func(age time.Duration) bool { return age+step < ttl } // what the stepped wall says: kept?
				want := []file{
					// This boot's: by the monotonic clock; after a reboot
					// they are another boot's, aged by the wall clock.
					{young, !tc.reboot || !tc.synced || wallAge(10*time.Second)},
					{old, tc.reboot && (!tc.synced || wallAge(2*time.Minute))},
					{legacyYoung, !tc.synced || wallAge(10*time.Second)},
					{legacyOld, !tc.synced || wallAge(2*time.Minute)},
				}
				for _, f := range want {
					if got := slices.Contains(left, f.name); got != f.keep {
						t.Errorf("%s: kept %v, want %v", f.name, got, f.keep)
					}
				}
			})
		}
	}
}
