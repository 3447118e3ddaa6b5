package voicetest

import (
	"fmt"
	"os"
	"slices"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/body/evidence"
	"github.com/tobe-body/tobe-body/hal"
)

// FrameScore is a detector's frame-level result against a scene's
// Frames: precision and recall of its decisions, and the ROC-AUC of its
// scores (the chance that a frame of speech scores higher than a frame
// without, ties counting half).
type FrameScore struct {
	Precision, Recall, AUC float64
}

// ScoreFrames scores per-frame decisions and scores against labels; the
// three are as long as each other.
func ScoreFrames(labels, decided []bool, score []float64) (FrameScore, error) {
	if len(decided) != len(labels) || len(score) != len(labels) {
		return FrameScore{}, fmt.Errorf("voicetest: %d labels, %d decisions, %d scores", len(labels), len(decided), len(score))
	}
	var tp, fp, fn float64
	for i, l := range labels {
		switch {
		case decided[i] && l:
			tp++
		case decided[i]:
			fp++
		case l:
			fn++
		}
	}
	var fs FrameScore
	if tp+fp > 0 {
		fs.Precision = tp / (tp + fp)
	}
	if tp+fn > 0 {
		fs.Recall = tp / (tp + fn)
	}
	fs.AUC = AUC(labels, score)
	return fs, nil
}

// AUC is the area under the ROC curve of score for labels, by ranks
// (the Mann-Whitney U): ties get their mean rank. NaN when either class
// is empty.
func AUC(labels []bool, score []float64) float64 {
	idx := make([]int, len(score))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case score[a] < score[b]:
			return -1
		case score[a] > score[b]:
			return 1
		}
		return 0
	})
	var rankSum, pos float64
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && score[idx[j]] == score[idx[i]] {
			j++
		}
		mean := float64(i+j+1) / 2 // ranks i+1..j
		for _, k := range idx[i:j] {
			if labels[k] {
				rankSum += mean
				pos++
			}
		}
		i = j
	}
	neg := float64(len(score)) - pos
	return (rankSum - pos*(pos+1)/2) / (pos * neg)
}

// Streaming turns a detector's per-chunk speech probabilities into
// segments as Silero VAD's VADIterator does: a segment starts at the
// first chunk at or over on (dated pad before that chunk), and ends once
// the probability has stayed under off for minSilence (dated pad after
// the first chunk under off), which is when it is told.
func Streaming(probs []float64, chunk time.Duration, on, off float64, minSilence, pad time.Duration) []Span {
	var out []Span
	var start, quiet time.Duration
	inside, quieting := false, false
	for i, p := range probs {
		at := time.Duration(i) * chunk // the chunk's start
		now := at + chunk
		if p >= on {
			quieting = false
			if !inside {
				inside, start = true, max(0, at-pad)
			}
			continue
		}
		if !inside || p >= off {
			continue
		}
		if !quieting {
			quieting, quiet = true, at
		}
		if now-quiet >= minSilence {
			out = append(out, Span{From: start, To: quiet + pad, Told: now})
			inside, quieting = false, false
		}
	}
	if inside {
		end := time.Duration(len(probs)) * chunk
		out = append(out, Span{From: start, To: end, Told: end})
	}
	return out
}

// WriteWAV writes samples as a 16 kHz mono 16-bit PCM WAV file, as the
// body's evidence store encodes a clip.
func WriteWAV(path string, samples []int16) error {
	f := hal.AudioFormat{Rate: Rate * physic.Hertz, Channels: 1}
	return os.WriteFile(path, evidence.EncodeWAV(f, samples), 0o644)
}
