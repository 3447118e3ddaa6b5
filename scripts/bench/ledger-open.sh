#!/bin/sh
# What a look at the ledger costs, by the size of the ledger: the time and
# peak RSS of `tobe-body ledger events --limit 5` and `tobe-body ledger
# stats` with no daemon running (they open the file themselves), on a big
# ledger (500,000 events, about 300 MB) and on an empty one, side by side
# in the same run:
#  - clean: the files as Close left them;
#  - crashed: each file as a kill after a commit leaves it (restored
#    before every run: the look's own Close makes it clean again);
#  - warm: the file in the page cache; cold: its pages dropped from the
#    page cache first (dd iflag=nocache, for that file only).
# Prints the median of $ROUNDS runs (default 5) of each, and the ratios
# big/empty.
#
#   scripts/bench/ledger-open.sh
#   ROUNDS=3 EVENTS=100000 scripts/bench/ledger-open.sh
#   LEDGER_OPEN_DIR=/var/tmp/lo scripts/bench/ledger-open.sh   # keep and reuse the ledgers
#   TOBE_BODY=/path/to/other/tobe-body scripts/bench/ledger-open.sh   # measure another build
#   BENCH_SHORT=1 scripts/bench/ledger-open.sh   # one round, 2,000 events
#
# Goal (RELIABILITY.md A1): offline reads as fast as on an empty ledger;
# the figures hold the clean files to at most 1.5x its time (as
# startup.sh does) and 2x its peak memory. A crashed file is read whole
# before it is trusted (README, the ledger), so its figures have no goal:
# they show what that costs.
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
rounds=5 events=500000
short && rounds=1 events=2000
rounds=${ROUNDS:-$rounds}
events=${EVENTS:-$events}
dir=${LEDGER_OPEN_DIR:-}
if [ -z "$dir" ]; then
	dir=$(mktemp -d)
	trap 'rm -rf "$dir"' EXIT
fi
mkdir -p "$dir"
go build -o "$dir/ledgerbench" ./scripts/bench/ledgerbench
bin=${TOBE_BODY:-}
if [ -z "$bin" ]; then
	bin="$dir/tobe-body"
	go build -o "$bin" ./cmd/tobe-body
fi
if [ ! -f "$dir/big/ledger.db" ] || [ "$(cat "$dir/events" 2>/dev/null)" != "$events" ]; then
	"$dir/ledgerbench" make "$dir" -events "$events"
	echo "$events" >"$dir/events"
fi

# The four files, and a kept copy of each crashed one.
for size in big empty; do
	mkdir -p "$dir/run/$size-clean" "$dir/run/$size-crashed" "$dir/kept/$size-crashed"
	cp "$dir/$size/ledger.db" "$dir/run/$size-clean/ledger.db"
	cp "$dir/$size/ledger.db" "$dir/kept/$size-crashed/ledger.db"
	"$dir/ledgerbench" crash "$dir/kept/$size-crashed"
done
ls -l "$dir"/run/*/ledger.db "$dir"/kept/*/ledger.db | awk '{printf "  %12d bytes  %s\n", $5, $NF}'

out="$dir/times"
: >"$out"
for round in $(seq "$rounds"); do
	for cmd in events stats; do
		for cache in warm cold; do
			for state in clean crashed; do
				for size in big empty; do
					case=$size-$state
					f="$dir/run/$case/ledger.db"
					if [ "$state" = crashed ]; then
						cp "$dir/kept/$case/ledger.db" "$f"
					fi
					if [ "$cache" = cold ]; then
						sync "$f"
						dd if="$f" iflag=nocache count=0 status=none
					else
						cat "$f" >/dev/null
					fi
					set -- ledger "$cmd" --data "$dir/run/$case"
					[ "$cmd" = events ] && set -- "$@" --limit 5
					start=$(date +%s%N)
					/usr/bin/time -f "%M" -o "$dir/t" "$bin" "$@" >/dev/null
					ms=$(( ($(date +%s%N) - start) / 1000 ))
					echo "$cmd $cache $state $size $ms $(cat "$dir/t")" >>"$out"
				done
			done
		done
	done
done

awk -v rounds="$rounds" '
function median(key,   n, i, j, t, a) {
	n = split(vals[key], a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return a[int((n + 1) / 2)]
}
{ k = $1 " " $2 " " $3 " " $4; vals[k "|s"] = vals[k "|s"] " " $5; vals[k "|kb"] = vals[k "|kb"] " " $6 }
END {
	printf "\nmedian of %d runs; wall time of the process in ms, its peak RSS in MiB\n", rounds
	printf "%-22s %8s %8s %8s   %8s %8s %8s\n", "", "big ms", "empty ms", "ratio", "big MiB", "empty", "ratio"
	split("events stats", cmds, " "); split("warm cold", caches, " "); split("clean crashed", states, " ")
	for (c = 1; c <= 2; c++) for (h = 1; h <= 2; h++) for (s = 1; s <= 2; s++) {
		k = cmds[c] " " caches[h] " " states[s]
		bs = median(k " big|s") / 1000; es = median(k " empty|s") / 1000
		bk = median(k " big|kb") / 1024; ek = median(k " empty|kb") / 1024
		printf "%-22s %8.1f %8.1f %7.2fx   %8.1f %8.1f %7.2fx\n", k, bs, es, bs / es, bk, ek, bk / ek
		n = "ledger_open." cmds[c] "." caches[h] "." states[s]
		clean = states[s] == "clean"
		printf "%s.time %.1f ms %.1f %s empty-ledger\n", n, bs, es, clean ? "ratio<=1.5" : "-" > figs
		printf "%s.peak %.1f MiB %.1f %s empty-ledger\n", n, bk, ek, clean ? "ratio<=2" : "-" > figs
	}
}' figs="$out.figures" "$out"
figures <"$out.figures"
