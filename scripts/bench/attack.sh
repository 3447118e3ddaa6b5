#!/bin/sh
# The resource figures of the local attack surface (issue 12, finding 2),
# against the real daemon binary on the sim board, in one run:
#  1. the ledger's growth under ATTACK_N (300) refused action.do requests
#     with a 30 KiB note, then ATTACK_N with a 1 KiB note that the policy
#     refuses, each sent through the admin socket by a low-trust caller
#     (uid 65534 with the daemon's group when run as root, which the
#     config's first act.principals rule puts at low trust; the caller's
#     own uid otherwise), on a fresh data directory; then the daemon is
#     stopped and the action.refusals summaries it wrote are counted.
#     Goal: under 1 MiB of growth, the refusals summarised;
#  2. the daemon's resident memory idle and at its peak under sixteen
#     concurrent callers each making the largest events query (limit
#     10000) five times, on a ledger of ATTACK_EVENTS (100,000) events
#     with ATTACK_PAYLOAD (1024) bytes of payload each. Goal: the peak
#     (VmHWM) under 2x the idle VmRSS.
# With ATTACK_BASELINE set to a git revision, the same cases run first
# against the daemon built from that revision (before the fix), side by
# side, on copies of the same filled ledger.
#
#   scripts/bench/attack.sh
#   ATTACK_BASELINE=HEAD~8 scripts/bench/attack.sh
#   ATTACK_EVENTS=20000 scripts/bench/attack.sh   # a smaller ledger
#   BENCH_SHORT=1 scripts/bench/attack.sh   # 20 submits of each kind, 2,000 events, 2 s idle
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
n=300 events=100000 idle=10s
short && n=20 events=2000 idle=2s
n=${ATTACK_N:-$n}
events=${ATTACK_EVENTS:-$events}
payload=${ATTACK_PAYLOAD:-1024}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The low-trust caller runs the bench's own binary and reaches the data
# directories through the daemon's group.
chmod 755 "$out"

go build -o "$out/tobe-body" ./cmd/tobe-body
go build -o "$out/attackbench" ./scripts/bench/attackbench
bins="fixed:$out/tobe-body"
if [ -n "${ATTACK_BASELINE:-}" ]; then
	mkdir "$out/baseline-src"
	git archive "$ATTACK_BASELINE" | tar -x -C "$out/baseline-src"
	(cd "$out/baseline-src" && go build -o "$out/tobe-body-baseline" ./cmd/tobe-body)
	bins="baseline($ATTACK_BASELINE):$out/tobe-body-baseline $bins"
fi

echo "filling a ledger with $events events of $payload bytes of payload"
"$out/attackbench" fill "$out/filled" -events "$events" -payload "$payload"

for b in $bins; do
	name=${b%%:*} bin=${b#*:}
	echo
	echo "== $name: $n refused submits of each kind, fresh data directory"
	# The figures are the fixed daemon's; a baseline's are its words only.
	figs=""
	[ "$name" = fixed ] && figs=attack
	"$out/attackbench" submits -bin "$bin" -data "$out/$name-submits" -n "$n" -figures "$figs"
	echo "== $name: 16 concurrent largest events queries"
	cp -a "$out/filled" "$out/$name-queries"
	"$out/attackbench" queries -bin "$bin" -data "$out/$name-queries" -idle "$idle" -figures "$figs"
	rm -rf "$out/$name-queries"
done
