#!/bin/sh
# Measures the footprint of tobe-body: the size of the stripped binary for
# each target (CGO_ENABLED=0, -trimpath -ldflags '-s -w'), and the memory
# of `tobe-body run --board sim` once it has idled a while: its resident
# set (VmRSS), its peak (VmHWM), and their split into anonymous pages (the
# Go heap, stacks, the runtime's own) and file pages (the binary's code
# and tables as the kernel maps them in, and the ledger's memory map).
#
# The full form also says what grew them: what the stripped arm64
# binary's sections hold, and the symbols of the same build without -s -w
# (the same code and data) summed by module and by package; and what the
# idle heap holds, from a build with the heapprofile tag run beside the
# release one with every allocation sampled (GODEBUG=memprofilerate=1):
# the runtime's memory classes and the top in-use allocation sites
# (go tool pprof -top -sample_index=inuse_space). The short form idles
# 5 s and skips both breakdowns (the heap at 5 s is the start, not idle).
#
#   scripts/bench/footprint.sh                 # 60 s
#   BENCH_SHORT=1 scripts/bench/footprint.sh   # 5 s, no breakdown
#   FOOTPRINT_SECONDS=10 scripts/bench/footprint.sh
#
# Figures: footprint.binary.amd64, .arm64 (goal: at most 15 MiB) and
# .armv7; footprint.idle_rss (goal: at most 25 MiB), footprint.idle_hwm,
# footprint.idle_rss_anon and footprint.idle_rss_file, in MiB. It fails
# when the daemon exits before it was measured.
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh

seconds=60
short && seconds=5
seconds=${FOOTPRINT_SECONDS:-$seconds}
out=$(mktemp -d)
pids=""
trap 'for p in $pids; do kill -INT "$p" 2>/dev/null || true; done; rm -rf "$out"' EXIT

mib() { awk -v n="$1" -v d="${2:-1}" 'BEGIN { printf "%.2f", n * d / 1048576 }'; }

echo "binary size (stripped: -trimpath -ldflags '-s -w', CGO_ENABLED=0)"
for target in linux/amd64 linux/arm64 linux/arm/7; do
	os=${target%%/*}; rest=${target#*/}; arch=${rest%%/*}; arm=""
	[ "$arch" = arm ] && arm=${rest#*/}
	bin="$out/tobe-body-$arch$arm"
	env -u GOARM CGO_ENABLED=0 GOOS=$os GOARCH=$arch ${arm:+GOARM=$arm} \
		go build -trimpath -ldflags '-s -w' -o "$bin" ./cmd/tobe-body
	size=$(stat -c %s "$bin")
	printf '  %-14s %9d bytes  %5.1f MiB\n' "$target" "$size" "$(mib "$size")"
	case $arch$arm in
	arm64) figure footprint.binary.arm64 "$(mib "$size")" MiB - 'value<=15' ;;
	*) figure "footprint.binary.$(echo "$arch$arm" | sed 's/arm7/armv7/')" "$(mib "$size")" MiB ;;
	esac
done

if ! short; then
	echo "what the arm64 binary holds"
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -trimpath -o "$out/tobe-body-arm64-syms" ./cmd/tobe-body
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go list -deps -f '{{.ImportPath}} {{with .Module}}{{.Path}}{{else}}std{{end}}' ./cmd/tobe-body >"$out/modules"
	echo "main $(go list -m)" >>"$out/modules"
	go run ./scripts/bench/footprintbench "$out/tobe-body-arm64" "$out/tobe-body-arm64-syms" "$out/modules"
	# The heap's breakdown: the same build with the heapprofile tag.
	CGO_ENABLED=0 go build -trimpath -tags heapprofile -o "$out/tobe-body-heapprofile" ./cmd/tobe-body
fi

# The daemon of this machine's architecture.
host=$(go env GOARCH)
[ "$host" = arm ] && host=arm7
echo "idle memory of 'tobe-body run --board sim' after ${seconds}s"
"$out/tobe-body-$host" run --board sim --data "$out/data" >/dev/null 2>"$out/stderr" &
pid=$!
pids=$pid
if ! short; then
	GODEBUG=memprofilerate=1 TOBE_BODY_HEAPPROFILE="$out/heap.pprof" TOBE_BODY_HEAPPROFILE_AFTER="${seconds}s" \
		"$out/tobe-body-heapprofile" run --board sim --data "$out/data-heap" >/dev/null 2>"$out/stderr-heap" &
	hpid=$!
	pids="$pids $hpid"
