#!/bin/sh
# Cross builds for the boards, each with the audio driver: PortAudio
# through cgo (tag portaudio), built with Debian's cross compiler against
# the architecture's multiarch portaudio19-dev (scripts/deps.sh cross
# installs them). For each target it prints the binary's file type, runs
# hal/audio's cgo tests under qemu-user, the pure-Go tests (CGO_ENABLED=0)
# too on 32-bit ARM, and runs the binary's version, audio line included.
# The pure-Go tests of a 64-bit target are only compiled here: their
# words and alignment are amd64's, where make test runs them natively
# with -race (qemu-user does not emulate ARM's weaker memory order
# either, so an emulated run finds nothing more), and the hardware lab
# runs the arm64 kernel's. On armv7, ints and pointers are 32 bits and
# 64-bit atomics need alignment: that is where emulation finds bugs.
#
#   scripts/cross.sh linux/arm64 linux/arm/7 linux/amd64
#
# Environment: GO (go), LDFLAGS (the -X flags of version, commit and
# board; buildTags is added here), OUT (dist), TESTS (yes; no builds the
# binaries alone, as make dist does).
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}
LDFLAGS=${LDFLAGS:-}
OUT=${OUT:-dist}
TESTS=${TESTS:-yes}
mkdir -p "$OUT"

# libjack, which PortAudio loads, keeps a Berkeley DB in /dev/shm/jack_db-UID.
# One made by another architecture's libdb makes an emulated libjack print
# "Build signature doesn't match environment" on stderr, and an emulated
# run has no business in the host's JACK files anyway: where a mount
# namespace can be had, each emulated test binary gets a /dev/shm of its own.
private_shm=""
if unshare --mount --map-root-user sh -c 'mount -t tmpfs tmpfs /dev/shm' 2>/dev/null; then
	private_shm=yes
fi

for t in "$@"; do
	os=${t%%/*} rest=${t#*/}
	arch=${rest%%/*} arm=""
	[ "$arch" = arm ] && arm=${rest#*/}
	case $arch in
	arm64) triplet=aarch64-linux-gnu q=qemu-aarch64-static ;;
	arm) triplet=arm-linux-gnueabihf q=qemu-arm-static ;;
	amd64) triplet=x86_64-linux-gnu q="" ;;
	*) echo "cross: no cross compiler known for $arch" >&2; exit 1 ;;
	esac
	out=$OUT/tobe-body-$os-$arch${arm:+v$arm}
	log=$OUT/test-$arch$arm
	# The emulator finds the architecture's loader and libraries (multiarch,
	# under /lib and /usr/lib/$triplet) from the root.
	run=""
	[ -n "$q" ] && run="$q -L /"
	cgo="CC=$triplet-gcc PKG_CONFIG_LIBDIR=/usr/lib/$triplet/pkgconfig"
	target="GOOS=$os GOARCH=$arch${arm:+ GOARM=$arm}"

	echo "cross $t -> $out (cgo, tag portaudio, CC=$triplet-gcc)"
	# shellcheck disable=SC2086
	env -u GOARM CGO_ENABLED=1 $target $cgo \
		"$GO" build -trimpath -tags portaudio -ldflags "$LDFLAGS -X main.buildTags=portaudio" -o "$out" ./cmd/tobe-body
	echo "  file:    $(file -b "$out")"
	[ "$TESTS" = no ] && continue

	if [ -n "$q" ]; then
		exec_pure=$q
		[ "$arch" = arm ] || exec_pure=true # 64-bit: compiled only (see above)
		exec_cgo="$run"
		[ -n "$private_shm" ] && exec_cgo="unshare --mount --map-root-user sh -c 'mount -t tmpfs tmpfs /dev/shm && exec $run \"\$@\"' sh"
	else
		exec_pure=true exec_cgo=true # compiled only; make test runs them
	fi
	# shellcheck disable=SC2086
	# TOBE_BODY_EMULATED: the tests against a real broker process time
	# what a machine does; they run natively in make test.
	env -u GOARM CGO_ENABLED=0 TOBE_BODY_EMULATED=1 $target \
		"$GO" test -count=1 -exec "$exec_pure" ./... >"$log-pure.log" 2>&1 ||
		{ cat "$log-pure.log"; echo "cross $t: pure-Go tests failed" >&2; exit 1; }
	# shellcheck disable=SC2086
	env -u GOARM CGO_ENABLED=1 $target $cgo \
		"$GO" test -count=1 -v -tags portaudio -exec "$exec_cgo" ./hal/audio/ >"$log-audio.log" 2>&1 ||
		{ cat "$log-audio.log"; echo "cross $t: hal/audio cgo tests failed" >&2; exit 1; }
	if [ -n "$q" ]; then
		if [ "$exec_pure" = true ]; then
			echo "  tests:   pure-Go compiled (CGO_ENABLED=0): 64-bit, run natively by make test"
		else
			echo "  tests:   $(grep -c '^ok' "$log-pure.log") packages ok (CGO_ENABLED=0) under $q"
		fi
		echo "  tests:   hal/audio with PortAudio (cgo): $(grep -c '^--- PASS' "$log-audio.log") passed, $(grep -c '^--- FAIL' "$log-audio.log") failed, $(grep -c '^--- SKIP' "$log-audio.log") skipped under $run${private_shm:+ (private /dev/shm)}"
	else
		echo "  tests:   compiled, pure-Go and hal/audio with PortAudio (make test runs them natively)"
	fi
	echo "  version${run:+ (under $run)}:"
	# shellcheck disable=SC2086
	$run "$out" version | sed 's/^/    /'
done
