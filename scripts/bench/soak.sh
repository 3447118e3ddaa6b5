#!/bin/sh
# Runs `tobe-body run --board sim` with every simulated stream at its rate
# (camera 640x480 YUYV at 30 frames/s through motion detection, 16 kHz
# microphone through sound analysis, keypad, keyboard, GPIO lines and the
# self-state) for a while, and reports whether memory stays flat and
# whether any sense channel shed events: RSS at the start (after a warm-up)
# and every minute, and at the end what each channel queued, wrote and
# shed, from `tobe-body status --json`.
#
#   scripts/bench/soak.sh          # 10 minutes
#   SOAK_MINUTES=2 scripts/bench/soak.sh
#   BENCH_SHORT=1 scripts/bench/soak.sh   # 5 s of warm-up, then 3 samples 5 s apart
#
# Figures: RSS growth from the warm-up to the end (goal, ours: at most
# 10 %), events shed (goal: none; the bench fails on any), CPU.
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh

samples=${SOAK_MINUTES:-10} every=60 warmup=30
short && samples=3 every=5 warmup=5
warmup=${SOAK_WARMUP_SECONDS:-$warmup}
out=$(mktemp -d)
trap 'kill -INT "$pid" 2>/dev/null || true; rm -rf "$out"' EXIT

make -s build
# gctrace: the Go heap live after each collection, to tell a leak from the
# runtime keeping freed memory.
GODEBUG=gctrace=1 bin/tobe-body run --board sim --data "$out/data" >/dev/null 2>"$out/stderr" &
pid=$!

rss() { awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"; }
# RssAnon is the heap and stacks; RssFile includes the ledger's memory map,
# which grows with the events kept.
split() { awk '/^RssAnon:/ {a=$2} /^RssFile:/ {f=$2} END {printf "anon %d KiB, file %d KiB", a, f}' "/proc/$pid/status"; }
alive() {
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "soak: the daemon exited:" >&2
		cat "$out/stderr" >&2
		exit 1
	fi
}

sleep "$warmup"
alive
start=$(rss)
cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
echo "soak: $((samples * every)) s of the sim board at full rate; RSS after ${warmup}s warm-up: ${start} KiB ($(split))"
i=0
while [ "$i" -lt "$samples" ]; do
	sleep "$every"
	alive
	i=$((i + 1))
	echo "soak: at $((i * every)) s: RSS $(rss) KiB ($(split)), $(awk '/^Threads:/ {print $2}' "/proc/$pid/status") threads"
done
end=$(rss)
cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
hz=$(getconf CLK_TCK)
bin/tobe-body status --json --data "$out/data" >"$out/status.json"
kill -INT "$pid"
wait "$pid" || true

grep '^gc ' "$out/stderr" | awk -v w="$warmup" '{
	t = $3; sub(/^@/, "", t); sub(/s$/, "", t)
	split($11, h, "->"); live = h[3]
	if (t + 0 >= w + 0 && first == "") first = live
	last = live; n++
} END { if (n) printf "soak: Go heap live after a collection: %s MB after the warm-up, %s MB at the end (%d collections)\n", first, last, n }'
python3 - "$out/status.json" "$start" "$end" "$cpu0" "$cpu1" "$hz" "$((samples * every))" "$out/figures" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
start, end = int(sys.argv[2]), int(sys.argv[3])
cpu = (int(sys.argv[5]) - int(sys.argv[4])) / int(sys.argv[6])
secs = int(sys.argv[7])
shed = 0
for ch, e in sorted(st.get("events", {}).items()):
    shed += e["Shed"]
    print(f"soak: {ch:22s} queued {e['Queued']:7d}  written {e['Written']:7d}  shed {e['Shed']}")
print(f"soak: RSS start {start} KiB, end {end} KiB ({(end - start) / start * 100:+.1f}%)")
print(f"soak: CPU {cpu:.1f} s over {secs} s ({cpu / secs * 100:.1f}% of one core); events shed: {shed}")
print(f"soak: ledger {st['ledger']['events']} events")
with open(sys.argv[8], "w") as f:
    print(f"soak.rss_growth {(end - start) / start * 100:.1f} % - value<=10", file=f)
    print(f"soak.rss_end {end / 1024:.1f} MiB", file=f)
    print(f"soak.shed {shed} events - value<=0", file=f)
    print(f"soak.cpu {cpu / secs * 100:.1f} %-of-a-core", file=f)
PY
figures <"$out/figures"
shed=$(awk '$1 == "soak.shed" { print $2 }' "$out/figures")
[ "$shed" = 0 ] || { echo "soak: $shed events shed" >&2; exit 1; }
