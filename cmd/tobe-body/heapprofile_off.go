//go:build !heapprofile

package main

// heapProfile is nothing in a release build: the footprint bench's heap
// profiler is built only with the heapprofile tag (heapprofile_on.go).
func (d *daemon) heapProfile() {}
