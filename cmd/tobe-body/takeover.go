package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/ledger"
)

// takeoverWatch drives the people's controls from the daemon's events: it
// follows the ledger for the presses the sense channels record
// (gpio.changed of a button, input.pressed / input.released of a key) and
// hands those of the controls the config marks as a person's to the
// Takeover. It reads no device itself: the line has one reader, its sense
// channel.
type takeoverWatch struct {
	tk       *act.Takeover
	log      *slog.Logger
	channels map[string]bool // the channels of the people's controls
	wg       sync.WaitGroup
}

// pressTypes are the events a person's control is pressed or let go by.
var pressTypes = []string{"gpio.changed", "input.pressed", "input.released"}

func newTakeoverWatch(tk *act.Takeover, log *slog.Logger) *takeoverWatch {
	w := &takeoverWatch{tk: tk, log: log, channels: map[string]bool{}}
	for _, c := range tk.Controls() {
		ch, _, _ := strings.Cut(c, " ")
		w.channels[ch] = true
	}
	return w
}

// start follows store from the event after seq (presses before the
// daemon started are not replayed) until ctx ends; wait waits for it.
func (w *takeoverWatch) start(ctx context.Context, store *ledger.Store, seq uint64) {
	if len(w.channels) == 0 {
		return
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		err := store.Follow(ctx, ledger.Filter{After: seq, Types: pressTypes}, func(e ledger.Stored) error {
			w.event(e.Event)
			return nil
		})
		if err != nil && !errors.Is(err, context.Canceled) {
			w.log.Error("the people's controls are no longer followed", "err", err)
		}
	}()
}

func (w *takeoverWatch) wait() { w.wg.Wait() }

// event hands one press or release to the takeover.
func (w *takeoverWatch) event(e ledger.Event) {
	if !w.channels[e.ChannelID] {
		return
	}
	var p map[string]any
	if err := ledger.UnmarshalPayload(e.Payload, &p); err != nil {
		w.log.Warn("a control's event cannot be read", "channel", e.ChannelID, "type", e.Type, "err", err)
		return
	}
	ctrl, pressed := e.ChannelID, false
	switch e.Type {
	case "gpio.changed":
		pressed, _ = p["active"].(bool)
	case "input.pressed", "input.released":
		key, _ := p["key"].(string)
		ctrl, pressed = keyControl(e.ChannelID, key), e.Type == "input.pressed"
	default:
		return
	}
	var err error
	if pressed {
		_, err = w.tk.Pressed(ctrl)
	} else {
		_, err = w.tk.LetGo(ctrl)
	}
	if err != nil {
		w.log.Error("a person's control", "control", ctrl, "err", err)
	}
}
