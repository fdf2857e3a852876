package msgstore

import (
	"errors"
	"testing"
)

// TestLogAppendBatchAcrossSegments: a batch larger than a segment is split at
// segment boundaries, offsets run on without gaps, every record reads back
// (by location, by iteration and after reopening), and single appends
// continue after it.
func TestLogAppendBatchAcrossSegments(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l := mustOpenLog(t, cfg)
	first := mustAppend(t, l, mkRecord(0, 100))
	const n = 300 // ~300 KiB: five 64 KiB segments
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = mkRecord(i+1, 1000)
	}
	locs := make([]Loc, n)
	got, err := l.AppendBatch(recs, locs)
	if err != nil || got != n {
		t.Fatalf("AppendBatch: %d, %v", got, err)
	}
	for i, loc := range locs {
		if loc.Offset != first.Offset+1+uint64(i) {
			t.Fatalf("record %d at offset %d, want %d", i, loc.Offset, first.Offset+1+uint64(i))
		}
		checkRead(t, l.ReadAt, loc, recs[i])
	}
	if st := l.Stats(); st.Segments < 5 || st.Appends != n+1 {
		t.Fatalf("after the batch: %d segments, %d appends; want >= 5, %d", st.Segments, st.Appends, n+1)
	}
	last := mustAppend(t, l, mkRecord(n+1, 10))
	if last.Offset != locs[n-1].Offset+1 {
		t.Fatalf("append after the batch at %d, want %d", last.Offset, locs[n-1].Offset+1)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpenLog(t, cfg)
	all, _ := readAll(t, l, 0)
	if len(all) != n+2 || !sameRecord(all[1], recs[0]) || !sameRecord(all[n], recs[n-1]) {
		t.Fatalf("after reopen: %d records", len(all))
	}
}

// TestLogAppendBatchStopsAtABadRecord: the records before an invalid one are
// appended, the invalid one and those after it are not.
func TestLogAppendBatchStopsAtABadRecord(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.MaxRecordSize = 4096
	l := mustOpenLog(t, cfg)
	recs := []Record{mkRecord(1, 10), mkRecord(2, 10), mkRecord(3, 8192), mkRecord(4, 10)}
	locs := make([]Loc, len(recs))
	got, err := l.AppendBatch(recs, locs)
	if got != 2 || !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("AppendBatch = %d, %v; want 2, ErrRecordTooLarge", got, err)
	}
	all, _ := readAll(t, l, 0)
	if len(all) != 2 || l.Stats().NextOffset != 2 {
		t.Fatalf("log holds %d records, next offset %d; want 2, 2", len(all), l.Stats().NextOffset)
	}
	if _, err := l.AppendBatch(recs, locs[:1]); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("AppendBatch with too few locations: %v", err)
	}
}

// TestStorePutBatchReferences: each record of a batch gets its own reference
// count, and releasing them all leaves nothing live.
func TestStorePutBatchReferences(t *testing.T) {
	s := mustOpenStore(t, testConfig(t.TempDir()))
	recs := []Record{mkRecord(1, 100), mkRecord(2, 100), mkRecord(3, 100)}
	refs := []int{1, 3, 2}
	locs := make([]Loc, 3)
	if got, err := s.PutBatch(recs, refs, locs); got != 3 || err != nil {
		t.Fatalf("PutBatch = %d, %v", got, err)
	}
	if st := s.Stats(); st.LiveMessages != 3 {
		t.Fatalf("live records %d, want 3", st.LiveMessages)
	}
	for i, loc := range locs {
		checkRead(t, s.Get, loc, recs[i])
		for range refs[i] {
			if err := s.Release(loc); err != nil {
				t.Fatalf("release %d: %v", i, err)
			}
		}
	}
	if st := s.Stats(); st.LiveMessages != 0 {
		t.Fatalf("live records %d after releasing every reference, want 0", st.LiveMessages)
	}
	if got, err := s.PutBatch(recs, []int{1, 0, 1}, locs); got != 1 || !errors.Is(err, ErrInvalidRefs) {
		t.Fatalf("PutBatch with a zero count = %d, %v; want 1, ErrInvalidRefs", got, err)
	}
}

// BenchmarkAppendBatch1KiB is BenchmarkAppend1KiB with one write per 64
// records (what a broker's socket read of persistent publishes gives).
func BenchmarkAppendBatch1KiB(b *testing.B) {
	l := mustOpenLog(b, benchConfig(b, FlushOS))
	const batch = 64
	recs := make([]Record, batch)
	for i := range recs {
		recs[i] = mkRecord(i, 1024)
	}
	locs := make([]Loc, batch)
	b.SetBytes(int64(recs[0].EncodedSize()))
	b.ReportAllocs()
	for i := 0; i < b.N; i += batch {
		if _, err := l.AppendBatch(recs, locs); err != nil {
			b.Fatal(err)
		}
	}
}
