#!/bin/sh
# The disk over years (RELIABILITY.md W2): a body's ledger after five
# years of the year startup.sh fills (1,250,000 finished actions, 5,000
# grants, of them 50 in force at the end and the rest revoked or
# expired, 500 e-stop trips, 250 people's holds; the sense events of its
# last six days, 498,600 as in that year; and five years of what feeds
# the world model: 3,010,050 events and 1,825 days), written by startupbench fill
# -years 5 -daily with the daemon's ledger options and defaults: once a
# day of the history retention runs, a home server takes what the outbox
# holds, and the archive's pass moves what is older than audit_keep_days
# (90) into the archive, within disk_budget_mb (2048). Side by side in one
# run on the same disk:
#  - the sizes: the file, its journal, the archive, in all, against the
#    budget; and the past keys;
#  - `tobe-body ledger verify --archive` and `tobe-body ledger verify`,
#    offline: their time and result;
#  - startup against an empty ledger, as startup.sh measures it: the time
#    from `tobe-body run --board sim` to READY=1 and its peak resident
#    memory, and `tobe-body ledger events --limit 5` offline (goal: at
#    most 1.5x the empty ledger's time and 2x its peak memory);
#  - the budget at work: the same history under a budget that holds the
#    file and half its archive (startupbench budget; the budget deletes
#    only archive segments): the oldest segments deleted, each recorded,
#    the files under it, and the archive left still verifies.
# The history is written on a tmpfs when there is one (its syncs cost
# nothing there; the daemon's start is measured on the disk).
#
#   scripts/bench/age.sh
#   AGE_DIR=/var/tmp/age scripts/bench/age.sh   # keep the filled data directory there, and use it again
#   BENCH_SHORT=1 scripts/bench/age.sh          # 10,000 actions and 20 days of the world over five years, one run of each
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
runs=3 actions=1250000 sense=498600 worlddays=1825
short && runs=1 actions=10000 sense=20000 worlddays=20
grants=$((actions / 250)) trips=$((actions / 2500)) holds=$((actions / 5000))
# A record for each grant, and one more for each that ends (revoked, or
# expired): all but one in a hundred.
events=$((2 * actions + 2 * grants - grants / 100 + 2 * trips + 2 * holds + sense))
out=$(mktemp -d)
stage=
trap 'rm -rf "$out" ${stage:+"$stage"}' EXIT

go build -o "$out/tobe-body" ./cmd/tobe-body
go build -o "$out/startupbench" ./scripts/bench/startupbench
bin="$out/tobe-body"
bench="$out/startupbench"

old=${AGE_DIR:-$out/five}
if [ ! -f "$old/ledger.db" ]; then
	echo "filling $old with five years: $events events"
	fillto=$old
	if [ -d /dev/shm ] && [ -w /dev/shm ]; then
		stage=$(mktemp -d /dev/shm/age.XXXXXX)
		fillto=$stage/five
	fi
	"$bench" fill "$fillto" -years 5 -daily -events "$events" -actions "$actions" -grants "$grants" \
		-trips "$trips" -holds "$holds" -world-days "$worlddays"
	if [ -n "$stage" ]; then
		mkdir -p "$old"
		cp -a "$fillto/." "$old/"
		rm -rf "$stage"
		stage=
	fi
fi
empty="$out/empty"
mkdir -p "$empty"

# The sizes.
"$bin" ledger stats --json --data "$old" >"$out/stats.json"
python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
a = s["archive"]
print(s["file_bytes"], s["events"], a["events"], a["deleted"], a["segments"], a["bytes"], a["past_keys"],
      "%.2g" % a["past_false_rate"], a["disk_bytes"], a["disk_budget"])' "$out/stats.json" >"$out/sizes"
read -r file events archived deleted segments abytes past falserate disk budget <"$out/sizes"
journal=$(stat -c %s "$old/ledger.db.journal")
echo "five years: the file $((file >> 20)) MiB ($events events), its journal $((journal >> 20)) MiB, the archive $((abytes >> 20)) MiB" \
	"($segments segments, $archived events archived, $deleted of them deleted); in all $((disk >> 20)) MiB of a budget of $((budget >> 20)) MiB"
echo "past keys: $past (a new key taken for a past one: $falserate)"
figure age.file "$(awk -v b="$file" 'BEGIN { printf "%.1f", b / 1048576 }')" MiB
figure age.archive "$(awk -v b="$abytes" 'BEGIN { printf "%.1f", b / 1048576 }')" MiB
figure age.disk "$(awk -v b="$disk" 'BEGIN { printf "%.1f", b / 1048576 }')" MiB - "value<=$((budget >> 20))"
figure age.archive_bytes_per_event "$(awk -v b="$abytes" -v n="$archived" 'BEGIN { printf "%.1f", b / (n > 0 ? n : 1) }')" bytes

# The archive's verify and the ledger's, offline.
for what in "--archive" ""; do
	start=$(date +%s%N)
	# shellcheck disable=SC2086 # $what is one flag or none
	if ! "$bin" ledger verify $what --data "$old" >"$out/verify"; then
		cat "$out/verify"
		echo "ledger verify $what: problems" >&2
		exit 1
	fi
	ms=$((($(date +%s%N) - start) / 1000000))
	cat "$out/verify"
	echo "ledger verify $what: $ms ms"
	figure "age.verify${what:+_archive}" "$ms" ms
done

# Startup against an empty ledger.
startcase empty "$empty"
startcase five-years "$old"
for what in start exec; do
	awk -v what="$what" '
	FNR == 1 { file++ }
	/^median:/ { ms[file] = $2; kib[file] = $4 }
	END {
		label = what == "start" ? "start to READY=1" : "ledger events --limit 5"
		printf "%s: empty %.1f ms, peak %.0f KiB; five years %.1f ms, peak %.0f KiB\n", label, ms[1], kib[1], ms[2], kib[2]
		printf "  %.2fx time (goal <= 1.5x), %.2fx peak memory (goal <= 2x)\n", ms[2] / ms[1], kib[2] / kib[1]
		n = what == "start" ? "age.ready" : "age.offline_events"
		printf "%s.time %.1f ms %.1f ratio<=1.5 empty-ledger\n", n, ms[2], ms[1] > figs
		printf "%s.peak %.1f MiB %.1f ratio<=2 empty-ledger\n", n, kib[2] / 1024, kib[1] / 1024 > figs
	}' figs="$out/figures.$what" "$out/empty.$what" "$out/five-years.$what"
	figures <"$out/figures.$what"
done

# The budget at work, on a copy: the file and half its archive.
tight=$((((file + journal) >> 20) + (abytes >> 21) + 1))
cp -a "$old" "$out/tight"
"$bench" budget "$out/tight" -disk-budget-mb "$tight" | tee "$out/budget"
after=$(du -cb "$out/tight/ledger.db" "$out/tight/ledger.db.journal" "$out/tight/ledger.db.archive" | awk 'END { print $1 }')
"$bin" ledger verify --archive --data "$out/tight"
"$bin" ledger events --type ledger.archive_deleted --limit 1 --data "$out/tight"
figure age.budget_disk "$(awk -v b="$after" 'BEGIN { printf "%.1f", b / 1048576 }')" MiB - "value<=$tight"
