package msgstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func storeConfig(dir string) Config {
	cfg := testConfig(dir)
	cfg.SegmentSize = 4096
	cfg.IndexInterval = 256
	cfg.CompactBytesPerSec = 0
	return cfg
}

func mustPut(t testing.TB, s *Store, r Record, refs int) Loc {
	t.Helper()
	loc, err := s.Put(r, refs)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	return loc
}

func mustRelease(t testing.TB, s *Store, loc Loc) {
	t.Helper()
	if err := s.Release(loc); err != nil {
		t.Fatalf("Release %+v: %v", loc, err)
	}
}

func TestMsgStoreRefcounting(t *testing.T) {
	cfg := storeConfig(t.TempDir())
	cfg.CompactDeadRatio = 1
	s := mustOpenStore(t, cfg)
	if _, err := s.Put(mkRecord(0, 10), 0); !errors.Is(err, ErrInvalidRefs) {
		t.Fatalf("Put with 0 refs: %v", err)
	}
	fan := mkRecord(1, 500)
	loc := mustPut(t, s, fan, 10)
	big := mustPut(t, s, mkRecord(2, 10), 300) // beyond the one-byte counters
	one := mustPut(t, s, mkRecord(3, 10), 1)
	if st := s.Stats(); st.LiveMessages != 3 || st.LiveBytes != int64(loc.Size+big.Size+one.Size) {
		t.Fatalf("stats after puts: %+v", st)
	}
	for i := range 9 {
		mustRelease(t, s, loc)
		checkRead(t, s.Get, loc, fan)
		if st := s.Stats(); st.LiveMessages != 3 {
			t.Fatalf("after %d releases: %d live", i+1, st.LiveMessages)
		}
	}
	mustRelease(t, s, loc)
	if _, err := s.Get(loc); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after the last release: %v", err)
	}
	if err := s.Release(loc); !errors.Is(err, ErrNotFound) {
		t.Fatalf("release past zero: %v", err)
	}
	for i := range 300 {
		if _, err := s.Get(big); err != nil {
			t.Fatalf("record with 300 refs gone after %d releases: %v", i, err)
		}
		mustRelease(t, s, big)
	}
	if _, err := s.Get(big); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after 300 releases: %v", err)
	}
	if st := s.Stats(); st.LiveMessages != 1 || st.LiveBytes != int64(one.Size) {
		t.Fatalf("stats after releases: %+v", st)
	}
	if len(s.segs[0].over) != 0 {
		t.Fatalf("overflow map not emptied: %v", s.segs[0].over)
	}
}

func TestMsgStoreDeletesReleasedSegments(t *testing.T) {
	dir := t.TempDir()
	s := mustOpenStore(t, storeConfig(dir))
	var locs []Loc
	for i := range 200 {
		locs = append(locs, mustPut(t, s, mkRecord(i, 100), 2))
	}
	if st := s.Stats(); st.Segments < 5 {
		t.Fatalf("%d segments", st.Segments)
	}
	for _, loc := range locs {
		mustRelease(t, s, loc)
	}
	if st := s.Stats(); st.Segments < 5 || st.LiveMessages != 200 {
		t.Fatalf("half-released records must stay: %+v", st)
	}
	for _, loc := range locs {
		mustRelease(t, s, loc)
	}
	// The files go after the statistics change, so both are polled: only the
	// active segment may remain on disk, with at most its index file.
	waitFor(t, 5*time.Second, func() error {
		if st := s.Stats(); st.Segments != 1 || st.LiveMessages != 0 {
			return fmt.Errorf("segments %d live %d", st.Segments, st.LiveMessages)
		}
		if segs, idx := listFiles(t, dir, segSuffix), listFiles(t, dir, idxSuffix); len(segs) != 1 || len(idx) > 1 {
			return fmt.Errorf("files left: %v %v", segs, idx)
		}
		return nil
	})
	if st := s.Stats(); st.SegmentsDeleted == 0 || st.DeadBytes > 4096+300 {
		t.Fatalf("stats after deletion: %+v", st)
	}
	// The store keeps working and offsets keep growing.
	if loc := mustPut(t, s, mkRecord(7, 10), 1); loc.Offset != 200 {
		t.Fatalf("next offset %d", loc.Offset)
	}
}

