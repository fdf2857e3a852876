package queueindex

import (
	"runtime"
	"testing"
)

// TestAppendAllocations pins the allocation budget of the append path: a
// segment's worth of appends plus its flush allocate a small constant (file
// handles, the lease checkpoint), nothing per entry.
func TestAppendAllocations(t *testing.T) {
	ix, _ := mustOpen(t, testConfig(t.TempDir()))
	defer ix.Close()
	var i uint64
	allocs := testing.AllocsPerRun(5, func() {
		for range SlotsPerSegment {
			if _, err := ix.Append(entryFor(i)); err != nil {
				t.Fatal(err)
			}
			i++
			if i%256 == 0 {
				if err := ix.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
	t.Logf("%.0f allocations per %d appends with flushes", allocs, SlotsPerSegment)
	if allocs > 100 {
		t.Fatalf("%.0f allocations per segment of appends: the append path allocates per entry", allocs)
	}
}

// TestAppendHeapBounded appends 200,000 entries and checks that the live heap
// grows by no more than the page cache: the index keeps no per-message state
// for segments it does not cache.
func TestAppendHeapBounded(t *testing.T) {
	cfg := testConfig(t.TempDir())
	ix, _ := mustOpen(t, cfg)
	defer ix.Close()
	appendN(t, ix, 0, 1)
	mustFlush(t, ix)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC() // a second cycle empties sync.Pool's victim cache
	runtime.ReadMemStats(&before)
	const n = 200_000
	for i := range uint64(n) {
		if _, err := ix.Append(entryFor(i)); err != nil {
			t.Fatal(err)
		}
		if i%256 == 255 {
			mustFlush(t, ix)
		}
	}
	mustFlush(t, ix)
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ix)

	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	bound := int64(cfg.CacheSegments*SegmentSize + 256<<10)
	t.Logf("heap grew %d bytes for %d live entries (%.2f bytes/entry); bound %d", growth, n, float64(growth)/n, bound)
	if st := ix.Stats(); st.Live != n+1 {
		t.Fatalf("Live = %d", st.Live)
	}
	if growth > bound {
		t.Fatalf("heap grew %d bytes for %d entries, more than the %d-byte cache bound", growth, n, bound)
	}
}
