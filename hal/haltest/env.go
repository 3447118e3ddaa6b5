package haltest

import (
	"fmt"
	"sync"

	"github.com/tobe-body/tobe-body/hal"
)

// Env is a fake environment sensor: Sense returns what the test Set
// last, or the error it Fail-ed it with.
type Env struct {
	name string
	has  hal.EnvQuantities

	mu     sync.Mutex
	env    hal.Env
	err    error
	reads  int
	halts  int
	closed bool
}

// NewEnv makes a sensor named name that measures has.
func NewEnv(name string, has hal.EnvQuantities) *Env { return &Env{name: name, has: has} }

func (e *Env) Name() string           { return e.name }
func (e *Env) Has() hal.EnvQuantities { return e.has }
func (e *Env) String() string         { return e.name }
func (e *Env) Set(v hal.Env)          { e.mu.Lock(); e.env, e.err = v, nil; e.mu.Unlock() }
func (e *Env) Fail(err error)         { e.mu.Lock(); e.err = err; e.mu.Unlock() }
func (e *Env) Reads() int             { e.mu.Lock(); defer e.mu.Unlock(); return e.reads }
func (e *Env) Halts() int             { e.mu.Lock(); defer e.mu.Unlock(); return e.halts }
func (e *Env) Halt() error            { e.mu.Lock(); e.halts++; e.mu.Unlock(); return nil }
func (e *Env) Close() error           { e.mu.Lock(); e.closed = true; e.mu.Unlock(); return nil }

// Sense returns the reading set, the error failed with, or hal.ErrClosed.
func (e *Env) Sense(out *hal.Env) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reads++
	switch {
	case e.closed:
		return fmt.Errorf("haltest: sensor %s: %w", e.name, hal.ErrClosed)
	case e.err != nil:
		return e.err
	}
	*out = e.env
	return nil
}
