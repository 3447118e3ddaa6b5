#!/bin/sh
# The hardware lab's figures side by side, one column per machine, from
# the console logs the lab keeps (LAB_LOG=FILE make lab LAB_ARCH=...):
# the kernel booted, the tests, GPIO edge latency of the driver against a
# bare reader, the e-stop against a bare reader, the tripwire's stop,
# camera frames and sequence gaps, input's SYN_DROPPED recovery, the
# privacy switch's release of the camera, a clip's tone, and the
# loopback tone's level. A figure a log does not hold is shown as "-".
#
#   scripts/lab/figures.sh amd64=lab-amd64.log arm64=lab-arm64.log armv7=lab-armv7.log
set -eu
[ $# -gt 0 ] || { echo "usage: scripts/lab/figures.sh NAME=LOG..." >&2; exit 2; }

# first LOG SED: the first line of LOG the sed expression prints.
first() { sed -n "$2" "$1" | head -n 1; }

names="" logs=""
for a in "$@"; do
	names="$names ${a%%=*}"
	logs="$logs ${a#*=}"
	[ -r "${a#*=}" ] || { echo "figures: ${a#*=}: not readable" >&2; exit 1; }
done

header="| |"
sep="|---|"
for n in $names; do
	header="$header $n |"
	sep="$sep---|"
done
echo "$header"
echo "$sep"

# line TITLE SED: a row, each log's cell the first line its sed prints.
line() {
	printf '| %s |' "$1"
	for l in $logs; do
		v=$(first "$l" "$2")
		printf ' %s |' "${v:--}"
	done
	printf '\n'
}

line "kernel" 's/^lab: devices ready on \(.*\)$/\1/p'
printf '| lab tests |'
for l in $logs; do
	printf ' %s passed, %s failed |' "$(grep -c -- '^--- PASS' "$l" || true)" "$(grep -c -- '^--- FAIL' "$l" || true)"
done
printf '\n'
line "GPIO edge, driver p50 / p99" 's/.*edge latency, pull written.*driver p50 \([^ ]*\) p99 \([^;]*\);.*/\1 \/ \2/p'
line "GPIO edge, bare read(2) p50 / p99" 's/.*edge latency, pull written.*bare read(2) p50 \([^ ]*\) p99 \([^;]*\);.*/\1 \/ \2/p'
line "GPIO edge, ratio p50 / p99" 's/.*edge latency, pull written.*ratio p50 \([^ ]*\) p99 \(.*\)$/\1 \/ \2/p'
line "e-stop idle, edge -> outputs safe p50 / p99" 's/.*estop latency: idle.*read back p50 \([^ ]*\) p99 \([^ ]*\) max.*/\1 \/ \2/p'
line "e-stop idle, bare read(2) p50 / p99" 's/.*estop latency: idle.*bare read(2) edge -> returned p50 \([^ ]*\) p99 \([^ ]*\) max.*/\1 \/ \2/p'
line "e-stop idle, p99 ratio to bare" 's/.*estop latency: idle.*p99 ratio \([^ ]*\) .*/\1/p'
line "e-stop capped load, p99 ratio" 's/.*estop latency: capped.*p99 ratio \([^ ]*\) .*/\1/p'
line "e-stop uncapped load, p99 ratio" 's/.*estop latency: uncapped.*p99 ratio \([^ ]*\) .*/\1/p'
line "tripwire stop, edge -> 4 outputs safe" 's/.*stop (reconciled false): edge -> 4 outputs safe and read back in \(.*\)$/\1/p'
line "e-stop trip, system calls of the tripwire" 's/.*trip syscalls: tripwire thread, [0-9]* outputs: \([0-9]*\) in all: \(.*\)$/\1: \2/p'
line "e-stop trip, system calls of the goroutine" 's/.*trip syscalls: e-stop goroutine, [0-9]* outputs: \([0-9]*\) in all: \(.*\)$/\1: \2/p'
line "tripwire thread" 's/.*tripwire_lab_test.go:[0-9]*: tripwire thread: \(.*\)$/\1/p'
line "camera, 300 frames 640x480" 's/.*300 frames of 640x480 YUYV: \([0-9.]* frames\/s\) over [^;]*; \([0-9]*\) lost before dequeue.*/\1, \2 sequence gaps/p'
line "input, resyncs after SYN_DROPPED" 's/.*resyncs after the flood: \(.*\)$/\1/p'
line "privacy switch -> camera closed (goal 100 ms)" 's/.*the privacy switch: [^ ]* closed by the body \([^ ]*\) after.*/\1/p'
line "clip of a 1 kHz tone" 's/.*the clip: .*, a tone of \([0-9.]* Hz\).*/\1/p'
line "loopback tone, level (want -6.0 dBFS)" 's/.*lab_test.go:[0-9]*: level \([-0-9.]* dBFS\) (error \([-+0-9.]* dB\).*/\1 (error \2)/p'
line "sense, audio.level RMS in the tone" 's/.*audio.level RMS of the seconds inside the tone: \(\[[^]]*\] dBFS\).*/\1/p'
