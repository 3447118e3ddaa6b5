package motion

import (
	"math/bits"
	"time"
)

// The stages of a frame after the downscaling (downscale.go), on the
// grid of cells. Each keeps to the buffers New made.

// contrastGain is how much a difference counts for a scene whose luma
// has standard deviation sigma: 32/sigma, within [0.25, 4].
func contrastGain(sigma float64) float64 {
	if sigma <= 8 {
		return 4
	}
	return max(32/sigma, 0.25)
}

// The light changed too fast to follow when its recent change (the log of
// the brightness ratios, each fading with time constant lightWindow) is
// beyond lightLimit: more than 25 % brighter or darker within about a
// second. A switch or a fast dimmer is that; dusk, clouds and a slow
// dimmer are followed by the illumination estimate instead.
const (
	lightWindow = time.Second
	lightLimit  = 0.22314355131420976 // ln 1.25
)

// illumination estimates how much brighter the frame is than the
// background: the median of the ratios frame/background of every other
// cell of every other row (a quarter of the cells is plenty for a median),
// over those neither too dark nor saturated in both; 1 when fewer than a
// sixteenth of all cells qualify. Moving things cover fewer than half of
// the cells, so they do not move the median much.
func (d *Detector) illumination() float32 {
	r := d.ratio[:0]
	w := d.w
	for y := 0; y < d.h; y += 2 {
		acc := d.acc[y*w : y*w+w]
		blur := d.blur[y*w : y*w+w][:len(acc)]
		for x := 0; x < len(acc); x += 2 {
			a, v := acc[x], blur[x]
			if a >= 8 && a <= 250 && v >= 8 && v <= 250 {
				r = append(r, float32(v)/a)
			}
		}
	}
	if len(r) < d.n/16 {
		return 1
	}
	return median(r)
}

// noiseFloor times the noise estimate is the smallest difference that
// counts: about four standard deviations of Gaussian noise, whose median
// absolute value is 0.67 of one.
const noiseFloor = 6

// noise estimates the sensor noise: the median absolute difference
// between the frame and the background relit by light, over the same
// quarter of the cells as illumination.
func (d *Detector) noise(light float32) float32 {
	r := d.ratio[:0]
	w := d.w
	for y := 0; y < d.h; y += 2 {
		acc := d.acc[y*w : y*w+w]
		blur := d.blur[y*w : y*w+w][:len(acc)]
		for x := 0; x < len(acc); x += 2 {
			diff := float32(blur[x]) - min(acc[x]*light, 255)
			r = append(r, max(diff, -diff))
		}
	}
	return median(r)
}

// median returns the median of r (the mean of the two middle values when
// len(r) is even), reordering r.
func median(r []float32) float32 {
	k := len(r) / 2
	m := selectKth(r, k)
	if len(r)%2 == 1 {
		return m
	}
	lo := r[0]
	for _, v := range r[1:k] {
		lo = max(lo, v)
	}
	return (lo + m) / 2
}

// selectKth reorders a so that a[k] is its k-th smallest value, with no
// larger value before it and no smaller after it, and returns a[k]
// (Hoare's FIND with a median-of-three pivot).
func selectKth(a []float32, k int) float32 {
	lo, hi := 0, len(a)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if a[mid] < a[lo] {
			a[mid], a[lo] = a[lo], a[mid]
		}
		if a[hi] < a[lo] {
			a[hi], a[lo] = a[lo], a[hi]
		}
		if a[hi] < a[mid] {
			a[hi], a[mid] = a[mid], a[hi]
		}
		p := a[mid]
		i, j := lo, hi
		for i <= j {
			for a[i] < p {
				i++
			}
			for a[j] > p {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return a[k]
		}
	}
	return a[k]
}

