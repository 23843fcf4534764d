package testmodels

import "math"

// IDs32 converts token ids to the int32 a Program takes.
func IDs32(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// Argmax is the index of the largest value, the lowest index on ties (as
// llama.cpp's and llama2.c's greedy sampling pick).
func Argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// MaxAbsDiff is the largest |got[i]-want[i]|, +Inf when the lengths differ.
func MaxAbsDiff(got []float32, want []float64) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var d float64
	for i := range want {
		d = max(d, math.Abs(float64(got[i])-want[i]))
	}
	return d
}
