#!/usr/bin/python3
"""The OpenCV half of scripts/bench/motion.sh: package motion's algorithm,
step for step, in Python with OpenCV and numpy.

    motion_opencv.py DIR [--passes P]   time it on DIR/clip.yuyv
    motion_opencv.py --compare DIR      compare DIR/go.txt with DIR/py.txt

The clip and the detector's configuration come from DIR/clip.json (written
by motionbench). Like motionbench, it processes the clip once to write what
it saw to DIR/py.txt (the same line format as go.txt), then P times, timed,
and prints frames per second by wall time and by CPU time. OpenCV runs on
one thread (cv2.setNumThreads(1)); the caller pins the process to one core.

The steps are those of the package documentation of sense/motion:

  1. luma out of YUYV (cv2.cvtColor, COLOR_YUV2GRAY_YUYV), then an area
     downscale by the same factor (cv2.resize, INTER_AREA: with a whole
     factor, the mean of each square, rounded half to even);
  2. contrast: the cells' standard deviation (cv2.meanStdDev), tracked
     with a running average; differences count 32/s times, within
     [0.25, 4];
  3. a 3x3 Gaussian blur (cv2.GaussianBlur, sigma 0: [1 2 1]/4 each way,
     BORDER_REFLECT_101);
  4. illumination: the median (np.median) of the ratios frame/background
     of the cells at even rows and columns that are between 8 and 250 in
     both; the background relit by it, at most 255;
  5. cv2.absdiff against the relit background, cv2.threshold at the larger
     of the contrast's threshold and six times the noise (the median
     absolute difference over the cells of step 4);
  6. calibration when more than calibrate_above of the cells changed or
     the light changed by more than 25 % within about a second; otherwise
     cv2.accumulateWeighted into the relit background;
  7. cv2.dilate with a 3x3 square, cv2.connectedComponentsWithStats
     (8-connected), regions below min_area dropped;
  8. zone test: cv2.bitwise_and of the kept regions with each zone's cells
     (cell centres inside the polygon), cv2.countNonZero and
     cv2.boundingRect;
  9. started after start_frames frames with motion in a row, ended after
     end_after seconds without.
"""

import json
import math
import os
import sys
import time

import cv2
import numpy as np

LIGHT_WINDOW = 1.0  # seconds
LIGHT_LIMIT = 0.22314355131420976  # ln 1.25


def inside(poly, qx, qy):
    """Even-odd rule, exactly as package motion's inside."""
    res = False
    j = len(poly) - 1
    for i in range(len(poly)):
        ax, ay = poly[i]
        bx, by = poly[j]
        if (ay > qy) != (by > qy) and qx < (bx - ax) * (qy - ay) / (by - ay) + ax:
            res = not res
        j = i
    return res


def contrast_gain(sigma):
    if sigma <= 8:
        return 4.0
    return max(32 / sigma, 0.25)


class Zone:
    def __init__(self, name, mask):
        self.name = name
        self.mask = mask
        self.active = False
        self.run = 0
        self.first = 0
        self.last = 0
        self.frames = 0
        self.peak = 0


