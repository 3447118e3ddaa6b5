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
#    and load; goal: the e-stop's p99 <= 1.2x the bare reader's idle,
#    1.5x under load. The e-stop's outputs are halted by hal/gpio's
#    tripwire thread (real-time when the VM's root allows it), one write
#    and one read for the chip's four; the path is printed.
#
#   scripts/bench/estop.sh
#   ESTOP_LAB=1 scripts/bench/estop.sh
#   BENCH_SHORT=1 scripts/bench/estop.sh   # 100 trips each (ESTOP_TRIPS), no lab
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
out=$(mktemp)
trap 'rm -f "$out"' EXIT
short && : "${ESTOP_TRIPS:=100}"
[ -n "${ESTOP_TRIPS:-}" ] && export ESTOP_TRIPS

# us DURATION...: Go's printed durations (950ns, 31.5µs, 1.2ms, 2s) in
# microseconds.
us() {
	echo "$@" | awk '{
		for (i = 1; i <= NF; i++) {
			d = $i; v = d + 0; u = d; sub(/^[0-9.]+/, "", u)
			f = u == "ns" ? 0.001 : u == "ms" ? 1000 : u == "s" ? 1e6 : 1
			printf "%s%.1f", (i > 1 ? " " : ""), v * f
		}
		print ""
	}'
}
# p99 LINE: the p99 in a line's first "p50 X p99 Y max Z", in µs.
p99() { us "$(echo "$1" | sed -n 's/.*p99 \([^ ]*\) max.*/\1/p')"; }

for race in "" -race; do
	go test -count=1 $race -run '^TestTripLatencyFakePins$' -v ./act > "$out" || { cat "$out"; exit 1; }
	line=$(grep -o 'e-stop latency with fake pins.*' "$out")
	echo "fake pins${race:+ (-race)}: ${line#e-stop latency with fake pins, }"
	if [ -z "$race" ]; then
		figure estop.fake_pins.p99 "$(p99 "$line")" µs - 'value<=100'
	else
		figure estop.fake_pins_race.p99 "$(p99 "$line")" µs
	fi
done
echo "goal: p99 <= 100µs (without -race)"
ESTOP_LOAD=1 go test -count=1 -run '^TestTripLatencyFakePinsUnderLoad$' -v ./act > "$out" || { cat "$out"; exit 1; }
line=$(grep -o 'e-stop latency with fake pins under load.*' "$out")
echo "fake pins under E8's load on this machine (the goroutine path, no tripwire): ${line#e-stop latency with fake pins under load }"
figure estop.fake_pins_load.p99 "$(p99 "$line")" µs

if [ "${ESTOP_LAB:-}" = 1 ]; then
	for smp in ${LAB_SMP:-1 2}; do
		echo
		echo "lab VM with $smp CPU(s):"
		LAB_SMP=$smp make lab LAB_PKGS=act/ > "$out" 2>&1 || { cat "$out"; exit 1; }
		grep -o 'estop path:.*' "$out"
		grep -o 'estop latency:.*' "$out"
		grep '^lab: [0-9]* passed' "$out"
		# Each run's e-stop p99 against the bare reader's in the same run.
		grep -o 'estop latency:.*' "$out" | while read -r line; do
			run=$(echo "$line" | sed -n 's/^estop latency: \([a-z]*\).*/\1/p')
			trip=$(p99 "$(echo "$line" | sed -n 's/.*read back \(p50 [^;]*\);.*/\1/p')")
			bare=$(p99 "$(echo "$line" | sed -n 's/.*bare read(2) edge -> returned \(p50 [^;]*\);.*/\1/p')")
			goal='ratio<=1.5'
			[ "$run" = idle ] && goal='ratio<=1.2'
			[ -n "$run" ] && [ -n "$trip" ] && [ -n "$bare" ] &&
				figure "estop.lab.smp$smp.$run.p99" "$trip" µs "$bare" "$goal" bare-read
		done
	done
fi
