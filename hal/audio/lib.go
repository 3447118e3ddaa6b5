package audio

import "sync"

// library is PortAudio's process-wide state, counted: the first device
// opened initialises it and the last one closed terminates it. PortAudio's
// calls that touch that state (initialise, terminate, list devices, open
// and close a stream) are not safe concurrently, and neither is the Go
// binding's cache of the device list; they all run under mu. A stream's
// own calls (start, abort) do not touch it and run under the stream's
// lock instead, so halting one device never waits for another to open.
type library struct {
	mu         sync.Mutex
	refs       int
	initialize func() error
	terminate  func() error
}

// acquire takes a reference and runs fn with the library initialised and
// its lock held. If fn fails the reference is given back.
func (l *library) acquire(fn func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refs == 0 {
		if err := l.initialize(); err != nil {
			return err
		}
	}
	l.refs++
	if err := fn(); err != nil {
		l.releaseLocked()
		return err
	}
	return nil
}

// release runs fn (closing a stream) with the lock held, then gives back
// the reference fn's device held.
func (l *library) release(fn func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := fn()
	if terr := l.releaseLocked(); err == nil {
		err = terr
	}
	return err
}

func (l *library) releaseLocked() error {
	if l.refs == 0 {
		return nil
	}
	l.refs--
	if l.refs == 0 {
		return l.terminate()
	}
	return nil
}

// users is how many references are held.
func (l *library) users() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refs
}
