#!/bin/sh
# Runs the benchmarks under scripts/bench one after another and prints one
# table of every figure they printed (figure lines, lib.sh) against its
# goal, with the machine's cores and the load each bench ran under
# (scripts/bench/benchtable). Exits non-zero when a bench fails, times
# out, or prints no figure; never because a goal was not met: the
# machines are shared and noisy, and a figure is read, not judged, by a
# test.
#
#   scripts/bench/run.sh                    # make bench: the full forms, each bench's words shown as it runs
#   BENCH_SHORT=1 scripts/bench/run.sh      # make bench-smoke: each bench's short form, seconds not minutes
#   scripts/bench/run.sh gate ledger        # some of them
#   BENCH_OUT=/var/tmp/bench scripts/bench/run.sh   # keep the logs there
#
# A bench is stopped (with everything it started) after BENCH_TIMEOUT
# seconds: 600 in the short form, 5400 in the full one.
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
hostgo="env -u GOOS -u GOARCH -u GOARM -- go"

all="sound evidence gate ledger estop footprint agent attack ledger-open startup age world outbox flash soak motion go"
benches=${*:-$all}
for b in $benches; do
	[ -x "scripts/bench/$b.sh" ] || { echo "bench: no scripts/bench/$b.sh (there are: $all)" >&2; exit 2; }
done
if short; then
	title="make bench-smoke (the short forms: no figure here is a measurement)"
	limit=${BENCH_TIMEOUT:-600}
else
	title="make bench"
	limit=${BENCH_TIMEOUT:-5400}
fi
dir=${BENCH_OUT:-}
if [ -z "$dir" ]; then
	dir=$(mktemp -d)
	trap 'rm -rf "$dir"' EXIT
fi
mkdir -p "$dir"
: >"$dir/benches"
# The table is built before the benches run, so a broken one is found
# before an hour of benches, not after.
$hostgo build -o "$dir/benchtable" ./scripts/bench/benchtable

cat /proc/loadavg | cut -d' ' -f1-3 >"$dir/load"
for b in $benches; do
	echo "$b" >>"$dir/benches"
	load=$(cut -d' ' -f1 /proc/loadavg)
	start=$(date +%s)
	echo "== bench $b (load $load)"
	set +e
	if short; then
		timeout --kill-after=30 "$limit" "scripts/bench/$b.sh" >"$dir/$b.log" 2>&1
		echo $? >"$dir/$b.exit"
	else
		{
			timeout --kill-after=30 "$limit" "scripts/bench/$b.sh" 2>&1
			echo $? >"$dir/$b.exit"
		} | tee "$dir/$b.log"
	fi
	set -e
	status=$(cat "$dir/$b.exit")
	secs=$(($(date +%s) - start))
	echo "exit=$status seconds=$secs load=$load" >"$dir/$b.status"
	[ "$status" = 124 ] && echo "bench $b: stopped after ${limit}s (BENCH_TIMEOUT)" >>"$dir/$b.log"
	echo "== bench $b: exit status $status after ${secs}s, $(grep -c 'figure: ' "$dir/$b.log" || true) figures"
done
cat /proc/loadavg | cut -d' ' -f1-3 >>"$dir/load"
echo
"$dir/benchtable" -dir "$dir" -title "$title"
