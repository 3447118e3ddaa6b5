#!/bin/sh
# Installs what building and testing need on a fresh Debian or Ubuntu
# machine that has Go: a C compiler for the race detector (go test -race
# needs cgo), PortAudio's development files with pkg-config, so the
# audio driver (hal/audio, tag portaudio) is built and tested, and
# OpenSSH's server and client for the agent's tests through a real sshd. With
# "cross", also what the cross builds need: qemu-user-static to run the
# arm binaries and their tests, Debian's cross compilers for arm64 and
# armhf, and those architectures' PortAudio and ALSA development files
# (multiarch: dpkg --add-architecture). With "lab", also what the hardware
# lab (scripts/lab) needs on Debian bookworm: QEMU, a static busybox with
# modprobe, cpio, e2fsprogs for the VM's disk, and what building gpio-sim
# against Debian's 6.1 kernel headers runs (make, gcc-12, which the
# headers name as their compiler, xz, kmod's depmod, and libelf for the
# headers' objtool). With "bench", also what the benchmarks under
# scripts/bench run beside the body: Debian's python3 with OpenCV and
# numpy (motion.sh's peer), bc, GNU time (ledger-open.sh) and taskset.
# Quiet and quick when everything is there.
#
#   scripts/deps.sh            for make test
#   scripts/deps.sh cross      for make cross
#   scripts/deps.sh lab        for make lab (scripts/lab/run.sh runs it)
#   scripts/deps.sh bench      for make bench and make bench-smoke
#   scripts/deps.sh lab-arm64  and for make lab LAB_ARCH=arm64 (armv7 alike):
#                              QEMU's ARM machines, the architecture's
#                              cross compiler, C library and PortAudio
#   scripts/deps.sh -n lab     lists what is missing and what apt-get
#                              would install for it (apt-get --simulate),
#                              and changes nothing
set -eu

dry=""
if [ "${1:-}" = -n ]; then
	dry=yes
	shift
fi
what=${1:-}
case $what in
"" | bench | cross | lab | lab-arm64 | lab-armv7) ;;
*) echo "deps: unknown set \"$what\" (none, bench, cross, lab, lab-arm64 or lab-armv7)" >&2; exit 2 ;;
esac

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# installed says whether a package (a library, which has no command to
# look for) is installed.
installed() { dpkg-query -W -f '${Status}' "$1" 2>/dev/null | grep -q ' installed$'; }

