#!/bin/sh
# Startup against the body's age (RELIABILITY.md A1), side by side in one
# run on the same disk: a ledger with a year of history (1,000,000 events:
# 250,000 finished actions of two records each, 1,000 grants (most for a
# day, recorded expired; a tenth revoked; ten in force), 100 e-stop
# trips with their resets, people's holds, the rest sense events; and a
# year of what feeds the world model's rooms and air, whose sensed events
# retention deleted after their week and whose world records it kept;
# written by scripts/bench/startupbench with the daemon's ledger options
# and deriver) against an empty one:
#  - `tobe-body run --board sim`: the time from its start to READY=1 on a
#    NOTIFY_SOCKET the bench listens on, and its peak resident memory then
#    (VmHWM, which counts the ledger's pages it mapped as well as its
#    heap; the anonymous part, RssAnon at READY=1, is shown beside it);
#  - `tobe-body ledger events --limit 5` with the daemon stopped (the
#    ledger opened offline): its time and peak resident memory.
# Each is run STARTUP_RUNS times (3) after one run to warm the page cache;
# the medians are compared. Goal: at most 1.5x the empty ledger's time and
# 2x its peak memory.
#
#   scripts/bench/startup.sh
#   STARTUP_EVENTS=200000 scripts/bench/startup.sh     # a smaller history
#   STARTUP_DIR=/var/tmp/startup scripts/bench/startup.sh
#                      # keep the filled data directory there, and use it
#                      # again on the next run (filling takes minutes)
#   BENCH_SHORT=1 scripts/bench/startup.sh   # 5,000 events, one run of each
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
runs=3 events=1000000
short && runs=1 events=5000
runs=${STARTUP_RUNS:-$runs}
events=${STARTUP_EVENTS:-$events}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

go build -o "$out/tobe-body" ./cmd/tobe-body
go build -o "$out/startupbench" ./scripts/bench/startupbench
bin="$out/tobe-body"
bench="$out/startupbench"

old=${STARTUP_DIR:-$out/old}
if [ ! -f "$old/ledger.db" ]; then
	echo "filling $old with $events events"
	actions=$((events / 4))
	"$bench" fill "$old" -events "$events" -actions "$actions"
fi
empty="$out/empty"
mkdir -p "$empty"
ls -l "$old/ledger.db" | awk '{printf "ledger with history: %d MB\n", $5 / 1048576}'

startcase empty "$empty"
startcase history "$old"

echo
for what in start exec; do
	awk -v what="$what" '
	FNR == 1 { file++ }
	/^median:/ { ms[file] = $2; kib[file] = $4; anon[file] = $6 }
	END {
		if (what == "start") {
			printf "start to READY=1: empty %.1f ms, peak %.0f KiB (anon %.0f); history %.1f ms, peak %.0f KiB (anon %.0f)\n",
				ms[1], kib[1], anon[1], ms[2], kib[2], anon[2]
			printf "  %.2fx time (goal <= 1.5x), %.2fx peak memory (goal <= 2x), %.2fx anonymous memory\n",
				ms[2] / ms[1], kib[2] / kib[1], anon[2] / anon[1]
			n = "startup.ready"
		} else {
			printf "ledger events --limit 5: empty %.1f ms, peak %.0f KiB; history %.1f ms, peak %.0f KiB\n", ms[1], kib[1], ms[2], kib[2]
			printf "  %.2fx time (goal <= 1.5x), %.2fx peak memory (goal <= 2x)\n", ms[2] / ms[1], kib[2] / kib[1]
			n = "startup.offline_events"
		}
		printf "%s.time %.1f ms %.1f ratio<=1.5 empty-ledger\n", n, ms[2], ms[1] > figs
		printf "%s.peak %.1f MiB %.1f ratio<=2 empty-ledger\n", n, kib[2] / 1024, kib[1] / 1024 > figs
		if (what == "start") printf "%s.anon %.1f MiB %.1f - empty-ledger\n", n, anon[2] / 1024, anon[1] / 1024 > figs
	}' figs="$out/figures.$what" "$out/empty.$what" "$out/history.$what"
	figures <"$out/figures.$what"
done
