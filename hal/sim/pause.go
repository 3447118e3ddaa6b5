package sim

import (
	"context"
	"errors"
	"sync"

	"github.com/tobe-body/tobe-body/hal"
)

// pauser makes a sim stream a hal.Pauser: while paused its reads produce
// nothing (the first returns hal.ErrPaused) and wait for Resume, and
// after Resume the stream goes on from the scene's time then, as a
// device opened again would.
type pauser struct {
	mu      sync.Mutex
	paused  bool
	told    bool          // hal.ErrPaused was returned for this pause
	stop    chan struct{} // closed by Pause: a read waiting for its time gives up
	resumed chan struct{} // closed by Resume
}

// errPausedMidRead is a wait that a Pause cut short.
var errPausedMidRead = errors.New("sim: paused during a read")

func (p *pauser) init() {
	if p.stop == nil {
		p.stop = make(chan struct{})
	}
}

// Pause stops the stream; it returns at once (there is no device).
func (p *pauser) Pause() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	if !p.paused {
		p.paused, p.told, p.resumed = true, false, make(chan struct{})
		close(p.stop)
	}
	return nil
}

// Resume lets the stream go on.
func (p *pauser) Resume() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	if p.paused {
		p.paused, p.stop = false, make(chan struct{})
		close(p.resumed)
	}
	return nil
}

// gate is what a read asks first: hal.ErrPaused once a pause, and then
// a wait while paused (ctx's error, or hal.ErrHalted when halt closes).
// It returns the channel the next Pause closes, which the read's wait
// for its time watches; resumed says the stream was paused since the
// last read, so the read starts from now.
func (p *pauser) gate(ctx context.Context, halt <-chan struct{}) (stop <-chan struct{}, resumed bool, err error) {
	for {
		p.mu.Lock()
		p.init()
		paused, told, wait := p.paused, p.told, p.resumed
		switch {
		case paused && !told:
			p.told = true
			p.mu.Unlock()
			return nil, false, hal.ErrPaused
		case !paused:
			p.told = false
			stop = p.stop
			p.mu.Unlock()
			return stop, told, nil
		}
		p.mu.Unlock()
		select {
		case <-wait:
		case <-halt:
			return nil, false, hal.ErrHalted
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}
