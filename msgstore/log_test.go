package msgstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestMsgStoreLogRoundTrip(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	l := mustOpenLog(t, cfg)
	var locs []Loc
	var recs []Record
	for i := range 200 {
		r := mkRecord(i, i*13%700)
		loc := mustAppend(t, l, r)
		if loc.Offset != uint64(i) {
			t.Fatalf("append %d got offset %d", i, loc.Offset)
		}
		locs, recs = append(locs, loc), append(recs, r)
	}
	for i, loc := range locs {
		checkRead(t, l.ReadAt, loc, recs[i])
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(mkRecord(0, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}

	l2 := mustOpenLog(t, cfg)
	if ri := l2.Recovery(); !ri.Clean || ri.SegmentsScanned != 0 || ri.BytesRead != 0 {
		t.Fatalf("reopen after Close: %+v", ri)
	}
	for i, loc := range locs {
		checkRead(t, l2.ReadAt, loc, recs[i])
	}
	if loc := mustAppend(t, l2, mkRecord(200, 5)); loc.Offset != 200 {
		t.Fatalf("append after reopen got offset %d, want 200", loc.Offset)
	}
	got, _ := readAll(t, l2, 0)
	if len(got) != 201 {
		t.Fatalf("iterated %d records, want 201", len(got))
	}
	for i := range recs {
		if got[i].Offset != uint64(i) || !sameRecord(got[i], recs[i]) {
			t.Fatalf("iterated record %d differs", i)
		}
	}
}

func TestMsgStoreLogRollsOverSegments(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.SegmentSize = 4096
	l := mustOpenLog(t, cfg)
	var locs []Loc
	var recs []Record
	for i := range 300 {
		r := mkRecord(i, 100)
		locs, recs = append(locs, mustAppend(t, l, r)), append(recs, r)
	}
	big := mkRecord(300, 10_000) // larger than a segment: gets one of its own
	locs, recs = append(locs, mustAppend(t, l, big)), append(recs, big)
	r := mkRecord(301, 10)
	locs, recs = append(locs, mustAppend(t, l, r)), append(recs, r)

	segs := l.segments()
	if len(segs) < 10 {
		t.Fatalf("%d segments, want a roll every ~4 KiB", len(segs))
	}
	var prevLast uint64
	for i, s := range segs {
		name := filepath.Base(s.segPath)
		if want := fmt.Sprintf("%020d.seg", s.base); name != want {
			t.Fatalf("segment %d named %s, want %s", i, name, want)
		}
		if i > 0 && s.base != prevLast {
			t.Fatalf("segment %s starts at %d, previous ended before %d", name, s.base, prevLast)
		}
		prevLast = s.lastPlus1.Load()
		st, err := os.Stat(s.segPath)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > cfg.SegmentSize && s.lastPlus1.Load()-s.base != 1 {
			t.Fatalf("segment %s is %d bytes with several records", name, st.Size())
		}
	}
	if segs[len(segs)-2].base != 300 || segs[len(segs)-1].base != 301 {
		t.Fatalf("oversized record not alone in its segment")
	}
	for i, loc := range locs {
		checkRead(t, l.ReadAt, loc, recs[i])
	}
	got, _ := readAll(t, l, 0)
	if len(got) != len(recs) {
		t.Fatalf("iterated %d records across segments, want %d", len(got), len(recs))
	}
	// Sealed segments have index files written by the flusher.
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5e9, func() error {
		for _, s := range segs[:len(segs)-1] {
			if !s.sealDone.Load() {
				return fmt.Errorf("segment %d not sealed", s.base)
			}
		}
		return nil
	})
	for _, s := range segs[:len(segs)-1] {
		data, err := os.ReadFile(s.idxPath)
		if err != nil {
			t.Fatal(err)
		}
		if _, info, err := decodeIndex(data); err != nil || info.size != s.size.Load() {
			t.Fatalf("index of %d: %+v, %v", s.base, info, err)
		}
	}
}

func TestMsgStoreLogIterateFrom(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.SegmentSize = 2048
	l := mustOpenLog(t, cfg)
	for i := range 100 {
		mustAppend(t, l, mkRecord(i, 50))
	}
	for _, from := range []uint64{0, 1, 37, 99, 100, 1000} {
		got, locs := readAll(t, l, from)
		want := max(0, 100-int(from))
		if len(got) != want {
			t.Fatalf("from %d: %d records, want %d", from, len(got), want)
		}
		for i, r := range got {
			if r.Offset != from+uint64(i) || !sameRecord(r, mkRecord(int(r.Offset), 50)) || locs[i].Offset != r.Offset {
				t.Fatalf("from %d: record %d is offset %d", from, i, r.Offset)
			}
		}
	}
	// Tailing: an iterator at the end continues with later appends.
	it := l.Iterate(98)
	n := 0
	for it.Next() {
		n++
	}
	if n != 2 {
		t.Fatalf("tail iterator read %d, want 2", n)
	}
	for i := 100; i < 150; i++ {
		mustAppend(t, l, mkRecord(i, 50))
	}
	for it.Next() {
		if it.Record().Offset != uint64(100+n-2) {
			t.Fatalf("tail iterator got offset %d, want %d", it.Record().Offset, 100+n-2)
		}
		n++
	}
	if n != 52 || it.Err() != nil {
		t.Fatalf("tail iterator read %d (err %v), want 52", n, it.Err())
	}
}

func TestMsgStoreLogWrongPosHintFoundByIndex(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.IndexInterval = 256
	l := mustOpenLog(t, cfg)
	var locs []Loc
	for i := range 300 {
		locs = append(locs, mustAppend(t, l, mkRecord(i, 40+i%90)))
	}
	readsBefore := l.Stats().BytesRead
	for i, loc := range locs {
		want := mkRecord(i, 40+i%90)
		for _, bad := range []Loc{
			{Offset: loc.Offset, Pos: 0, Size: loc.Size},
			{Offset: loc.Offset, Pos: loc.Pos + 7, Size: loc.Size},
			{Offset: loc.Offset, Pos: 1 << 31, Size: loc.Size},
			{Offset: loc.Offset, Pos: loc.Pos, Size: 0},
		} {
			if bad == loc {
				continue
			}
			checkRead(t, l.ReadAt, bad, want)
		}
	}
	// A fallback lookup reads about one index interval, not the segment.
	perLookup := float64(l.Stats().BytesRead-readsBefore) / float64(4*len(locs))
	if limit := float64(2*cfg.IndexInterval + 300); perLookup > limit {
		t.Fatalf("fallback lookups read %.0f bytes each, want at most ~one interval (%v)", perLookup, limit)
	}
	// A Loc whose size disagrees with the record at its offset is not that record.
	loc := locs[10]
	loc.Size += 3
	if _, err := l.ReadAt(loc); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadAt with wrong size: %v, want ErrNotFound", err)
	}
	if _, err := l.ReadAt(Loc{Offset: 5000, Size: 100}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadAt beyond the end: %v, want ErrNotFound", err)
	}
}

