package sense

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/ledger"
)

func TestSelfChannelEmitsOnlyChanges(t *testing.T) {
	o := NewOutlet(Source{Channel: "body.self"}, 64)
	c := NewSelfChannel(o, &body.Sampler{Limits: body.DefaultLimits}, time.Second)
	synced := body.ClockSync{Synced: true, MaxError: 20 * time.Millisecond}
	st := func(temp float64, level body.Degradation, mod func(*body.SelfState)) body.SelfState {
		s := body.SelfState{Temps: map[string]float64{"cpu-thermal": temp}, Clock: synced,
			DiskTotal: 8 << 30, DiskFree: 4 << 30, Level: level, Throttle: &body.Throttle{Source: "rpi-firmware"}}
		if mod != nil {
			mod(&s)
		}
		return s
	}
	steps := []struct {
		name string
		st   body.SelfState
		want []string
	}{
		{"the first sample says the level", st(50, body.LevelNormal, nil), []string{"body.degradation level=normal"}},
		{"the same again: nothing", st(55, body.LevelNormal, nil), nil},
		{"hot", st(81, body.LevelDegraded, nil), []string{"body.hot active=true what=cpu-thermal value=81 limit=80", "body.degradation level=degraded from=normal"}},
		{"below the limit, inside the hysteresis: still hot", st(78.5, body.LevelNormal, nil), []string{"body.degradation level=normal from=degraded"}},
		{"cooled", st(76.9, body.LevelNormal, nil), []string{"body.hot active=false what=cpu-thermal value=76.9 limit=80"}},
		{"under-voltage and throttled", st(60, body.LevelDegraded, func(s *body.SelfState) { s.Throttle.UnderVoltage, s.Throttle.Throttled = true, true }),
			[]string{"body.throttled active=true what=under-voltage", "body.throttled active=true what=throttled (rpi-firmware)", "body.degradation level=degraded from=normal"}},
		{"disk low and clock lost", st(60, body.LevelDegraded, func(s *body.SelfState) {
			s.Throttle.UnderVoltage, s.Throttle.Throttled = true, true
			s.DiskFree = 100 << 20
			s.Clock = body.ClockSync{MaxError: 16 * time.Second}
		}), []string{"body.disk_low active=true what=data partition value=100 limit=256", "body.clock_unsynced active=true what=system clock value=16000"}},
		{"all recovered", st(60, body.LevelNormal, nil), []string{
			"body.throttled active=false what=under-voltage", "body.throttled active=false what=not throttled (rpi-firmware)",
			"body.disk_low active=false what=data partition value=4096 limit=256", "body.clock_unsynced active=false what=system clock value=20",
			"body.degradation level=normal from=degraded"}},
	}
	for _, step := range steps {
		c.observe(step.st)
		var got []string
		for len(o.q) > 0 {
			q := <-o.q
			ev := q.ev
			var p map[string]any
			if err := ledger.UnmarshalPayload(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			s := ev.Type
			for _, k := range []string{"active", "level", "from", "what", "value", "limit"} {
				if v, ok := p[k]; ok {
					s += fmt.Sprintf(" %s=%v", k, v)
				}
			}
			got = append(got, s)
		}
		if strings.Join(got, "\n") != strings.Join(step.want, "\n") {
			t.Errorf("%s:\n%s\nwant:\n%s", step.name, strings.Join(got, "\n"), strings.Join(step.want, "\n"))
		}
	}
	if last, ok := c.Last(); !ok || last.Level != body.LevelNormal {
		t.Errorf("Last %v %v", last.Level, ok)
	}
}
