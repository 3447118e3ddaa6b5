// Package sense turns hal streams into a few meaningful events: motion on
// a camera, sound level and voice activity on a microphone, activity on
// input devices, edges on GPIO lines and the body's own state. Each sense
// channel is registered with the body's registry and writes events to the
// ledger; no raw frame, sample or keystroke leaves it.
//
// The channels arrive with their own issue; until then `tobe-body run`
// prints the raw streams' statistics instead of events.
package sense
