#!/bin/sh
# Motion detection throughput, side by side in one run on the same frames:
# package sense/motion against the same algorithm in Python with OpenCV
# (scripts/bench/motion_opencv.py, step for step: the same downscale by 8
# with area averaging, contrast, 3x3 Gaussian blur, illumination median,
# running-average background, absdiff, threshold, calibration, 3x3 dilation,
# 8-connected components with stats, area filter, zone test, hysteresis).
#
#  - installs python3-opencv with apt-get when Debian's python3 lacks cv2
#    (scripts/deps.sh bench);
#  - renders one clip (640x480 YUYV, 30 fps, 300 frames = 184 MB: two
#    objects crossing two zones over sensor noise, then a light switched
#    brighter) into a temporary directory, read into memory by both;
#  - pins both to one core (taskset -c $MOTION_CORE, default 1), Go with
#    GOMAXPROCS=1, OpenCV with cv2.setNumThreads(1), and runs them in turn,
#    $ROUNDS times (default 3), each timing $PASSES passes over the clip
#    (default 3) after an untimed one that records what it saw;
#  - prints each round's frames per second by wall time and by CPU time
#    (the machine may be shared: CPU time leaves out what other processes
#    took from the core), the best of the rounds and the Go/OpenCV ratios,
#    the Go benchmark BenchmarkProcess640x480YUYV with its allocations per
#    frame, and whether both implementations saw the same thing (motion
#    frames, regions, calibrating frames, transitions).
#
#   scripts/bench/motion.sh
#   ROUNDS=5 PASSES=2 MOTION_CORE=0 scripts/bench/motion.sh
#   BENCH_SHORT=1 scripts/bench/motion.sh   # one round of one pass, the Go benchmark for 0.2 s
#
# Goals: at least 2x OpenCV-Python and 3000 frames/s on one core, 0 allocs/op.
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
rounds=3 passes=3 benchtime=3s
short && rounds=1 passes=1 benchtime=0.2s
rounds=${ROUNDS:-$rounds}
passes=${PASSES:-$passes}
core=${MOTION_CORE:-1}
py=/usr/bin/python3 # Debian's, where python3-opencv installs cv2
hostgo="env -u GOOS -u GOARCH -u GOARM -- go"

scripts/deps.sh bench

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
$hostgo build -o "$dir/motionbench" ./scripts/bench/motionbench
$hostgo test -c -o "$dir/motion.test" ./sense/motion
"$dir/motionbench" write "$dir"
echo "clip: 640x480 YUYV, 300 frames, downscale 8 (80x60 cells), zones left and right; core $core"

for r in $(seq "$rounds"); do
	GOMAXPROCS=1 taskset -c "$core" "$dir/motionbench" run "$dir" -passes "$passes" | tee -a "$dir/rounds"
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 taskset -c "$core" "$py" scripts/bench/motion_opencv.py "$dir" --passes "$passes" | tee -a "$dir/rounds"
done

echo
GOMAXPROCS=1 taskset -c "$core" "$dir/motion.test" -test.run '^$' -test.bench 'BenchmarkProcess640x480YUYV$' -test.benchtime "$benchtime" -test.benchmem | grep '^Benchmark' | tee "$dir/gobench"

echo
awk -v rounds="$rounds" '
{
	impl = $1
	for (i = 2; i < NF; i++) {
		if ($(i+1) == "frames/s" && $(i+2) ~ /^wall/) wall = $i
		if ($(i+1) == "frames/s" && $(i+2) ~ /^cpu/) cpu = $i
	}
	if (wall > bestwall[impl]) bestwall[impl] = wall
	if (cpu > bestcpu[impl]) bestcpu[impl] = cpu
}
END {
	printf "best of %d rounds, frames/s on one core:  wall: go %.0f, opencv %.0f, ratio %.2fx   cpu: go %.0f, opencv %.0f, ratio %.2fx\n",
		rounds, bestwall["go"], bestwall["opencv"], bestwall["go"] / bestwall["opencv"],
		bestcpu["go"], bestcpu["opencv"], bestcpu["go"] / bestcpu["opencv"]
	printf "motion.fps.wall %.0f frames/s %.0f ratio>=2 opencv-python\n", bestwall["go"], bestwall["opencv"] > figs
	printf "motion.fps.cpu %.0f frames/s %.0f ratio>=2 opencv-python\n", bestcpu["go"], bestcpu["opencv"] > figs
}' figs="$dir/figures" "$dir/rounds"
awk '{ for (i = 2; i < NF; i++) { if ($(i+1) == "frames/s") fps = $i; if ($(i+1) == "allocs/op") allocs = $i; if ($(i+1) == "B/op") bytes = $i } }
END {
	printf "go benchmark: %s frames/s, %s allocs/op, %s B/op\n", fps, allocs, bytes
	printf "motion.bench.fps %s frames/s - value>=3000\n", fps >> figs
	printf "motion.bench.allocs %s allocs/op - value<=0\n", allocs >> figs
}' figs="$dir/figures" "$dir/gobench"
figures <"$dir/figures"
echo "goals: >= 2x OpenCV-Python, >= 3000 frames/s, 0 allocs/op"
echo
"$py" scripts/bench/motion_opencv.py --compare "$dir"
