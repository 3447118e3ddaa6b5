//go:build !linux

package gpiosim

import (
	"fmt"
	"runtime"

	"github.com/tobe-body/tobe-body/hal"
)

// RequestEdges is Linux only.
func (l Line) RequestEdges(consumer string) (*Edges, error) {
	return nil, fmt.Errorf("gpiosim: line %s: the GPIO character device is Linux's, this is %s: %w", l.Name, runtime.GOOS, hal.ErrUnsupported)
}

// Read is Linux only.
func (e *Edges) Read() (Edge, error) { return Edge{}, hal.ErrUnsupported }

// Close is Linux only.
func (e *Edges) Close() error { return nil }