// gauss3 blurs small into blur with the 3×3 kernel [1 2 1]ᵀ[1 2 1]/16,
// rounded half up, borders reflected around the edge cell (OpenCV's
// BORDER_REFLECT_101). Rows are at least 4 cells long and there are at
// least 4 of them (New).
func (d *Detector) gauss3() {
	w, h := d.w, d.h
	for y := range h {
		r := d.small[y*w : y*w+w]
		o := d.tmp[y*w : y*w+w]
		o = o[:len(r)]
		o[0] = 2*uint16(r[1]) + 2*uint16(r[0])
		o[len(r)-1] = 2*uint16(r[len(r)-2]) + 2*uint16(r[len(r)-1])
		inner := o[1 : len(r)-1]
		left, mid, right := r[:len(inner)], r[1:len(inner)+1], r[2:len(inner)+2]
		for x := range inner {
			inner[x] = uint16(left[x]) + 2*uint16(mid[x]) + uint16(right[x])
		}
	}
	for y := range h {
		up, dn := y-1, y+1
		if up < 0 {
			up = 1
		}
		if dn >= h {
			dn = h - 2
		}
		b := d.tmp[y*w : y*w+w]
		a := d.tmp[up*w : up*w+w]
		c := d.tmp[dn*w : dn*w+w]
		o := d.blur[y*w : y*w+w]
		a, c, o = a[:len(b)], c[:len(b)], o[:len(b)]
		for x := range b {
			o[x] = uint8((a[x] + 2*b[x] + c[x] + 8) >> 4)
		}
	}
}

// difference marks the cells whose blurred value differs by more than
// limit from the background relit by light (the prediction, at most 255),
// lists them in changed, and moves the background towards the frame:
// acc = frame·alpha + prediction·(1−alpha). It returns how many cells
// changed.
func (d *Detector) difference(light, limit, alpha float32) int {
	beta := 1 - alpha
	acc := d.acc
	blur := d.blur[:len(acc)]
	changed := d.changed[:0]
	for i, a := range acc {
		v := float32(blur[i])
		p := min(a*light, 255)
		if diff := v - p; diff > limit || -diff > limit {
			changed = append(changed, int32(i))
		}
		acc[i] = float32(v*alpha) + float32(p*beta) // not fused: the same result on every architecture
	}
	d.changed = changed
	return len(changed)
}

// dilate sets dil to 1 on every cell within the 3×3 square around a
// changed cell (cells outside the frame do not count), 0 elsewhere.
func (d *Detector) dilate() {
	w, h := d.w, d.h
	dil := d.dil
	clear(dil)
	for _, c := range d.changed {
		i := int(c)
		x, y := i%w, i/w
		x0, x1 := max(x-1, 0), min(x+1, w-1)
		for ny := max(y-1, 0); ny <= min(y+1, h-1); ny++ {
			row := dil[ny*w+x0 : ny*w+x1+1]
			for k := range row {
				row[k] = 1
			}
		}
	}
}

// label finds the 8-connected regions of dil (each holds a changed cell,
// so the changed cells are the seeds), lists every region's cells in
// visit, and lists in kept the spans of visit of the regions of at least
// minCells. It returns how many regions were kept and their cells.
func (d *Detector) label() (regions, cells int) {
	w, h := d.w, d.h
	lab, dil := d.labels, d.dil
	clear(lab)
	visit := d.visit[:0]
	kept := d.kept[:0]
	next := int32(0)
	for _, c := range d.changed {
		if lab[c] != 0 {
			continue
		}
		next++
		lab[c] = next
		start := len(visit)
		visit = append(visit, c)
		// visit doubles as the queue: cells are appended when found and
		// their neighbours looked at in turn.
		for k := start; k < len(visit); k++ {
			p := int(visit[k])
			x, y := p%w, p/w
			x0, x1 := max(x-1, 0), min(x+1, w-1)
			for ny := max(y-1, 0); ny <= min(y+1, h-1); ny++ {
				for q := ny*w + x0; q <= ny*w+x1; q++ {
					if dil[q] != 0 && lab[q] == 0 {
						lab[q] = next
						visit = append(visit, int32(q))
					}
				}
			}
		}
		if area := len(visit) - start; area >= d.minCells {
			kept = append(kept, span{int32(start), int32(len(visit))})
			regions++
			cells += area
		}
	}
	d.visit, d.kept = visit, kept
	return regions, cells
}

// span is a region's cells in visit.
type span struct{ start, end int32 }

// zoneTest counts the cells of kept regions in each zone and their box.
func (d *Detector) zoneTest() {
	for i := range d.zones {
		z := &d.zones[i]
		z.count, z.x0, z.y0, z.x1, z.y1 = 0, d.w, d.h, 0, 0
	}
	w := d.w
	for _, s := range d.kept {
		for _, c := range d.visit[s.start:s.end] {
			x, y := int(c)%w, int(c)/w
			for zb := d.zbits[c]; zb != 0; zb &= zb - 1 {
				z := &d.zones[bits.TrailingZeros32(zb)]
				z.count++
				z.x0, z.y0 = min(z.x0, x), min(z.y0, y)
				z.x1, z.y1 = max(z.x1, x+1), max(z.y1, y+1)
			}
		}
	}
}