class Detector:
    def __init__(self, cfg):
        self.W, self.H = cfg["width"], cfg["height"]
        f = cfg["downscale"]
        self.f = f
        self.cw, self.ch = self.W // f, self.H // f
        n = self.cw * self.ch
        self.n = n
        self.thr = max(2, round(64 * (1 - cfg["sensitivity"])))
        self.min_cells = max(1, math.ceil(cfg["min_area"] * n - 1e-9))
        self.calib_cells = int(cfg["calibrate_above"] * n)
        self.start_frames = cfg["start_frames"]
        self.end_after_ns = round(cfg["end_after_s"] * 1e9)
        self.bg_tau = cfg["background_s"]
        self.norm_tau = 5 * self.bg_tau
        self.calibration_ns = round(cfg["calibration_s"] * 1e9)
        self.kernel = np.ones((3, 3), np.uint8)
        self.zones = []
        for z in cfg["zones"]:
            m = np.zeros((self.ch, self.cw), np.uint8)
            for cy in range(self.ch):
                for cx in range(self.cw):
                    if inside(z["polygon"], (cx + 0.5) / self.cw, (cy + 0.5) / self.ch):
                        m[cy, cx] = 255
            self.zones.append(Zone(z["name"], m))
        self.seeded = False
        self.last = 0
        self.calib_until = 0
        self.sigma = 0.0
        self.drift = 0.0
        self.acc = None
        # What the last frame showed.
        self.regions = self.cells = self.changed = 0
        self.calibrating = False

    def process(self, frame, t):
        """frame: an (H, W, 2) uint8 YUYV view; t: nanoseconds. Returns
        the transitions as (kind, zone) pairs."""
        self.regions = self.cells = self.changed = 0
        self.calibrating = False
        f = self.f
        y = cv2.cvtColor(frame, cv2.COLOR_YUV2GRAY_YUYV)
        if y.shape != (self.ch * f, self.cw * f):
            y = y[: self.ch * f, : self.cw * f]
        small = cv2.resize(y, (self.cw, self.ch), interpolation=cv2.INTER_AREA)
        sigma = cv2.meanStdDev(small)[1][0, 0]
        blur = cv2.GaussianBlur(small, (3, 3), 0)

        first = not self.seeded
        calibrating = not first and t < self.calib_until
        dt = (t - self.last) / 1e9
        self.last = t
        if first or calibrating:
            self.sigma = sigma
        else:
            self.sigma += (1 - math.exp(-dt / self.norm_tau)) * (sigma - self.sigma)
        blurf = blur.astype(np.float32)
        if first:
            self.acc = blurf
            self.seeded = True
            self.drift = 0.0
            return self.update(t, None)

        acc_s, blur_s = self.acc[::2, ::2], blur[::2, ::2]
        valid = (acc_s >= 8) & (acc_s <= 250) & (blur_s >= 8) & (blur_s <= 250)
        ratios = blur_s[valid].astype(np.float32) / acc_s[valid]
        light = np.float32(np.median(ratios)) if ratios.size >= self.n // 16 else np.float32(1)
        pred_s = np.minimum(acc_s * light, np.float32(255))
        noise = np.float32(np.median(np.abs(blur_s.astype(np.float32) - pred_s)))
        limit = np.float32(max(self.thr / contrast_gain(self.sigma), 6 * float(noise)))
        self.drift = self.drift * math.exp(-dt / LIGHT_WINDOW) + math.log(float(light))
        alpha = float(np.float32(1 - math.exp(-dt / self.bg_tau)))

        pred = np.minimum(self.acc * light, np.float32(255))
        diff = cv2.absdiff(blurf, pred)
        mask = cv2.threshold(diff, float(limit), 255, cv2.THRESH_BINARY)[1].astype(np.uint8)
        changed = cv2.countNonZero(mask)
        self.changed = changed
        sudden = changed > self.calib_cells or abs(self.drift) > LIGHT_LIMIT
        if calibrating or sudden:
            if sudden:
                self.calib_until = t + self.calibration_ns
            self.calibrating = True
            self.sigma = sigma
            self.acc = blurf
            return self.update(t, None)
        cv2.accumulateWeighted(blur, pred, alpha)
        self.acc = pred
        if changed == 0:
            return self.update(t, None)

        dil = cv2.dilate(mask, self.kernel)
        nlab, labels, stats, _ = cv2.connectedComponentsWithStats(dil, connectivity=8)
        areas = stats[1:, cv2.CC_STAT_AREA]
        keep = areas >= self.min_cells
        self.regions = int(np.count_nonzero(keep))
        self.cells = int(areas[keep].sum())
        if self.regions == 0:
            return self.update(t, None)
        lut = np.zeros(nlab, np.uint8)
        lut[1:][keep] = 255
        moving = lut[labels]
        counts = []
        for z in self.zones:
            zm = cv2.bitwise_and(moving, z.mask)
            c = cv2.countNonZero(zm)
            counts.append((c, cv2.boundingRect(zm) if c else None))
        return self.update(t, counts)

    def update(self, t, counts):
        out = []
        for i, z in enumerate(self.zones):
            c = counts[i][0] if counts else 0
            if c == 0:
                if not z.active:
                    z.run = 0
                elif t - z.last >= self.end_after_ns:
                    out.append(("ended", z.name))
                    z.active, z.run = False, 0
                continue
            if not z.active and z.run == 0:
                z.first, z.frames, z.peak = t, 0, 0
            z.last = t
            z.frames += 1
            z.peak = max(z.peak, c)
            if z.active:
                continue
            z.run += 1
            if z.run >= self.start_frames:
                z.active = True
                out.append(("started", z.name))
        return out