func TestMsgStoreLogIndexMissingOrDamagedIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.SegmentSize = 4096
	cfg.IndexInterval = 256
	l := mustOpenLog(t, cfg)
	var locs []Loc
	for i := range 200 {
		locs = append(locs, mustAppend(t, l, mkRecord(i, 60)))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	idx := listFiles(t, dir, ".idx")
	if len(idx) < 4 {
		t.Fatalf("only %d index files", len(idx))
	}
	// Missing, bit-flipped, truncated, and stale (another segment's index).
	os.Remove(filepath.Join(dir, idx[0]))
	flipByte(t, filepath.Join(dir, idx[1]), 3)
	truncFile(t, filepath.Join(dir, idx[2]), 10)
	copyFile(t, filepath.Join(dir, idx[1+len(idx)/2]), filepath.Join(dir, idx[3]))

	for _, clean := range []bool{true, false} {
		if !clean {
			// Crash path: no checkpoint, so damaged indexes are found at Open.
			for _, name := range idx[:4] {
				os.Remove(filepath.Join(dir, name))
			}
			os.Remove(filepath.Join(dir, checkpointName))
		}
		l = mustOpenLog(t, cfg)
		if l.Recovery().Clean != clean {
			t.Fatalf("clean=%v: recovery %+v", clean, l.Recovery())
		}
		for i, loc := range locs {
			checkRead(t, l.ReadAt, Loc{Offset: loc.Offset, Pos: loc.Pos + 1, Size: loc.Size}, mkRecord(i, 60))
		}
		if clean && l.Stats().IndexRebuilds < 4 {
			t.Fatalf("IndexRebuilds = %d, want >= 4", l.Stats().IndexRebuilds)
		}
		if !clean && l.Recovery().IndexesRebuilt < 4 {
			t.Fatalf("IndexesRebuilt = %d, want >= 4", l.Recovery().IndexesRebuilt)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		for _, s := range l.segments() {
			data, err := os.ReadFile(s.idxPath)
			if err != nil {
				t.Fatalf("clean=%v: index %s not rewritten: %v", clean, s.idxPath, err)
			}
			if _, info, err := decodeIndex(data); err != nil || info.size != s.size.Load() {
				t.Fatalf("clean=%v: index %s after rebuild: %+v %v", clean, s.idxPath, info, err)
			}
		}
	}
}

func TestMsgStoreLogConcurrentReadersAndAppenders(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.SegmentSize = 8192
	cfg.Flush = FlushOS
	l := mustOpenLog(t, cfg)
	var mu sync.Mutex
	var locs []Loc
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				loc, err := l.Append(mkRecord(w*1000+i, 64))
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				locs = append(locs, loc)
				mu.Unlock()
			}
		}()
	}
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(1, 2))
			for range 600 {
				mu.Lock()
				n := len(locs)
				var loc Loc
				if n > 0 {
					loc = locs[rng.IntN(n)]
				}
				mu.Unlock()
				if n == 0 {
					continue
				}
				if _, err := l.ReadAt(loc); err != nil {
					errc <- fmt.Errorf("ReadAt %+v: %w", loc, err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // a tailing iterator sees offsets in order, with no gap
		defer wg.Done()
		it := l.Iterate(0)
		var next uint64
		for next < 1200 {
			for it.Next() {
				if it.Record().Offset != next {
					errc <- fmt.Errorf("iterator got %d, want %d", it.Record().Offset, next)
					return
				}
				next++
			}
			if it.Err() != nil {
				errc <- it.Err()
				return
			}
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

func TestMsgStoreLogDirectoryLocked(t *testing.T) {
	cfg := testConfig(t.TempDir())
	mustOpenLog(t, cfg)
	if _, err := OpenLog(cfg); !errors.Is(err, ErrLocked) {
		t.Fatalf("second OpenLog: %v, want ErrLocked", err)
	}
}

func flipByte(t testing.TB, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x04
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

func truncFile(t testing.TB, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
