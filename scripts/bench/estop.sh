#!/bin/sh
# E-stop latency, from the line's edge to every output safe and read back:
#  - with fake pins, 1,000 trips (act's TestTripLatencyFakePins), without
#    and with the race detector; goal p99 <= 100 µs (the race run is for
#    reference); then 1,000 trips under E8's load on this machine (motion
#    workers, agents at 2,000 requests/s through the runner, ledger
#    commits), where fake pins are halted from the e-stop's goroutine;
#  - with ESTOP_LAB=1, in the lab VM on gpio-sim (make lab LAB_PKGS=act/,
#    the VM booted with 1 and then 2 CPUs, or LAB_SMP's): 200 trips idle,
#    then under E8's load (motion workers capped below GOMAXPROCS, and
#    uncapped; a ledger on disk with a 100k outbox backlog being drained;
#    agents offering 2,000 requests/s to a real runner), each next to a
#    bare blocking read(2) of another line (a plain thread) in the same run
#    and load; goal: the e-stop's p99 <= 1.5x the bare reader's. The
#    e-stop's outputs are halted by hal/gpio's tripwire thread (real-time
#    when the VM's root allows it); the path is printed.
#
#   scripts/bench/estop.sh
#   ESTOP_LAB=1 scripts/bench/estop.sh
set -eu
cd "$(dirname "$0")/../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT

for race in "" -race; do
	go test -count=1 $race -run '^TestTripLatencyFakePins$' -v ./act > "$out" || { cat "$out"; exit 1; }
	line=$(grep -o 'e-stop latency with fake pins.*' "$out")
	echo "fake pins${race:+ (-race)}: ${line#e-stop latency with fake pins, }"
done
echo "goal: p99 <= 100µs (without -race)"
ESTOP_LOAD=1 go test -count=1 -run '^TestTripLatencyFakePinsUnderLoad$' -v ./act > "$out" || { cat "$out"; exit 1; }
line=$(grep -o 'e-stop latency with fake pins under load.*' "$out")
echo "fake pins under E8's load on this machine (the goroutine path, no tripwire): ${line#e-stop latency with fake pins under load }"

if [ "${ESTOP_LAB:-}" = 1 ]; then
	for smp in ${LAB_SMP:-1 2}; do
		echo
		echo "lab VM with $smp CPU(s):"
		LAB_SMP=$smp make lab LAB_PKGS=act/ > "$out" 2>&1 || { cat "$out"; exit 1; }
		grep -o 'estop path:.*' "$out"
		grep -o 'estop latency:.*' "$out"
		grep '^lab: [0-9]* passed' "$out"
	done
fi
