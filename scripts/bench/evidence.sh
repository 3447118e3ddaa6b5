#!/bin/sh
# What capturing evidence costs the body (issue 33), by
# scripts/bench/evidencebench:
#  - request to JPEG ready: camera.snapshot's action asked for the whole
#    frame of the sim camera (640x480 YUYV at 30 frames a second, in
#    real time) through the camera channel as the daemon runs it,
#    SNAPSHOTS times (200) at random moments; the time to the JPEG in
#    hand (the next frame copied, encoded) and to it kept (written,
#    synced, recorded). Goal: ready p99 <= 100 ms on this machine.
#  - the camera channel's motion analysis in frames per second on a
#    free-running 640x480 YUYV camera, MOTION_S seconds (5) without
#    snapshots and as long with one a second, ROUNDS rounds (3)
#    alternating; the medians. Goal: with >= 0.95x without.
#  - memory: what a microphone's ring holds (10 s at 16 kHz mono, the
#    default), and what one capture in flight allocates: a 30 s clip
#    (10 s from the ring and 20 s after, through the channel's tap, and
#    its WAV) and a 640x480 snapshot (the frame's copy, the image
#    encoded, the JPEG). Shown.
#
#   scripts/bench/evidence.sh
#   BENCH_SHORT=1 scripts/bench/evidence.sh   # 20 snapshots, one round of a second
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
n=200 secs=5 rounds=3
short && n=20 secs=1 rounds=1
n=${SNAPSHOTS:-$n}
secs=${MOTION_S:-$secs}
rounds=${ROUNDS:-$rounds}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
env -u GOOS -u GOARCH -u GOARM -- go build -o "$out/evidencebench" ./scripts/bench/evidencebench

"$out/evidencebench" snapshot -n "$n" | tee "$out/snap"
"$out/evidencebench" motion -seconds "$secs" -rounds "$rounds" | tee "$out/motion"
"$out/evidencebench" memory | tee "$out/memory"

echo
awk '
/^ready p50/ { print "evidence.snapshot.ready_p50", $3, "ms"; print "evidence.snapshot.ready_p99", $5, "ms - value<=100"; print "evidence.snapshot.kept_p99", $11, "ms" }
' "$out/snap" | figures
awk '/^motion: median/ { print "evidence.motion.fps_with_snapshots", $6, "frames/s", $3, "ratio>=0.95", "no-snapshots" }' "$out/motion" | figures
awk '/^memory:/ { printf "evidence.memory.ring %.1f KiB\nevidence.memory.clip_in_flight %.1f KiB\nevidence.memory.snapshot_in_flight %.1f KiB\n", $11/1024, $20/1024, $25/1024 }' "$out/memory" | figures
