#!/bin/sh
# Every Go benchmark in the module (go test -bench in each package that
# has one), so that none rots unrun: the ones the other scripts read for
# their goals, and the rest (the simulator's rendering, an agent's tool
# call through the MCP server, the uplink's relay, revoking leases, the
# motion detector's stages and other frame sizes, L0 with spread
# conditions, appends over the outbox's budget, retention with dedupe).
# Prints their lines, and each one's ns/op as a figure without a goal:
# the goals are in the scripts that measure them side by side with a
# peer.
#
#   scripts/bench/go.sh                   # 1 s per benchmark
#   BENCH_SHORT=1 scripts/bench/go.sh     # each benchmark once (-benchtime 1x)
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
benchtime=1s
short && benchtime=1x
out=$(mktemp)
trap 'rm -f "$out"' EXIT
pkgs=$(git ls-files '*_test.go' | xargs grep -l '^func Benchmark' | xargs -n1 dirname | sort -u | sed 's|^|./|')
[ -n "$pkgs" ] || { echo "go.sh: no Go benchmark found" >&2; exit 1; }
# shellcheck disable=SC2086
go test -run '^$' -bench . -benchtime "$benchtime" $pkgs >"$out" 2>&1 || { cat "$out"; exit 1; }
grep -E '^(Benchmark|ok)' "$out"
awk '
/^pkg: / { pkg = $2; sub(/.*\/tobe-body\//, "", pkg); gsub(/\//, ".", pkg) }
/^Benchmark/ {
	name = $1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name)
	name = tolower(pkg "." name); gsub(/\//, ".", name); gsub(/[^a-z0-9_.-]/, "_", name)
	for (i = 2; i < NF; i++) if ($(i+1) == "ns/op") printf "go.%s %s ns/op\n", name, $i
}' "$out" >"$out.figures"
figures <"$out.figures"
rm -f "$out.figures"
