#!/bin/sh
# Checks the systemd units with systemd-analyze verify, pointing ExecStart
# at the binary just built (the unit names the installed /usr/bin path).
# Skipped, and says so, where systemd-analyze is not installed.
set -eu
cd "$(dirname "$0")/.."
if ! command -v systemd-analyze >/dev/null 2>&1; then
	echo "verify-units: systemd-analyze not installed; skipped"
	exit 0
fi
bin=$(pwd)/bin/tobe-body
[ -x "$bin" ] || { echo "verify-units: build $bin first (make build)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for unit in systemd/*.service; do
	sed "s|/usr/bin/tobe-body|$bin|g" "$unit" > "$tmp/$(basename "$unit")"
	out=$(systemd-analyze verify "$tmp/$(basename "$unit")" 2>&1) || { echo "$out"; exit 1; }
	if [ -n "$out" ]; then echo "$unit:"; echo "$out"; exit 1; fi
	echo "verify-units: $unit ok"
done
