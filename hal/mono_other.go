//go:build !linux

package hal

// MonoNow returns a monotonic time. Off Linux it counts from process start,
// not from boot, and the body reports its clock domain as the process.
func MonoNow() Mono { return monoFallback() }
