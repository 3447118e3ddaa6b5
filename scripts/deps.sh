#!/bin/sh
# Installs what building and testing need on a fresh Debian or Ubuntu
# machine that has Go: a C compiler for the race detector (go test -race
# needs cgo), and PortAudio's development files with pkg-config, so the
# audio driver (hal/audio, tag portaudio) is built and tested. With
# "cross", also what the cross builds need: qemu-user-static to run the
# arm binaries and their tests, Debian's cross compilers for arm64 and
# armhf, and those architectures' PortAudio and ALSA development files
# (multiarch: dpkg --add-architecture). Quiet and quick when everything
# is there.
#
#   scripts/deps.sh          for make test
#   scripts/deps.sh cross    for make cross
set -eu

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

missing=""
arches=""
if [ "${1:-}" = cross ]; then
	command -v qemu-aarch64-static >/dev/null 2>&1 || missing="$missing qemu-user-static"
	for a in arm64:aarch64-linux-gnu armhf:arm-linux-gnueabihf; do
		arch=${a%%:*} triplet=${a#*:}
		# The compiler with its C library (only recommended by the compiler,
		# so named here), and the architecture's PortAudio and ALSA
		# development files beside the libraries they link to.
		command -v "$triplet-gcc" >/dev/null 2>&1 || missing="$missing gcc-$triplet"
		[ -e "/usr/$triplet/lib/libc.so" ] || missing="$missing libc6-dev-$arch-cross"
		if ! PKG_CONFIG_LIBDIR=/usr/lib/$triplet/pkgconfig pkg-config --exists portaudio-2.0 alsa 2>/dev/null; then
			missing="$missing portaudio19-dev:$arch libasound2-dev:$arch"
			dpkg --print-foreign-architectures | grep -qx "$arch" || arches="$arches $arch"
		fi
	done
fi
command -v gcc >/dev/null 2>&1 || missing="$missing gcc libc6-dev"
command -v git >/dev/null 2>&1 || missing="$missing git"
command -v file >/dev/null 2>&1 || missing="$missing file"
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
pkg-config --exists portaudio-2.0 2>/dev/null || missing="$missing portaudio19-dev"

[ -z "$missing" ] && exit 0

for arch in $arches; do
	echo "deps: adding the $arch architecture for its development files" >&2
	$SUDO dpkg --add-architecture "$arch"
done
echo "deps: installing$missing" >&2
# A mirror caught mid-sync fails one index and apt-get update with it; what
# is needed may well be in the indexes it has, so install anyway.
$SUDO apt-get update -qq || echo "deps: apt-get update had errors; installing from the indexes there are" >&2
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >&2
