#!/bin/sh
# Sound analysis cost: the CPU time sense/sound needs per second of audio,
# pinned to one core (taskset -c 1, GOMAXPROCS=1). The test binary is
# built first, on every core, and then run pinned.
#
#   scripts/bench/sound.sh                 # 3 s per benchmark
#   BENCHTIME=10s scripts/bench/sound.sh
#   BENCH_SHORT=1 scripts/bench/sound.sh   # 100 ms per benchmark
#
# Prints the benchmark lines, then the figures against the goal: under
# 1 ms of CPU per second of 16 kHz mono audio, 0 allocations.
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
benchtime=3s
short && benchtime=100ms
benchtime=${BENCHTIME:-$benchtime}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

go test -c -o "$out/sound.test" ./sense/sound
pin="taskset -c 1"
if ! command -v taskset >/dev/null 2>&1 || ! taskset -c 1 true 2>/dev/null; then
	echo "taskset -c 1 is not available here: running unpinned" >&2
	pin=""
fi
GOMAXPROCS=1 $pin "$out/sound.test" -test.run '^$' -test.bench 'Analyze' \
	-test.benchtime "$benchtime" -test.count 1 | tee "$out/bench" | grep Benchmark

echo
awk '
/^BenchmarkAnalyze/ {
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^BenchmarkAnalyze/, "", name)
	for (i = 2; i < NF; i++) {
		if ($(i+1) == "cpu-ns/audio-s") cpu[name] = $i
		if ($(i+1) == "ns/audio-s") wall[name] = $i
		if ($(i+1) == "allocs/op") allocs[name] = $i
		if ($(i+1) == "spectra/window") spectra[name] = $i
	}
	order[++n] = name
}
END {
	for (k = 1; k <= n; k++) {
		m = order[k]
		printf "%-12s %7.1f µs CPU per second of audio (%.3f%% of a core), wall %7.1f µs, %s allocs, %.2f spectra/window\n",
			m, cpu[m] / 1000, cpu[m] / 1e7, wall[m] / 1000, allocs[m], spectra[m]
	}
	print "goal: 16kMono under 1000 µs CPU per second of audio, 0 allocs"
	for (k = 1; k <= n; k++) {
		m = order[k]; goal = m == "16kMono" ? "value<=1000" : "-"
		printf "sound.cpu.%s %.1f µs/audio-s - %s\n", tolower(m), cpu[m] / 1000, goal > figs
		printf "sound.allocs.%s %s allocs/op - %s\n", tolower(m), allocs[m], m == "16kMono" ? "value<=0" : "-" > figs
	}
}' figs="$out/figures" "$out/bench"
figures <"$out/figures"
