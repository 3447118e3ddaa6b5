// Package act is the only path from the body to the world: the action
// runner with its policy engine and grants, leases with fencing, execution
// under a context the e-stop can cancel, independent verification, the
// action channels (GPIO outputs, tones, notifications) and the e-stop
// monitor that halts every output and latches.
//
// The runner and the e-stop arrive with their own issue. Until then the
// body drives no output above its safe level: the daemon requests each
// output at its safe level and halts them all on stop.
package act