func TestMsgStoreCompactionKeepsLocsReadable(t *testing.T) {
	dir := t.TempDir()
	cfg := storeConfig(dir)
	cfg.SegmentSize = 32 << 10
	s := mustOpenStore(t, cfg)
	var locs []Loc
	for i := range 400 {
		locs = append(locs, mustPut(t, s, mkRecord(i, 150+i%50), 1))
	}
	first := s.log.segments()[0]
	waitFor(t, 5*time.Second, func() error {
		if !first.sealDone.Load() {
			return errors.New("first segment not sealed")
		}
		return nil
	})
	before := first.size.Load()
	live := map[uint64]bool{}
	for i, loc := range locs {
		if loc.Offset >= first.lastPlus1.Load() || i%3 == 0 {
			live[loc.Offset] = true
			continue
		}
		mustRelease(t, s, loc) // two thirds of the first segment die
	}
	waitFor(t, 5*time.Second, func() error {
		if st := s.Stats(); st.Compactions == 0 {
			return fmt.Errorf("no compaction yet: %+v", st)
		}
		return nil
	})
	after := first.size.Load()
	if after*2 > before {
		t.Fatalf("compaction shrank %d to %d", before, after)
	}
	if st, err := os.Stat(first.segPath); err != nil || st.Size() != after {
		t.Fatalf("file size %v %v, want %d", st.Size(), err, after)
	}
	check := func(s *Store) {
		for i, loc := range locs {
			_, err := s.Get(loc)
			if live[loc.Offset] {
				checkRead(t, s.Get, loc, mkRecord(i, 150+i%50))
			} else if !errors.Is(err, ErrNotFound) {
				t.Fatalf("released offset %d: %v", loc.Offset, err)
			}
		}
	}
	check(s)
	st := s.Stats()
	if st.CompactedBytes != before-after || st.LiveBytes > st.Bytes {
		t.Fatalf("stats after compaction: %+v", st)
	}
	// The index on disk describes the new file, and the state survives a restart.
	data, err := os.ReadFile(first.idxPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, info, err := decodeIndex(data); err != nil || info.size != after {
		t.Fatalf("compacted index: %+v %v", info, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpenStore(t, cfg)
	if !s2.Recovery().Clean || s2.NeedsRefRebuild() {
		t.Fatalf("reopen: %+v", s2.Recovery())
	}
	check(s2)
	// Releasing the rest of the compacted segment deletes it.
	for _, loc := range locs {
		if live[loc.Offset] && loc.Offset < first.lastPlus1.Load() {
			mustRelease(t, s2, loc)
		}
	}
	waitFor(t, 5*time.Second, func() error {
		if _, err := os.Stat(first.segPath); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("compacted segment not deleted: %v", err)
		}
		return nil
	})
}

func TestMsgStoreCheckpointOpenReadsNoBodies(t *testing.T) {
	dir := t.TempDir()
	cfg := storeConfig(dir)
	cfg.CompactDeadRatio = 1
	s := mustOpenStore(t, cfg)
	var locs []Loc
	for i := range 500 {
		locs = append(locs, mustPut(t, s, mkRecord(i, 80), 1+i%3))
	}
	for i, loc := range locs {
		if i%4 == 0 {
			mustRelease(t, s, loc)
		}
	}
	want := s.Stats()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpenStore(t, cfg)
	ri := s2.Recovery()
	if !ri.Clean || ri.BytesRead != 0 || ri.SegmentsScanned != 0 || s2.NeedsRefRebuild() {
		t.Fatalf("open with checkpoint: %+v", ri)
	}
	got := s2.Stats()
	if got.LiveMessages != want.LiveMessages || got.LiveBytes != want.LiveBytes || got.DeadBytes != want.DeadBytes ||
		got.NextOffset != want.NextOffset || got.Segments != want.Segments {
		t.Fatalf("stats after reopen %+v, before %+v", got, want)
	}
	if got.BytesRead != 0 {
		t.Fatalf("segment bytes read during open: %d", got.BytesRead)
	}
	for i, loc := range locs {
		refs := 1 + i%3
		if i%4 == 0 {
			refs--
		}
		for range refs {
			checkRead(t, s2.Get, loc, mkRecord(i, 80))
			mustRelease(t, s2, loc)
		}
		if err := s2.Release(loc); !errors.Is(err, ErrNotFound) {
			t.Fatalf("offset %d had more references than before the restart", loc.Offset)
		}
	}
}

func TestMsgStoreRebuildRefsAfterCrash(t *testing.T) {
	src := t.TempDir()
	cfg := storeConfig(src)
	s := mustOpenStore(t, cfg)
	var locs []Loc
	for i := range 300 {
		locs = append(locs, mustPut(t, s, mkRecord(i, 90), 2))
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	crash := copyDir(t, src) // the process dies here: no checkpoint

	c := cfg
	c.Dir = crash
	r := mustOpenStore(t, c)
	if !r.NeedsRefRebuild() || r.Recovery().Clean {
		t.Fatalf("after a crash: needs rebuild %v, recovery %+v", r.NeedsRefRebuild(), r.Recovery())
	}
	if _, err := r.Put(mkRecord(0, 1), 1); !errors.Is(err, ErrRebuildPending) {
		t.Fatalf("Put before rebuild: %v", err)
	}
	if err := r.Release(locs[0]); !errors.Is(err, ErrRebuildPending) {
		t.Fatalf("Release before rebuild: %v", err)
	}
	checkRead(t, r.Get, locs[5], mkRecord(5, 90)) // reads work meanwhile

	// The queues still hold: offsets >= 150 twice, 100..149 once; 0..99 were
	// acked everywhere. One queue names a record the crash lost.
	lost := Loc{Offset: locs[len(locs)-1].Offset + 40, Size: 200}
	info, err := r.RebuildRefs(func(yield func(Loc) bool) {
		for i, loc := range locs {
			n := 0
			switch {
			case i >= 150:
				n = 2
			case i >= 100:
				n = 1
			}
			for range n {
				if !yield(loc) {
					return
				}
			}
		}
		yield(lost)
	})
	if err != nil {
		t.Fatal(err)
	}
	if info.Refs != 150*2+50+1 || info.Records != 200 || info.Missing != 1 {
		t.Fatalf("rebuild info %+v", info)
	}
	if _, err := r.RebuildRefs(func(func(Loc) bool) {}); !errors.Is(err, ErrRebuildNotNeeded) {
		t.Fatalf("second RebuildRefs: %v", err)
	}
	for i, loc := range locs {
		_, err := r.Get(loc)
		if (i < 100) != errors.Is(err, ErrNotFound) || (i >= 100 && err != nil) {
			t.Fatalf("record %d after rebuild: %v", i, err)
		}
	}
	// The lost offset is never handed out again.
	if loc := mustPut(t, r, mkRecord(1, 1), 1); loc.Offset <= lost.Offset {
		t.Fatalf("new record got offset %d, a queue still names lost offset %d", loc.Offset, lost.Offset)
	}
	if _, err := r.Get(lost); !errors.Is(err, ErrNotFound) {
		t.Fatalf("lost Loc: %v", err)
	}
	// Segments holding only unreferenced records are deleted.
	waitFor(t, 5*time.Second, func() error {
		if _, err := os.Stat(filepath.Join(crash, segName(0)+segSuffix)); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("dead first segment still there: %v", err)
		}
		return nil
	})
	for i, loc := range locs[100:] {
		n := 1
		if i+100 >= 150 {
			n = 2
		}
		for range n {
			mustRelease(t, r, loc)
		}
	}
	if st := r.Stats(); st.LiveMessages != 1 {
		t.Fatalf("after releasing everything: %+v", st)
	}
}

// TestMsgStoreCleanReopenKeepsEmptyTables closes a store whose only segment
// has records but no live one (all acked before a crash, none named at the
// rebuild), so its liveness table has no bitmap word, the smallest table
// there is. The clean reopen must use the checkpoint, not ask for a rebuild.
func TestMsgStoreCleanReopenKeepsEmptyTables(t *testing.T) {
	src := t.TempDir()
	cfg := storeConfig(src)
	s := mustOpenStore(t, cfg)
	for i := range 5 {
		mustPut(t, s, mkRecord(i, 20), 1)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	c := cfg
	c.Dir = copyDir(t, src) // the crash: no checkpoint
	r, err := Open(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RebuildRefs(func(func(Loc) bool) {}); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r2 := mustOpenStore(t, c)
	if ri := r2.Recovery(); !ri.Clean || r2.NeedsRefRebuild() {
		t.Fatalf("clean reopen: needs rebuild %v, recovery %+v", r2.NeedsRefRebuild(), ri)
	}
}

// TestMsgStoreCrashDuringCompaction puts the compacted segment file next to
// the old index, as a crash between the two renames would, and checks every
// live record is still found.
func TestMsgStoreCrashDuringCompaction(t *testing.T) {
	src := t.TempDir()
	cfg := storeConfig(src)
	cfg.SegmentSize = 16 << 10
	s := mustOpenStore(t, cfg)
	var locs []Loc
	for i := range 200 {
		locs = append(locs, mustPut(t, s, mkRecord(i, 120), 1))
	}
	first := s.log.segments()[0]
	waitFor(t, 5*time.Second, func() error {
		if !first.sealDone.Load() {
			return errors.New("not sealed")
		}
		return nil
	})
	pre := copyDir(t, src)
	var live []int
	for i, loc := range locs {
		if loc.Offset < first.lastPlus1.Load() && i%4 != 0 {
			mustRelease(t, s, loc)
		} else {
			live = append(live, i)
		}
	}
	waitFor(t, 5*time.Second, func() error {
		if s.Stats().Compactions == 0 {
			return errors.New("no compaction")
		}
		return nil
	})
	compacted, err := os.ReadFile(first.segPath)
	if err != nil {
		t.Fatal(err)
	}
	segFile := filepath.Base(first.segPath)
	mixed := copyDirWith(t, pre, func(name string, data []byte) []byte {
		if name == segFile {
			return compacted
		}
		return data
	})
	c := cfg
	c.Dir = mixed
	r := mustOpenStore(t, c)
	if r.Recovery().SegmentsScanned < 1 {
		t.Fatalf("stale index trusted: %+v", r.Recovery())
	}
	if _, err := r.RebuildRefs(func(yield func(Loc) bool) {
		for _, i := range live {
			if !yield(locs[i]) {
				return
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	for _, i := range live {
		checkRead(t, r.Get, locs[i], mkRecord(i, 120))
	}
}

func TestMsgStoreRateLimiterStops(t *testing.T) {
	stop := make(chan struct{})
	lim := rateLimiter{rate: 1, start: time.Now()} // one byte per second
	done := make(chan error)
	go func() { done <- lim.wait(1<<20, stop) }()
	close(stop)
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("wait after stop: %v", err)
	}
}

// TestMsgStoreConcurrentPutReleaseCompact runs publishers, consumers, readers
// and a log iterator against a store that deletes and compacts segments under
// them, then checks every record still referenced reads back intact.
func TestMsgStoreConcurrentPutReleaseCompact(t *testing.T) {
	cfg := storeConfig(t.TempDir())
	cfg.SegmentSize = 8 << 10
	cfg.Flush = FlushOS
	s := mustOpenStore(t, cfg)
	type msg struct {
		loc  Loc
		seed int
		refs int
	}
	work := make(chan msg, 64)
	var mu sync.Mutex
	kept := map[uint64]msg{}
	errc := make(chan error, 32)
	var producers, consumers sync.WaitGroup
	for p := range 3 {
		producers.Add(1)
		go func() {
			defer producers.Done()
			for i := range 400 {
				seed := p*10_000 + i
				refs := 1 + seed%3
				loc, err := s.Put(mkRecord(seed, 60+seed%200), refs)
				if err != nil {
					errc <- err
					return
				}
				work <- msg{loc, seed, refs}
			}
		}()
	}
	for range 3 {
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			for m := range work {
				got, err := s.Get(m.loc)
				if err != nil || !sameRecord(got, mkRecord(m.seed, 60+m.seed%200)) {
					errc <- fmt.Errorf("Get %+v: %v", m.loc, err)
					return
				}
				n := m.refs
				if m.seed%5 == 0 {
					n-- // keep one reference of every fifth message
					mu.Lock()
					kept[m.loc.Offset] = m
					mu.Unlock()
				}
				for range n {
					if err := s.Release(m.loc); err != nil {
						errc <- err
						return
					}
				}
			}
		}()
	}
	stopIter := make(chan struct{})
	var iter sync.WaitGroup
	iter.Add(1)
	go func() { // the log iterator keeps working while files are compacted and deleted
		defer iter.Done()
		iterateUntil(s.log, stopIter, errc)
	}()
	producers.Wait()
	close(work)
	consumers.Wait()
	close(stopIter)
	iter.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() error {
		st := s.Stats()
		if st.LiveMessages != int64(len(kept)) {
			return fmt.Errorf("live %d, want %d", st.LiveMessages, len(kept))
		}
		if st.DeadBytes*2 > st.Bytes+cfg.SegmentSize {
			return fmt.Errorf("disk not reclaimed: %+v", st)
		}
		return nil
	})
	for _, m := range kept {
		checkRead(t, s.Get, m.loc, mkRecord(m.seed, 60+m.seed%200))
	}
	t.Logf("stats: %+v", s.Stats())
}

// iterateUntil scans the log from the start again and again until stop,
// reporting offsets out of order or iterator errors.
func iterateUntil(l *Log, stop <-chan struct{}, errc chan<- error) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		it := l.Iterate(0)
		var prev uint64
		first := true
		for it.Next() {
			off := it.Record().Offset
			if !first && off <= prev {
				errc <- fmt.Errorf("iterator went from %d to %d", prev, off)
				return
			}
			prev, first = off, false
		}
		if err := it.Err(); err != nil {
			errc <- fmt.Errorf("iterate: %w", err)
			return
		}
	}
}