fi
alive() {
	if ! kill -0 "$1" 2>/dev/null; then
		echo "the daemon exited early:" >&2
		cat "$2" >&2
		exit 1
	fi
}
sleep "$seconds"
alive "$pid" "$out/stderr"
proc() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$pid/status"; }
rss=$(proc VmRSS) hwm=$(proc VmHWM) anon=$(proc RssAnon) file=$(proc RssFile) threads=$(proc Threads)
printf '  VmRSS %d KiB (%.1f MiB), peak VmHWM %d KiB, %d threads\n' "$rss" "$(mib "$rss" 1024)" "$hwm" "$threads"
# The file pages by what they map: the binary's code (r-x), its read-only
# tables (r--: type descriptors, pc tables) and its data, and the ledger.
awk -v bin="$out/tobe-body-$host" '
	/^[0-9a-f]+-[0-9a-f]+ / { what = ""; if ($6 == bin) what = "binary " $2; else if ($6 ~ /ledger\.db$/) what = "ledger"; next }
	/^Rss:/ && what != "" { kb[what] += $2 }
	END { printf "  file pages: binary code %d KiB, binary tables %d KiB, binary data %d KiB, ledger map %d KiB\n",
		kb["binary r-xp"], kb["binary r--p"], kb["binary rw-p"], kb["ledger"] }' "/proc/$pid/smaps"
printf '  RssAnon %d KiB (heap, stacks, the runtime), RssFile %d KiB\n' "$anon" "$file"
figure footprint.idle_rss "$(mib "$rss" 1024)" MiB - 'value<=25'
figure footprint.idle_hwm "$(mib "$hwm" 1024)" MiB
figure footprint.idle_rss_anon "$(mib "$anon" 1024)" MiB
figure footprint.idle_rss_file "$(mib "$file" 1024)" MiB

if ! short; then
	# The profile is written once the build beside it has idled as long.
	for _ in $(seq 60); do
		[ -s "$out/heap.pprof" ] && break
		alive "$hpid" "$out/stderr-heap"
		sleep 1
	done
	[ -s "$out/heap.pprof" ] || { echo "no heap profile was written:" >&2; cat "$out/stderr-heap" >&2; exit 1; }
	echo "idle heap (the heapprofile build, every allocation sampled, after ${seconds}s)"
	awk '{ v[$1] = $2 }
		function m(n) { return n / 1048576 }
		END {
			printf "  Go heap: %.2f MiB in live objects, %.2f MiB free in its spans, %.2f MiB returned to the system; goal %.2f MiB\n",
				m(v["/memory/classes/heap/objects:bytes"]), m(v["/memory/classes/heap/unused:bytes"] + v["/memory/classes/heap/free:bytes"]),
				m(v["/memory/classes/heap/released:bytes"]), m(v["/gc/heap/goal:bytes"])
			printf "  stacks %.2f MiB (%d goroutines); runtime metadata %.2f MiB; other %.2f MiB and profiling %.2f MiB, most of them the profiler'"'"'s own\n",
				m(v["/memory/classes/heap/stacks:bytes"] + v["/memory/classes/os-stacks:bytes"]), v["/sched/goroutines:goroutines"],
				m(v["/memory/classes/metadata/mspan/inuse:bytes"] + v["/memory/classes/metadata/mspan/free:bytes"] + v["/memory/classes/metadata/mcache/inuse:bytes"] + v["/memory/classes/metadata/mcache/free:bytes"] + v["/memory/classes/metadata/other:bytes"]),
				m(v["/memory/classes/other:bytes"]), m(v["/memory/classes/profiling/buckets:bytes"])
		}' "$out/heap.pprof.metrics"
	echo "  the top in-use allocation sites:"
	go tool pprof -top -sample_index=inuse_space -nodecount=25 "$out/heap.pprof" 2>/dev/null | sed -n '/^Showing/,$p' | sed 's/^/    /'
	echo "  the same by this module's code that asked for it (a library's allocations counted to its caller here):"
	go tool pprof -top -sample_index=inuse_space -nodecount=15 -show "^$(go list -m)/|^main\\." "$out/heap.pprof" 2>/dev/null |
		sed -n '/^ *flat/,$p' | sed 's/^/    /'
	kill -INT "$hpid"
	wait "$hpid" || true
fi

start=$(date +%s%N)
kill -INT "$pid"
status=0
wait "$pid" || status=$?
pids=""
stop_ms=$(( ($(date +%s%N) - start) / 1000000 ))
printf '  Ctrl-C: exit status %d after %d ms\n' "$status" "$stop_ms"
[ "$status" -eq 0 ]
