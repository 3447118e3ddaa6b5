#!/bin/sh
# Ledger figures, side by side in one run on the same disk:
#  - durable appends from 1, 4, 16 and 64 goroutines: the ledger against raw
#    bbolt writing the same record bytes with db.Update (one key per
#    transaction) and db.Batch (default options), with p50/p99 latency;
#  - the envelope's CBOR codec against encoding/json on the same struct.
# Prints the benchmark lines, then the ratios the ledger's goals are in.
#
#   scripts/bench/ledger.sh              # 3000 appends per case
#   APPENDS=10000 scripts/bench/ledger.sh
#   BENCH_SHORT=1 scripts/bench/ledger.sh  # 100 appends per case, 100 ms per codec case
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
n=3000 codectime=2s
short && n=100 codectime=0.1s
n=${APPENDS:-$n}
out=$(mktemp)
trap 'rm -f "$out" "$out.figures"' EXIT

go test -run '^$' -bench 'DurableAppend' -benchtime "${n}x" -count 1 ./ledger | tee "$out" | grep Benchmark
go test -run '^$' -bench 'Envelope' -benchtime "$codectime" -count 1 ./ledger | tee -a "$out" | grep Benchmark

echo
awk '
/BenchmarkDurableAppend/ {
	split($1, p, "/"); kind = p[2]; g = p[3]; sub(/-[0-9]+$/, "", g)
	for (i = 2; i <= NF; i++) if ($(i+1) == "appends/s") rate[kind, g] = $i
	for (i = 2; i <= NF; i++) if ($(i+1) == "p50-µs") p50[kind, g] = $i
	for (i = 2; i <= NF; i++) if ($(i+1) == "p99-µs") p99[kind, g] = $i
	gs[g] = 1
}
/BenchmarkEnvelope/ {
	split($1, p, "/"); op = p[2] "/" p[3]; sub(/-[0-9]+$/, "", op)
	ns[op] = $3
	for (i = 2; i <= NF; i++) if ($(i+1) == "allocs/op") allocs[op] = $i
}
END {
	printf "%-6s %12s %12s %12s %10s %10s %14s %14s\n", "", "ledger/s", "update/s", "batch/s", "÷update", "÷batch", "ledger p50/p99", "update p50/p99"
	n = split("g=1 g=4 g=16 g=64", order, " ")
	for (k = 1; k <= n; k++) {
		g = order[k]
		printf "%-6s %12.0f %12.0f %12.0f %9.2fx %9.2fx %8s/%-6s %8s/%-6s\n", g, rate["ledger", g], rate["bbolt-update", g], rate["bbolt-batch", g],
			rate["ledger", g] / rate["bbolt-update", g], rate["ledger", g] / rate["bbolt-batch", g],
			p50["ledger", g], p99["ledger", g], p50["bbolt-update", g], p99["bbolt-update", g]
	}
	printf "\nenvelope: encode CBOR %s ns (%s allocs) vs JSON %s ns: %.1fx; decode CBOR %s ns vs JSON %s ns: %.1fx\n",
		ns["encode/cbor"], allocs["encode/cbor"], ns["encode/json"], ns["encode/json"] / ns["encode/cbor"],
		ns["decode/cbor"], ns["decode/json"], ns["decode/json"] / ns["decode/cbor"]
	print "goals: g=1 >= 0.8x update; g=16 >= 5x batch and >= 20000/s; encode >= 2.5x, decode >= 5x, 0 allocs"
	for (k = 1; k <= n; k++) {
		g = order[k]; gn = g; sub(/=/, "", gn)
		printf "ledger.append.%s.vs_update %.0f appends/s %.0f %s bbolt-update\n", gn, rate["ledger", g], rate["bbolt-update", g], g == "g=1" ? "ratio>=0.8" : "-" > figs
		printf "ledger.append.%s.vs_batch %.0f appends/s %.0f %s bbolt-batch\n", gn, rate["ledger", g], rate["bbolt-batch", g], g == "g=16" ? "ratio>=5" : "-" > figs
		printf "ledger.append.%s.p99 %s µs %s - bbolt-update\n", gn, p99["ledger", g], p99["bbolt-update", g] > figs
	}
	printf "ledger.append.g16 %.0f appends/s - value>=20000\n", rate["ledger", "g=16"] > figs
	# The codec as operations a second, so that the ratio is CBOR over JSON.
	printf "ledger.envelope.encode %.0f ops/s %.0f ratio>=2.5 json\n", 1e9 / ns["encode/cbor"], 1e9 / ns["encode/json"] > figs
	printf "ledger.envelope.decode %.0f ops/s %.0f ratio>=5 json\n", 1e9 / ns["decode/cbor"], 1e9 / ns["decode/json"] > figs
	printf "ledger.envelope.encode_allocs %s allocs/op - value<=0\n", allocs["encode/cbor"] > figs
}' figs="$out.figures" "$out"
figures <"$out.figures"
