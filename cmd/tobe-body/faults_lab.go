//go:build labfaults

package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/tobe-body/tobe-body/ledger"
)

// labFaults is the system lab's fault switch (make lab-system builds the
// body with the labfaults tag; a release build has none of it): SIGUSR1
// blocks the main loop for ever; SIGUSR2 leaves the ledger's writer stuck
// in a command that never decides, as a deadlock in a write would. Either
// way the watchdog stops its pings and systemd restarts the body.
func (d *daemon) labFaults(store *ledger.Store) <-chan struct{} {
	block := make(chan struct{})
	var once sync.Once
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	d.log.Warn("lab faults built in: SIGUSR1 blocks the main loop, SIGUSR2 the ledger's writer")
	d.spawn("lab faults", func(ctx context.Context) {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-sig:
				switch {
				case s == syscall.SIGUSR1:
					once.Do(func() { close(block) })
				case s == syscall.SIGUSR2 && store != nil:
					d.log.Warn("lab fault: the ledger's writer is stuck for ever")
					go store.Execute(context.Background(), neverDecides{})
				}
			}
		}
	})
	return block
}

// neverDecides is a ledger command that never returns from Decide.
type neverDecides struct{}

func (neverDecides) Decide(*ledger.View) ([]ledger.Event, error) { select {} }
