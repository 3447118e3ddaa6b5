package voicetest

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestAUC(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels []bool
		score  []float64
		want   float64
	}{
		{"perfect", []bool{false, false, true, true}, []float64{0.1, 0.2, 0.8, 0.9}, 1},
		{"inverted", []bool{true, true, false, false}, []float64{0.1, 0.2, 0.8, 0.9}, 0},
		{"all tied", []bool{true, false, true, false}, []float64{0.5, 0.5, 0.5, 0.5}, 0.5},
		// Of the 2x2 pairs, (0.7 over 0.2), (0.7 over 0.7: half),
		// (0.1 under both): 1.5 of 4.
		{"a tie across classes", []bool{true, false, true, false}, []float64{0.7, 0.7, 0.1, 0.2}, 0.375},
	} {
		if got := AUC(tc.labels, tc.score); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: AUC %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := AUC([]bool{true, true}, []float64{1, 2}); !math.IsNaN(got) {
		t.Errorf("one class only: AUC %v, want NaN", got)
	}
}

func TestScoreFrames(t *testing.T) {
	fs, err := ScoreFrames([]bool{true, true, false, false}, []bool{true, false, true, false}, []float64{1, 0, 1, 0})
	if err != nil {
		t.Fatal(err)
	}
	if fs.Precision != 0.5 || fs.Recall != 0.5 || fs.AUC != 0.5 {
		t.Errorf("got %+v, want precision, recall and AUC 0.5", fs)
	}
	if _, err := ScoreFrames([]bool{true}, nil, nil); err == nil {
		t.Error("lengths that differ: no error")
	}
}

// Streaming as Silero's VADIterator: start a pad before the first chunk
// at or over on; a dip under off shorter than minSilence, or anything
// between off and on, does not end the segment; the end is a pad after
// the first chunk under off, told when minSilence has passed.
func TestStreaming(t *testing.T) {
	const c = 100 * time.Millisecond
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tc := range []struct {
		name  string
		probs []float64
		want  []Span
	}{
		{"one", []float64{0, 0.9, 0.9, 0.1, 0.1, 0.1, 0}, []Span{{From: ms(70), To: ms(330), Told: ms(500)}}},
		{"a dip shorter than the silence", []float64{0.9, 0.1, 0.9, 0.1, 0.1, 0.1}, []Span{{From: 0, To: ms(330), Told: ms(500)}}},
		{"between the thresholds", []float64{0.9, 0.4, 0.4, 0.4, 0.4, 0.1, 0.1, 0.1}, []Span{{From: 0, To: ms(530), Told: ms(700)}}},
		{"open at the end", []float64{0, 0.6, 0.6}, []Span{{From: ms(70), To: ms(300), Told: ms(300)}}},
		{"none", []float64{0.1, 0.4, 0.2}, nil},
	} {
		got := Streaming(tc.probs, c, 0.5, 0.35, ms(200), ms(30))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
