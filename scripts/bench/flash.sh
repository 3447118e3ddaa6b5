#!/bin/sh
# Flash wear (issue "MQTT uplink", point 8): the bytes the daemon has the
# kernel write to storage per event it records (/proc/PID/io
# write_bytes), over FLASH_SECONDS (600) of the sim scene with the uplink
# running against the embedded broker and acknowledging, side by side in
# one run: every append committed at once (ledger.telemetry_commit_ms 0,
# as before grouping) and with the default grouping; and with the
# default grouping and a local administrator's body.notify once a second
# besides (an action: audit records, each on disk before the action goes
# on), whose difference from the run without is what audit events cost
# alone. The three run at the same time, each on its own data directory
# under /var/tmp (a disk). The bytes are counted to the end of a clean
# stop after the run: the ledger writes records to its journal and folds
# them into its file every ledger.fold_s and at the stop, and the fold is
# the events' cost too.
#
#   scripts/bench/flash.sh
#   FLASH_SECONDS=120 scripts/bench/flash.sh
#   BENCH_SHORT=1 scripts/bench/flash.sh   # 15 s each
#
# Goals (RELIABILITY.md W1): at most 3 KiB written per sensed event and
# 8 KiB per audit event.
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
secs=600
short && secs=15
secs=${FLASH_SECONDS:-$secs}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
go build -o "$out/tobe-body" ./cmd/tobe-body
go build -o "$out/flashbench" ./scripts/bench/flashbench
default=$("$out/tobe-body" config show --section ledger | sed -n 's/.*"telemetry_commit_ms": *\([0-9]*\).*/\1/p')
"$out/flashbench" -bin "$out/tobe-body" -seconds "$secs" -commit-ms 0 >"$out/before" &
"$out/flashbench" -bin "$out/tobe-body" -seconds "$secs" -commit-ms "$default" >"$out/after" &
"$out/flashbench" -bin "$out/tobe-body" -seconds "$secs" -commit-ms "$default" -notify-per-s 1 >"$out/audit" &
wait
echo "before (every append commits at once): $(cat "$out/before")"
echo "after (the default grouping):          $(cat "$out/after")"
echo "with an action a second:               $(cat "$out/audit")"
# events=N bytes=B of each run
field() { sed -n "s/.*\[events=\([0-9]*\) bytes=\([0-9]*\)\].*/\\$2/p" "$1"; }
awk -v e1="$(field "$out/after" 1)" -v b1="$(field "$out/after" 2)" -v e2="$(field "$out/audit" 1)" -v b2="$(field "$out/audit" 2)" \
	'BEGIN { printf "audit events alone: %d more events, %d more bytes: %.1f KiB per audit event\n", e2-e1, b2-b1, (b2-b1)/(e2-e1)/1024 }'
awk -v e0="$(field "$out/before" 1)" -v b0="$(field "$out/before" 2)" -v e1="$(field "$out/after" 1)" -v b1="$(field "$out/after" 2)" \
	-v e2="$(field "$out/audit" 1)" -v b2="$(field "$out/audit" 2)" 'BEGIN {
	if (e0 == 0 || e1 == 0 || e2 <= e1) { print "flash: a run recorded no events, or the run with actions none more" > "/dev/stderr"; exit 1 }
	printf "flash.sensed_event %.2f KiB %.2f value<=3 commit-each\n", b1 / e1 / 1024, b0 / e0 / 1024
	printf "flash.audit_event %.1f KiB - value<=8\n", (b2 - b1) / (e2 - e1) / 1024
}' >"$out/figures"
figures <"$out/figures"
