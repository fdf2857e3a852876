package queueindex

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// testConfig returns a config for dir without fdatasync on Flush (tests that
// need it turn it on) and a discarding logger.
func testConfig(dir string) Config {
	cfg := DefaultConfig()
	cfg.Dir = dir
	cfg.Sync = false
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

func mustOpen(t testing.TB, cfg Config) (*Index, Recovered) {
	t.Helper()
	ix, rec, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", cfg.Dir, err)
	}
	return ix, rec
}

// crash drops the index the way a killed process would: changes not yet
// flushed are lost, what Flush wrote stays in the files (as in the page cache
// of a killed process), no checkpoint is written and the lock is released.
func (ix *Index) crash() {
	ix.flushMu.Lock()
	defer ix.flushMu.Unlock()
	ix.mu.Lock()
	ix.closed = true
	_ = ix.releasePagesLocked() // a simulated crash has nobody to report to
	ix.mu.Unlock()
	_ = ix.closeFiles()
}

// entryFor returns a distinct entry for message i, exercising every field.
func entryFor(i uint64) Entry {
	e := Entry{
		Offset:     i*1000 + 7,
		Pos:        uint32(i * 3),
		Size:       uint32(i%5000) + 1,
		Priority:   uint8(i % 10),
		Persistent: i%2 == 0,
	}
	if i%3 == 0 {
		e.Expiry = 1_700_000_000_000 + int64(i)
	}
	return e
}

// appendN appends entryFor(first..first+n-1) and checks that the ids are the
// expected consecutive ones, starting at the index's next id.
func appendN(t testing.TB, ix *Index, first, n uint64) (firstSeq uint64) {
	t.Helper()
	firstSeq = ix.Stats().NextSeq
	for i := range n {
		seq, err := ix.Append(entryFor(first + i))
		if err != nil {
			t.Fatalf("Append %d: %v", first+i, err)
		}
		if seq != firstSeq+i {
			t.Fatalf("Append %d got seq %d, want %d", first+i, seq, firstSeq+i)
		}
	}
	return firstSeq
}

func mustFlush(t testing.TB, ix *Index) {
	t.Helper()
	if err := ix.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// all returns every live entry via ForEach.
func all(t testing.TB, ix *Index) map[uint64]Entry {
	t.Helper()
	got := map[uint64]Entry{}
	last, first := uint64(0), true
	err := ix.ForEach(func(seq uint64, e Entry) bool {
		if !first && seq <= last {
			t.Fatalf("ForEach out of order: %d after %d", seq, last)
		}
		first, last = false, seq
		got[seq] = e
		return true
	})
	if err != nil {
		t.Fatalf("ForEach: %v", err)
	}
	return got
}

// checkEntries compares an index's live entries with want.
func checkEntries(t testing.TB, ix *Index, want map[uint64]Entry) {
	t.Helper()
	got := all(t, ix)
	if len(got) != len(want) {
		t.Fatalf("index has %d live entries, want %d", len(got), len(want))
	}
	for seq, w := range want {
		if g, ok := got[seq]; !ok || g != w {
			t.Fatalf("seq %d: got %+v (present %v), want %+v", seq, g, ok, w)
		}
	}
	if st := ix.Stats(); st.Live != uint64(len(want)) {
		t.Fatalf("Stats.Live = %d, want %d", st.Live, len(want))
	}
}

func segFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.qi"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

func fileExists(t testing.TB, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err == nil {
		return true
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return false
}