# The ToBe adapter's tests (make test-adapter) need Node >= 20 with its npm,
# which Debian's own packages may not give (bookworm's Node is 18): they are
# looked for, not installed. The tests with the official MCP clients
# (awareness/agent/clients) need Node 22 as well: npm ci installs it there
# from the npm registry, with the rest of that package's lockfile.
if [ -z "$what" ] && ! { node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' 2>/dev/null && command -v npm >/dev/null 2>&1; }; then
	echo "deps: the adapter's tests need Node >= 20 with npm (nodejs.org or NodeSource); not found" >&2
	[ -n "$dry" ] || exit 1
fi

missing=""
arches=""
# The cross builds' targets; an ARM lab needs its own architecture's.
case $what in
cross) targets="arm64:aarch64-linux-gnu armhf:arm-linux-gnueabihf" ;;
lab-arm64) targets="arm64:aarch64-linux-gnu" ;;
lab-armv7) targets="armhf:arm-linux-gnueabihf" ;;
*) targets="" ;;
esac
if [ -n "$targets" ]; then
	command -v qemu-aarch64-static >/dev/null 2>&1 || missing="$missing qemu-user-static"
	for a in $targets; do
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
# An ARM lab: QEMU's ARM machines (both in qemu-system-arm); the kernel
# packages of the architecture, which prepare.sh downloads, need it added
# (the loop above adds it with its development files).
case $what in
lab-arm64) command -v qemu-system-aarch64 >/dev/null 2>&1 || missing="$missing qemu-system-arm" ;;
lab-armv7) command -v qemu-system-arm >/dev/null 2>&1 || missing="$missing qemu-system-arm" ;;
esac
if [ "$what" = lab ]; then
	command -v qemu-system-x86_64 >/dev/null 2>&1 || missing="$missing qemu-system-x86"
	# The initramfs has no C library: its busybox must be static.
	if ! { [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 && /bin/busybox --list 2>/dev/null | grep -qx modprobe; }; then
		missing="$missing busybox-static"
	fi
	command -v cpio >/dev/null 2>&1 || missing="$missing cpio"
	command -v mkfs.ext4 >/dev/null 2>&1 || [ -x /sbin/mkfs.ext4 ] || missing="$missing e2fsprogs"
	command -v make >/dev/null 2>&1 || missing="$missing make"
	command -v gcc-12 >/dev/null 2>&1 || missing="$missing gcc-12"
	command -v xz >/dev/null 2>&1 || missing="$missing xz-utils"
	command -v depmod >/dev/null 2>&1 || [ -x /sbin/depmod ] || missing="$missing kmod"
	installed libelf1 || missing="$missing libelf1"
	# The system lab's Debian root (scripts/lab/system.sh).
	command -v mmdebstrap >/dev/null 2>&1 || missing="$missing mmdebstrap"
fi
if [ "$what" = bench ]; then
	# Debian's python3, where python3-opencv installs cv2 (another python3
	# may be first on PATH).
	/usr/bin/python3 -c 'import cv2, numpy' 2>/dev/null || missing="$missing python3-opencv python3-numpy"
	command -v bc >/dev/null 2>&1 || missing="$missing bc"
	[ -x /usr/bin/time ] || missing="$missing time"
	command -v taskset >/dev/null 2>&1 || missing="$missing util-linux"
fi
command -v gcc >/dev/null 2>&1 || missing="$missing gcc libc6-dev"
command -v git >/dev/null 2>&1 || missing="$missing git"
command -v file >/dev/null 2>&1 || missing="$missing file"
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
pkg-config --exists portaudio-2.0 2>/dev/null || missing="$missing portaudio19-dev"
# The agent's tests through a real sshd on loopback (a forced command), and
# its client.
[ -x /usr/sbin/sshd ] || missing="$missing openssh-server"
command -v ssh >/dev/null 2>&1 || missing="$missing openssh-client"
# The uplink's tests against a real Mosquitto (started by the tests on a
# free port), and its clients for a look at what the body publishes.
[ -x /usr/sbin/mosquitto ] || missing="$missing mosquitto"
command -v mosquitto_sub >/dev/null 2>&1 || missing="$missing mosquitto-clients"
# systemd-analyze, which verifies the unit and scores its hardening in the
# tests.
command -v systemd-analyze >/dev/null 2>&1 || missing="$missing systemd"
# sox, with its Ogg Vorbis reader, converts the recorded speech and noise
# the voice detector's test is judged by (scripts/voice-corpus.sh).
command -v sox >/dev/null 2>&1 || missing="$missing sox"
[ -n "$(find /usr/lib -name libsox_fmt_vorbis.so 2>/dev/null | head -1)" ] || missing="$missing libsox-fmt-base"
# Home Assistant's template engine, for the test of the discovery
# templates against the state documents.
python3 -c 'import jinja2' 2>/dev/null || missing="$missing python3-jinja2"

if [ -n "$dry" ]; then
	if [ -z "$missing" ]; then
		echo "deps: nothing missing${what:+ for $what}"
		exit 0
	fi
	for arch in $arches; do
		echo "deps: would add the $arch architecture"
	done
	echo "deps: missing${what:+ for $what}:$missing"
	# What apt-get would do with them, from the indexes there are: with an
	# architecture still to be added it cannot resolve its packages.
	# shellcheck disable=SC2086
	apt-get install --simulate --no-install-recommends $missing
	exit
fi

[ -z "$missing" ] && exit 0

for arch in $arches; do
	echo "deps: adding the $arch architecture for its development files" >&2
	$SUDO dpkg --add-architecture "$arch"
done
echo "deps: installing$missing" >&2
# Another build may be installing at the same time: wait for its lock.
apt="$SUDO apt-get -o DPkg::Lock::Timeout=600"
# A mirror caught mid-sync fails one index and apt-get update with it; what
# is needed may well be in the indexes it has, so install anyway.
$apt update -qq || echo "deps: apt-get update had errors; installing from the indexes there are" >&2
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $apt install -y -qq --no-install-recommends $missing >&2
