//go:build !labfaults

package main

import "github.com/tobe-body/tobe-body/ledger"

// labFaults is nothing in a release build: the faults the system lab
// injects are built only with the labfaults tag (faults_lab.go).
func (d *daemon) labFaults(*ledger.Store) <-chan struct{} { return nil }
