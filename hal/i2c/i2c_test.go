//go:build linux

package i2c

import (
	"errors"
	"strings"
	"testing"

	"periph.io/x/conn/v3/i2c/i2creg"

	"github.com/tobe-body/tobe-body/hal"
)

func TestFind(t *testing.T) {
	refs := []*i2creg.Ref{{Name: "/dev/i2c-0", Aliases: []string{"I2C0"}, Number: 0}, {Name: "/dev/i2c-1", Aliases: []string{"I2C1"}, Number: 1}}
	for _, c := range []struct {
		name string
		want int // -1: none
	}{
		{"1", 1}, {"0", 0}, {"i2c-1", 1}, {"I2C1", 1}, {"/dev/i2c-1", 1}, {" 1 ", 1},
		{"2", -1}, {"I2C7", -1}, {"", -1}, {"one", -1},
	} {
		got := find(refs, c.name)
		switch {
		case c.want < 0 && got != nil:
			t.Errorf("find(%q) = bus %d, want none", c.name, got.Number)
		case c.want >= 0 && (got == nil || got.Number != c.want):
			t.Errorf("find(%q) = %v, want bus %d", c.name, got, c.want)
		}
	}
}

// TestOpenAbsent: a bus this machine does not have is hal.ErrAbsent, and
// the error names it and the buses there are.
func TestOpenAbsent(t *testing.T) {
	_, err := Open("I2C97")
	if !errors.Is(err, hal.ErrAbsent) || !strings.Contains(err.Error(), `"I2C97"`) || !strings.Contains(err.Error(), "not on this machine (buses here: ") {
		t.Fatalf("got %v, want ErrAbsent naming the bus and those here", err)
	}
}
