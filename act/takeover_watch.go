package act

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/ledger"
)

// PressTypes are the events a person's control is pressed or let go by:
// gpio.changed of a button, input.pressed and input.released of a key.
var PressTypes = []string{"gpio.changed", "input.pressed", "input.released"}

// Press reads a press or a release of a control from a sense channel's
// event: the control (the channel, or the channel and the key for an
// input device) and whether it is pressed. ok is false for an event that
// is neither; err says why a press's payload cannot be read.
func Press(e ledger.Event) (control string, pressed, ok bool, err error) {
	switch e.Type {
	case "gpio.changed":
		var p body.LineChanged
		if err := ledger.UnmarshalPayload(e.Payload, &p); err != nil {
			return "", false, true, err
		}
		return e.ChannelID, p.Active, true, nil
	case "input.pressed", "input.released":
		var p body.KeyPress
		if err := ledger.UnmarshalPayload(e.Payload, &p); err != nil {
			return "", false, true, err
		}
		return KeyControl(e.ChannelID, p.Key), e.Type == "input.pressed", true, nil
	}
	return "", false, false, nil
}

// TakeoverWatch drives the people's controls from the ledger: it follows
// the presses the sense channels record and hands those of the controls
// the takeover knows to it. It reads no device itself: a line has one
// reader, its sense channel.
type TakeoverWatch struct {
	tk       *Takeover
	log      *slog.Logger
	channels map[string]bool // the channels of the people's controls
	wg       sync.WaitGroup
}

// NewTakeoverWatch watches for tk's controls.
func NewTakeoverWatch(tk *Takeover, log *slog.Logger) *TakeoverWatch {
	w := &TakeoverWatch{tk: tk, log: log, channels: map[string]bool{}}
	for _, c := range tk.Controls() {
		ch, _, _ := strings.Cut(c, " ")
		w.channels[ch] = true
	}
	return w
}

// Start follows store from the event after seq (presses before the body
// started are not replayed) until ctx ends, in a goroutine Wait waits
// for.
func (w *TakeoverWatch) Start(ctx context.Context, store *ledger.Store, seq uint64) {
	if len(w.channels) == 0 {
		return
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		err := store.Follow(ctx, ledger.Filter{After: seq, Types: PressTypes}, func(e ledger.Stored) error {
			w.Event(e.Event)
			return nil
		})
		if err != nil && !errors.Is(err, context.Canceled) {
			w.log.Error("the people's controls are no longer followed", "err", err)
		}
	}()
}

// Wait returns when the follower has ended.
func (w *TakeoverWatch) Wait() { w.wg.Wait() }

// Event hands one press or release to the takeover.
func (w *TakeoverWatch) Event(e ledger.Event) {
	if !w.channels[e.ChannelID] {
		return
	}
	ctrl, pressed, ok, err := Press(e)
	switch {
	case err != nil:
		w.log.Warn("a control's event cannot be read", "channel", e.ChannelID, "type", e.Type, "err", err)
		return
	case !ok:
		return
	}
	if pressed {
		_, err = w.tk.Pressed(ctrl)
	} else {
		_, err = w.tk.LetGo(ctrl)
	}
	if err != nil {
		w.log.Error("a person's control", "control", ctrl, "err", err)
	}
}