def bench(d, passes):
    with open(os.path.join(d, "clip.json")) as fh:
        cfg = json.load(fh)
    W, H, fps = cfg["width"], cfg["height"], cfg["fps"]
    clip = np.fromfile(os.path.join(d, "clip.yuyv"), np.uint8)
    size = W * H * 2
    if clip.size == 0 or clip.size % size:
        sys.exit(f"clip.yuyv is {clip.size} bytes, not a whole number of {size}-byte frames")
    n = clip.size // size
    frames = clip.reshape(n, H, W, 2)
    base = 3600 * 10**9
    times = [base + i * 10**9 // fps for i in range(n)]

    lines = []
    det = Detector(cfg)
    for i in range(n):
        out = det.process(frames[i], times[i])
        lines.append(f"f {i} {det.regions} {det.cells} {det.changed} {int(det.calibrating)}\n")
        for kind, zone in out:
            lines.append(f"t {i} {kind} {zone}\n")
    with open(os.path.join(d, "py.txt"), "w") as fh:
        fh.writelines(lines)

    wall = cpu = 0.0
    for _ in range(passes):
        det = Detector(cfg)
        process = det.process
        c0, w0 = time.process_time(), time.perf_counter()
        for i in range(n):
            process(frames[i], times[i])
        wall += time.perf_counter() - w0
        cpu += time.process_time() - c0
    total = n * passes
    print(f"opencv  {n} frames x {passes} passes: {total / wall:8.0f} frames/s wall, {total / cpu:8.0f} frames/s cpu"
          f"  (OpenCV {cv2.__version__}, numpy {np.__version__}, {cv2.getNumThreads()} thread)")


def load(path):
    frames, trans = {}, []
    with open(path) as fh:
        for line in fh:
            p = line.split()
            if p[0] == "f":
                frames[int(p[1])] = tuple(int(x) for x in p[2:])
            elif p[0] == "t":
                trans.append((int(p[1]), p[2], p[3]))
    return frames, trans


def compare(d):
    g, gt = load(os.path.join(d, "go.txt"))
    p, pt = load(os.path.join(d, "py.txt"))
    if g.keys() != p.keys():
        sys.exit("go.txt and py.txt cover different frames")
    n = len(g)

    def motion(r):
        return sum(1 for v in r.values() if v[0] > 0)

    def regions(r):
        return sum(v[0] for v in r.values())

    def calib(r):
        return sum(v[3] for v in r.values())

    same_regions = sum(1 for i in g if g[i][0] == p[i][0])
    same_motion = sum(1 for i in g if (g[i][0] > 0) == (p[i][0] > 0))
    cells_off = [abs(g[i][1] - p[i][1]) for i in g]
    changed_off = [abs(g[i][2] - p[i][2]) for i in g]
    print(f"agreement on {n} frames:"
          f" motion frames go {motion(g)} opencv {motion(p)},"
          f" regions go {regions(g)} opencv {regions(p)},"
          f" calibrating frames go {calib(g)} opencv {calib(p)}")
    print(f"  frames with the same motion/no motion {same_motion}/{n},"
          f" the same region count {same_regions}/{n};"
          f" moving cells differ by {max(cells_off)} at most ({sum(cells_off) / n:.2f} a frame on average),"
          f" changed cells by {max(changed_off)} at most")

    def fmt(ts):
        return " ".join(f"{k}:{z}@{i}" for i, k, z in ts) or "none"

    print(f"  transitions go:     {fmt(gt)}")
    print(f"  transitions opencv: {fmt(pt)}")
    # Within a small tolerance: the same transitions in order, each within
    # two frames, and the motion/no-motion decision on 98 % of the frames.
    ok = (len(gt) == len(pt)
          and all(a[1:] == b[1:] and abs(a[0] - b[0]) <= 2 for a, b in zip(gt, pt))
          and same_motion >= 0.98 * n)
    print("  agree: " + ("yes" if ok else "NO") +
          " (same transitions within 2 frames, motion/no motion on at least 98 % of frames)")
    return ok


def main(argv):
    if len(argv) >= 2 and argv[0] == "--compare":
        sys.exit(0 if compare(argv[1]) else 1)
    if not argv:
        sys.exit(__doc__)
    passes = 3
    if len(argv) == 3 and argv[1] == "--passes":
        passes = int(argv[2])
    cv2.setNumThreads(1)
    bench(argv[0], passes)


if __name__ == "__main__":
    main(sys.argv[1:])
