package queueindex

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func newTestFiles(t testing.TB, limit int) *FileCache {
	t.Helper()
	c, err := NewFileCache(limit, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// openFDs counts the process's open descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(des)
}

// checkBound fails if c holds more than its limit open, or the process more
// descriptors than base plus the limit (nothing else opens files in the test
// meanwhile).
func checkBound(t testing.TB, c *FileCache, base int, when string) {
	t.Helper()
	st := c.Stats()
	if st.Open > st.Limit {
		t.Fatalf("%s: cache holds %d files open, limit %d", when, st.Open, st.Limit)
	}
	if n := openFDs(t); n > base+st.Limit {
		t.Fatalf("%s: process has %d descriptors, %d before the indexes and a limit of %d", when, n, base, st.Limit)
	}
}

func TestNewFileCacheLimit(t *testing.T) {
	if _, err := NewFileCache(1, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("limit 1: %v, want ErrInvalidConfig", err)
	}
	for _, limit := range []int{0, MinFileCacheLimit, 1 << 20} {
		if _, err := NewFileCache(limit, nil); err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
	}
}

// TestSharedFileCacheBoundsDescriptors: 60 indexes sharing a cache of 8
// files append, ack, mark and flush round robin across segment boundaries;
// the process never holds more than 8 of their files, every file the cache
// closed is reopened when needed, and everything survives a clean restart and
// a crash.
func TestSharedFileCacheBoundsDescriptors(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(map[bool]string{false: "clean", true: "crash"}[crash], func(t *testing.T) {
			const queues, limit = 60, 8
			base := openFDs(t)
			files := newTestFiles(t, limit)
			root := t.TempDir()
			cfgs := make([]Config, queues)
			ixs := make([]*Index, queues)
			for i := range cfgs {
				cfgs[i] = testConfig(filepath.Join(root, fmt.Sprint("q", i)))
				cfgs[i].Sync = true
				cfgs[i].Files = files
				ixs[i], _ = mustOpen(t, cfgs[i])
				checkBound(t, files, base, "after Open")
			}
			want := make([]map[uint64]Entry, queues)
			for i := range want {
				want[i] = map[uint64]Entry{}
			}
			// 3 rounds of 1500 appends: every index crosses a segment
			// boundary, and the acks and flags of round r-1 touch pages the
			// cache has closed since.
			for round := range uint64(3) {
				for i, ix := range ixs {
					first := appendN(t, ix, round*1500, 1500)
					for k := range uint64(1500) {
						want[i][first+k] = entryFor(round*1500 + k)
					}
					if round > 0 {
						prev := first - 1500
						if err := ix.Ack(prev + 7); err != nil {
							t.Fatal(err)
						}
						delete(want[i], prev+7)
						if err := ix.MarkDelivered(prev + 9); err != nil {
							t.Fatal(err)
						}
						e := want[i][prev+9]
						e.Delivered = true
						want[i][prev+9] = e
					}
					mustFlush(t, ix)
					checkBound(t, files, base, fmt.Sprintf("round %d queue %d", round, i))
				}
			}
			if st := files.Stats(); st.Evictions == 0 {
				t.Fatalf("no file was evicted: %+v", st)
			}
			for i, ix := range ixs {
				checkEntries(t, ix, want[i])
				if crash {
					ix.crash()
				} else if err := ix.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if st := files.Stats(); st.Open != 0 {
				t.Fatalf("%d files still open after every index closed", st.Open)
			}
			for i := range cfgs {
				ix, rec := mustOpen(t, cfgs[i])
				if rec.Clean == crash {
					t.Fatalf("queue %d: recovered %+v after crash=%v", i, rec, crash)
				}
				checkEntries(t, ix, want[i])
				checkBound(t, files, base, "after reopen")
				if err := ix.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestSyncSyncsSegmentsTheCacheClosed: without Config.Sync a Flush leaves its
// writes unsynced; a later Sync must fdatasync that segment even though the
// cache closed its file meanwhile, and the directory its creation changed.
func TestSyncSyncsSegmentsTheCacheClosed(t *testing.T) {
	files := newTestFiles(t, MinFileCacheLimit)
	root := t.TempDir()
	var mu sync.Mutex
	synced := map[string]int{}
	SetSyncObserver(func(path string) {
		mu.Lock()
		synced[path]++
		mu.Unlock()
	})
	defer SetSyncObserver(nil)

	var ixs [3]*Index
	for i := range ixs {
		cfg := testConfig(filepath.Join(root, fmt.Sprint("q", i)))
		cfg.Files = files
		ixs[i], _ = mustOpen(t, cfg)
		defer ixs[i].Close()
	}
	appendN(t, ixs[0], 0, 10)
	mustFlush(t, ixs[0])
	before := files.Stats().Evictions
	for _, ix := range ixs[1:] {
		appendN(t, ix, 0, 10)
		mustFlush(t, ix)
	}
	if files.Stats().Evictions == before {
		t.Fatal("the other indexes' flushes evicted nothing")
	}
	seg := ixs[0].segPath(0)
	mu.Lock()
	n := synced[seg]
	mu.Unlock()
	if n != 0 {
		t.Fatalf("segment synced %d times by flushes without Config.Sync", n)
	}
	syncsBefore := ixs[0].Stats().Syncs
	if err := ixs[0].Sync(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	n = synced[seg]
	mu.Unlock()
	if n != 1 {
		t.Fatalf("Sync after the cache closed the segment synced it %d times, want 1", n)
	}
	// The segment and the directory that got a new file.
	if got := ixs[0].Stats().Syncs - syncsBefore; got != 2 {
		t.Fatalf("Sync made %d syncs, want 2 (segment, directory)", got)
	}
	// Nothing is owed any more.
	if err := ixs[0].Sync(); err != nil {
		t.Fatal(err)
	}
	if got := ixs[0].Stats().Syncs - syncsBefore; got != 2 {
		t.Fatalf("a second Sync with nothing written synced again (%d syncs)", got)
	}
}

// TestSharedCacheKeepsOneIndexPerDirectory: with a shared cache no directory
// lock is held, yet a second index on the same directory is refused until the
// first closes.
func TestSharedCacheKeepsOneIndexPerDirectory(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Files = newTestFiles(t, 4)
	ix, _ := mustOpen(t, cfg)
	if _, _, err := Open(cfg); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	own := cfg
	own.Files = nil
	if _, _, err := Open(own); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open with its own cache: %v, want ErrLocked", err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix, _ = mustOpen(t, cfg)
	if err := ix.Delete(); err != nil {
		t.Fatal(err)
	}
	ix, _ = mustOpen(t, cfg)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseIdleClosesSharedDirectory: an idle index on a shared cache holds
// no descriptor after two ReleaseIdle rounds, and works on afterwards.
func TestReleaseIdleClosesSharedDirectory(t *testing.T) {
	files := newTestFiles(t, 16)
	cfg := testConfig(t.TempDir())
	cfg.Files = files
	cfg.Sync = true
	ix, _ := mustOpen(t, cfg)
	defer ix.Close()
	appendN(t, ix, 0, 10)
	mustFlush(t, ix)
	ix.ReleaseIdle()
	ix.ReleaseIdle()
	if st := files.Stats(); st.Open != 0 {
		t.Fatalf("idle index holds %d files open", st.Open)
	}
	appendN(t, ix, 10, SlotsPerSegment) // into a new segment: directory sync
	mustFlush(t, ix)
	want := map[uint64]Entry{}
	for i := range uint64(10 + SlotsPerSegment) {
		want[i] = entryFor(i)
	}
	checkEntries(t, ix, want)
}

// BenchmarkFlushManyIndexes appends one entry to each of 2,000 indexes in
// turn and flushes it, with a shared cache of 256 files (each flush reopens
// the index's segment file) and with no bound. ns/op is per append+flush.
func BenchmarkFlushManyIndexes(b *testing.B) {
	const indexes = 2000
	for _, m := range syncModes {
		for _, limit := range []int{256, 0} {
			b.Run(fmt.Sprintf("%s/files=%d", m.name, limit), func(b *testing.B) {
				files := newTestFiles(b, limit)
				root := b.TempDir()
				ixs := make([]*Index, indexes)
				for i := range ixs {
					cfg := benchConfig(b, m.sync)
					cfg.Dir = filepath.Join(root, fmt.Sprint(i))
					cfg.Files = files
					ixs[i], _ = mustOpen(b, cfg)
					defer ixs[i].Close()
					appendN(b, ixs[i], 0, 1) // the segment file exists before the timer
					mustFlush(b, ixs[i])
				}
				before := files.Stats().Opens
				e := entryFor(1)
				b.ResetTimer()
				for i := range b.N {
					ix := ixs[i%indexes]
					if _, err := ix.Append(e); err != nil {
						b.Fatal(err)
					}
					mustFlush(b, ix)
				}
				b.StopTimer()
				b.ReportMetric(float64(files.Stats().Opens-before)/float64(b.N), "opens/op")
			})
		}
	}
}
