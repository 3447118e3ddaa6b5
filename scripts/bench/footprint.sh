#!/bin/sh
# Measures the footprint of tobe-body: the size of the stripped binary for
# each target, and the resident memory of `tobe-body run --board sim` after
# it has run idle for a while (60 s by default).
#
#   scripts/bench/footprint.sh            # 60 s
#   FOOTPRINT_SECONDS=10 scripts/bench/footprint.sh
set -eu
cd "$(dirname "$0")/../.."

seconds=${FOOTPRINT_SECONDS:-60}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "binary size (stripped: -trimpath -ldflags '-s -w', CGO_ENABLED=0)"
for target in linux/amd64 linux/arm64 linux/arm/7; do
	os=${target%%/*}; rest=${target#*/}; arch=${rest%%/*}; arm=""
	[ "$arch" = arm ] && arm=${rest#*/}
	bin="$out/tobe-body-$arch$arm"
	env -u GOARM CGO_ENABLED=0 GOOS=$os GOARCH=$arch ${arm:+GOARM=$arm} \
		go build -trimpath -ldflags '-s -w' -o "$bin" ./cmd/tobe-body
	size=$(stat -c %s "$bin")
	printf '  %-14s %9d bytes  %5.1f MiB\n' "$target" "$size" "$(echo "$size / 1048576" | bc -l)"
done

echo "idle memory of 'tobe-body run --board sim' after ${seconds}s"
"$out/tobe-body-amd64" run --board sim --data "$out/data" >/dev/null 2>"$out/stderr" &
pid=$!
sleep "$seconds"
if ! kill -0 "$pid" 2>/dev/null; then
	echo "the daemon exited early:" >&2
	cat "$out/stderr" >&2
	exit 1
fi
rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status")
threads=$(awk '/^Threads:/ {print $2}' "/proc/$pid/status")
printf '  VmRSS %d KiB (%.1f MiB), peak VmHWM %d KiB, %d threads\n' "$rss" "$(echo "$rss / 1024" | bc -l)" "$hwm" "$threads"
start=$(date +%s%N)
kill -INT "$pid"
status=0
wait "$pid" || status=$?
stop_ms=$(( ($(date +%s%N) - start) / 1000000 ))
printf '  Ctrl-C: exit status %d after %d ms\n' "$status" "$stop_ms"
[ "$status" -eq 0 ]
