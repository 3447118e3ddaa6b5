#!/bin/sh
# Installs what building and testing need on a fresh Debian or Ubuntu
# machine that has Go: a C compiler for the race detector (go test -race
# needs cgo). With "cross", also qemu-user-static, so the cross-built tests
# run under emulation. Quiet and quick when everything is there.
#
#   scripts/deps.sh          for make test
#   scripts/deps.sh cross    for make cross
set -eu

missing=""
if [ "${1:-}" = cross ]; then
	command -v qemu-aarch64-static >/dev/null 2>&1 || missing="$missing qemu-user-static"
fi
command -v gcc >/dev/null 2>&1 || missing="$missing gcc libc6-dev"
command -v git >/dev/null 2>&1 || missing="$missing git"
command -v file >/dev/null 2>&1 || missing="$missing file"

[ -z "$missing" ] && exit 0

echo "deps: installing$missing" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
