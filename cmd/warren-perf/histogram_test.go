package main

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// nearestRank is the reference percentile: the smallest value with at
// least q% of the sorted values at or below it.
func nearestRank(sorted []uint64, q float64) uint64 {
	rank := int(math.Ceil(q / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// withinBucketError reports whether got is within half a bucket of want:
// buckets of values >= 256 are at most want/128 wide, so half is want/256;
// smaller values are exact. The +1 absorbs integer rounding.
func withinBucketError(got, want uint64) bool {
	diff := got - want
	if got < want {
		diff = want - got
	}
	return diff <= want/256+1
}

var testQuantiles = []float64{0, 0.1, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 100}

func TestHistogramPercentilesMatchSortedSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dists := []struct {
		name string
		gen  func() uint64
	}{
		{"small ints", func() uint64 { return rng.Uint64N(300) }},
		{"uniform 1s", func() uint64 { return rng.Uint64N(uint64(time.Second)) }},
		{"log-normal latency", func() uint64 { return uint64(math.Exp(rng.NormFloat64()*2 + 13)) }},
		{"powers of two and neighbours", func() uint64 {
			v := uint64(1) << rng.IntN(63)
			return v + uint64(rng.IntN(3)) - 1
		}},
		{"full range", func() uint64 { return rng.Uint64() >> rng.IntN(64) }},
		{"constant", func() uint64 { return 1_234_567 }},
	}
	for _, d := range dists {
		t.Run(d.name, func(t *testing.T) {
			const n = 50_000
			h := newHistogram()
			vals := make([]uint64, n)
			for i := range vals {
				vals[i] = d.gen()
				h.record(vals[i])
			}
			slices.Sort(vals)
			if h.count() != n {
				t.Fatalf("count = %d, want %d", h.count(), n)
			}
			for _, q := range testQuantiles {
				got, want := h.percentile(q), nearestRank(vals, q)
				if !withinBucketError(got, want) {
					t.Errorf("p%v = %d, want %d within %d", q, got, want, want/256+1)
				}
			}
			if h.minimum() != vals[0] || h.maximum() != vals[n-1] {
				t.Errorf("min/max = %d/%d, want %d/%d", h.minimum(), h.maximum(), vals[0], vals[n-1])
			}
		})
	}
}

func TestHistogramMean(t *testing.T) {
	h := newHistogram()
	for _, v := range []uint64{10, 20, 30, 1000} {
		h.record(v)
	}
	if got := h.mean(); got != 265 {
		t.Fatalf("mean = %v, want 265", got)
	}
}

func TestHistogramEmpty(t *testing.T) {
	h := newHistogram()
	if h.percentile(50) != 0 || h.minimum() != 0 || h.maximum() != 0 || h.mean() != 0 || h.count() != 0 {
		t.Fatalf("empty histogram: p50=%d min=%d max=%d mean=%v count=%d",
			h.percentile(50), h.minimum(), h.maximum(), h.mean(), h.count())
	}
}

func TestHistogramBucketsCoverEveryValue(t *testing.T) {
	edges := []uint64{0, 1, 127, 128, 255, 256, 257, 511, 512, 1000, 1 << 20, 1<<20 + 1, 1<<40 - 1,
		1 << 62, 1<<63 - 1, 1 << 63, math.MaxUint64}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10_000 {
		edges = append(edges, rng.Uint64()>>rng.IntN(64))
	}
	slices.Sort(edges)
	prev := -1
	for _, v := range edges {
		i := bucketIndex(v)
		if i < 0 || i >= histBuckets {
			t.Fatalf("bucketIndex(%d) = %d, out of [0,%d)", v, i, histBuckets)
		}
		if i < prev {
			t.Fatalf("bucketIndex not monotonic: %d -> %d at %d", prev, i, v)
		}
		prev = i
		lo, hi := bucketBounds(i)
		if v < lo || v > hi {
			t.Fatalf("value %d outside its bucket %d [%d,%d]", v, i, lo, hi)
		}
		if lo >= 2*histSubCount && hi-lo+1 > lo/histSubCount {
			t.Fatalf("bucket %d [%d,%d] wider than 1/%d of its values", i, lo, hi, histSubCount)
		}
	}
	if got := bucketIndex(math.MaxUint64); got != histBuckets-1 {
		t.Fatalf("bucketIndex(MaxUint64) = %d, want the last bucket %d", got, histBuckets-1)
	}
}

func TestHistogramMergeEqualsRecordingAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	a, b, all := newHistogram(), newHistogram(), newHistogram()
	for i := range 20_000 {
		v := uint64(math.Exp(rng.NormFloat64() + 10))
		all.record(v)
		if i%3 == 0 {
			a.record(v)
		} else {
			b.record(v)
		}
	}
	a.merge(b)
	if *a != *all {
		t.Fatalf("merged histogram differs: count %d vs %d, min %d vs %d, max %d vs %d",
			a.count(), all.count(), a.minimum(), all.minimum(), a.maximum(), all.maximum())
	}
	a.merge(newHistogram()) // merging an empty one changes nothing
	if a.minimum() != all.minimum() {
		t.Fatalf("merging an empty histogram changed min to %d", a.minimum())
	}
}

func TestHistogramReset(t *testing.T) {
	h := newHistogram()
	h.record(5)
	h.record(1 << 30)
	h.reset()
	if *h != *newHistogram() {
		t.Fatal("reset histogram differs from a new one")
	}
}

func TestHistogramNegativeDurationCountsAsZero(t *testing.T) {
	h := newHistogram()
	h.recordDuration(-time.Second)
	if h.count() != 1 || h.maximum() != 0 {
		t.Fatalf("count=%d max=%d, want 1 and 0", h.count(), h.maximum())
	}
}

// FuzzHistogram checks the percentile error bound for arbitrary values.
func FuzzHistogram(f *testing.F) {
	f.Add([]byte{})
	f.Add(binary.LittleEndian.AppendUint64(nil, math.MaxUint64))
	f.Add(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 255), 256))
	f.Add([]byte("0123456789abcdefghijklmnopqrstuvwxyz0123456789"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h := newHistogram()
		var vals []uint64
		for len(data) >= 8 && len(vals) < 10_000 {
			v := binary.LittleEndian.Uint64(data)
			data = data[8:]
			vals = append(vals, v)
			h.record(v)
		}
		if len(vals) == 0 {
			if h.percentile(50) != 0 {
				t.Fatal("empty histogram has a p50")
			}
			return
		}
		slices.Sort(vals)
		for _, q := range testQuantiles {
			if got, want := h.percentile(q), nearestRank(vals, q); !withinBucketError(got, want) {
				t.Fatalf("p%v = %d, want %d", q, got, want)
			}
		}
	})
}

func BenchmarkHistogramRecord(b *testing.B) {
	h := newHistogram()
	b.ReportAllocs()
	v := uint64(1)
	for b.Loop() {
		v = v*6364136223846793005 + 1442695040888963407
		h.record(v >> 40)
	}
}

func BenchmarkHistogramPercentile(b *testing.B) {
	h := newHistogram()
	rng := rand.New(rand.NewPCG(7, 8))
	for range 100_000 {
		h.record(uint64(math.Exp(rng.NormFloat64()*2 + 13)))
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = h.percentile(99)
	}
}

func BenchmarkHistogramMergeReset(b *testing.B) {
	src, dst := newHistogram(), newHistogram()
	for i := range uint64(10_000) {
		src.record(i * 997)
	}
	b.ReportAllocs()
	for b.Loop() {
		dst.merge(src)
		dst.reset()
	}
}
