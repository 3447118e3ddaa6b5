package gpiosim

import "github.com/tobe-body/tobe-body/hal"

// Edges is a line requested from its chip as an input watched for both
// edges and read with a blocking read(2) of the kernel's events, as a
// plain C program would: no runtime poller, no deadline, no thread of the
// body's. Read from one goroutine (locked to its thread, to measure the
// least a Go program can do). A Read waits in the kernel until the line's
// next event, which nothing else ends: Close only once no Read is
// waiting, after one more edge has woken it.
type Edges struct {
	Name string
	fd   int
}

// Edge is one of the kernel's events for the line.
type Edge struct {
	Time hal.Mono // the kernel's timestamp (CLOCK_MONOTONIC)
	Edge hal.Edge // hal.RisingEdge or hal.FallingEdge
	Seq  uint32   // the line's sequence number of the event, from 1
}
