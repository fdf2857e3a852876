package main

import (
	"math"
	"math/bits"
	"time"
)

// The histogram is log-linear, like HdrHistogram: every power-of-two range
// [2^e, 2^(e+1)) is cut into histSubCount equal buckets, so a bucket is never
// wider than 1/histSubCount of the values it holds. Values below
// 2*histSubCount land in buckets of width one and are exact.
const (
	// histSubBits is log2 of the number of buckets per power of two. Seven
	// bits bound the relative error of a reported percentile to 1/256
	// (half a bucket of relative width 1/128).
	histSubBits = 7
	// histSubCount is the number of buckets in each power-of-two range.
	histSubCount = 1 << histSubBits
	// histBuckets covers every uint64: one linear group for [0, 128) and
	// one group per exponent 7..63.
	histBuckets = (64 - histSubBits + 1) * histSubCount
)

// histogram counts uint64 values (nanoseconds here) in a fixed array of
// log-linear buckets. Its memory is constant (about 58 KiB) however many
// values it holds. It is not safe for concurrent use; callers lock.
type histogram struct {
	counts [histBuckets]uint64
	total  uint64
	min    uint64
	max    uint64
	// sum is a float so that it cannot overflow; it only feeds the mean.
	sum float64
}

// newHistogram returns an empty histogram.
func newHistogram() *histogram {
	h := &histogram{}
	h.reset()
	return h
}

// reset empties h.
func (h *histogram) reset() {
	clear(h.counts[:])
	h.total = 0
	h.min = math.MaxUint64
	h.max = 0
	h.sum = 0
}

// bucketIndex returns the bucket that holds v.
func bucketIndex(v uint64) int {
	if v < 2*histSubCount {
		return int(v)
	}
	e := bits.Len64(v) - 1 // position of the top bit, >= histSubBits+1
	shift := e - histSubBits
	return (shift+1)*histSubCount + int((v>>uint(shift))&(histSubCount-1))
}

// bucketBounds returns the smallest and largest value that bucket i holds.
func bucketBounds(i int) (lo, hi uint64) {
	if i < 2*histSubCount {
		return uint64(i), uint64(i)
	}
	shift := uint(i/histSubCount - 1)
	sub := uint64(i % histSubCount)
	lo = (histSubCount + sub) << shift
	return lo, lo + (uint64(1)<<shift - 1)
}

// record adds one value.
func (h *histogram) record(v uint64) {
	h.counts[bucketIndex(v)]++
	h.total++
	h.sum += float64(v)
	if v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
}

// recordDuration adds d in nanoseconds; a negative d (clock skew between
// hosts) counts as zero.
func (h *histogram) recordDuration(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.record(uint64(d))
}

// merge adds every value of o to h.
func (h *histogram) merge(o *histogram) {
	if o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.sum += o.sum
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
}

// count returns the number of recorded values.
func (h *histogram) count() uint64 { return h.total }

// minimum returns the smallest recorded value, exactly, or 0 if h is empty.
func (h *histogram) minimum() uint64 {
	if h.total == 0 {
		return 0
	}
	return h.min
}

// maximum returns the largest recorded value, exactly, or 0 if h is empty.
func (h *histogram) maximum() uint64 { return h.max }

// mean returns the arithmetic mean, or 0 if h is empty.
func (h *histogram) mean() float64 {
	if h.total == 0 {
		return 0
	}
	return h.sum / float64(h.total)
}

// percentile returns the value at percentile q (0..100) by the nearest-rank
// method: the smallest recorded value v such that at least q% of the values
// are <= v. The answer is the middle of v's bucket, clamped to the exact
// minimum and maximum, so it is within half a bucket (v/256) of v.
// It returns 0 if h is empty.
func (h *histogram) percentile(q float64) uint64 {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q / 100 * float64(h.total)))
	rank = max(rank, 1)
	rank = min(rank, h.total)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketBounds(i)
			mid := lo + (hi-lo)/2
			return min(max(mid, h.min), h.max)
		}
	}
	return h.max // unreachable: the counts add up to total
}
