package audio

import (
	"errors"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeLib counts what a library did, and fails when told.
type fakeLib struct {
	mu                  sync.Mutex
	inits, terms, calls int
	live                bool
	failInit            error
}

func (f *fakeLib) library() *library {
	return &library{
		initialize: func() error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.failInit != nil {
				return f.failInit
			}
			if f.live {
				panic("initialised twice")
			}
			f.inits++
			f.live = true
			return nil
		},
		terminate: func() error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if !f.live {
				panic("terminated while not initialised")
			}
			f.terms++
			f.live = false
			return nil
		},
	}
}

func TestLibraryCountsReferences(t *testing.T) {
	var f fakeLib
	l := f.library()
	use := func() error {
		if !f.live {
			t.Error("fn ran without the library initialised")
		}
		f.calls++ // under l.mu: the race detector checks that
		return nil
	}
	if err := l.acquire(use); err != nil {
		t.Fatal(err)
	}
	if err := l.acquire(use); err != nil {
		t.Fatal(err)
	}
	if f.inits != 1 || l.users() != 2 {
		t.Errorf("two devices open: %d initialisations, %d users; want 1, 2", f.inits, l.users())
	}
	if err := l.release(func() error { return nil }); err != nil || f.terms != 0 {
		t.Errorf("one of two closed: %v, %d terminations; want none", err, f.terms)
	}
	if err := l.release(func() error { return nil }); err != nil || f.terms != 1 || l.users() != 0 {
		t.Errorf("both closed: %v, %d terminations, %d users; want 1, 0", err, f.terms, l.users())
	}
	// A failed open gives its reference back, terminating if it was the
	// only one; a failed close still gives it back.
	bad := errors.New("no such device")
	if err := l.acquire(func() error { return bad }); !errors.Is(err, bad) || f.inits != 2 || f.terms != 2 || l.users() != 0 {
		t.Errorf("failed open: %v, %d inits, %d terms, %d users; want 2, 2, 0", err, f.inits, f.terms, l.users())
	}
	l.acquire(use)
	if err := l.release(func() error { return bad }); !errors.Is(err, bad) || l.users() != 0 || f.terms != 3 {
		t.Errorf("failed close: %v, %d users, %d terms", err, l.users(), f.terms)
	}
	// A library that will not initialise takes no reference.
	f.failInit = errors.New("no ALSA")
	if err := l.acquire(use); err == nil || l.users() != 0 {
		t.Errorf("failed initialise: %v with %d users", err, l.users())
	}
}

func TestLibraryConcurrentOpenClose(t *testing.T) {
	var f fakeLib
	l := f.library()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if err := l.acquire(func() error { f.calls++; return nil }); err != nil {
					t.Error(err)
					return
				}
				l.release(func() error { f.calls++; return nil })
			}
		})
	}
	wg.Wait()
	if l.users() != 0 || f.live || f.inits != f.terms || f.calls != 800 {
		t.Errorf("after all closed: %d users, live %v, %d inits, %d terms, %d calls", l.users(), f.live, f.inits, f.terms, f.calls)
	}
}
