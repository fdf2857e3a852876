package queueindex

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// writeFlushedAndCrash appends n entries, flushes them and crashes.
func writeFlushedAndCrash(t *testing.T, cfg Config, n uint64) {
	t.Helper()
	ix, _ := mustOpen(t, cfg)
	appendN(t, ix, 0, n)
	mustFlush(t, ix)
	ix.crash()
}

func wantFirst(n uint64, skip ...uint64) map[uint64]Entry {
	want := map[uint64]Entry{}
	for seq := range n {
		if !slices.Contains(skip, seq) {
			want[seq] = entryFor(seq)
		}
	}
	return want
}

// TestTornLastSlotIsUnwritten damages the last written slot as a write cut
// short after every possible byte would, in the three shapes a torn write can
// take on disk, and checks that Open treats it as never written, cuts it, and
// that nothing is reported the next time.
func TestTornLastSlotIsUnwritten(t *testing.T) {
	const n = 5
	last := int64((n - 1) * SlotSize)
	tear := map[string]func(t *testing.T, path string, k int){
		"short file": func(t *testing.T, path string, k int) {
			if err := os.Truncate(path, last+int64(k)); err != nil {
				t.Fatal(err)
			}
		},
		"head written": func(t *testing.T, path string, k int) {
			zero(t, path, last+int64(k), SlotSize-k)
		},
		"tail written": func(t *testing.T, path string, k int) {
			zero(t, path, last, k)
		},
	}
	for name, damage := range tear {
		for k := 1; k < SlotSize; k++ {
			t.Run(fmt.Sprintf("%s/%d", name, k), func(t *testing.T) {
				cfg := testConfig(t.TempDir())
				writeFlushedAndCrash(t, cfg, n)
				path := filepath.Join(cfg.Dir, segName(0))
				damage(t, path, k)
				size := fileSize(t, path)

				ix, rec := mustOpen(t, cfg)
				if rec.Torn != 1 || rec.Corrupt != 0 || rec.Live != n-1 || rec.CutBytes != size-last {
					t.Fatalf("recovered %+v, want 1 torn slot, %d live, %d bytes cut", rec, n-1, size-last)
				}
				if got := fileSize(t, path); got != last {
					t.Fatalf("segment is %d bytes after the cut, want %d", got, last)
				}
				checkEntries(t, ix, wantFirst(n-1))
				seq, err := ix.Append(entryFor(n))
				if err != nil {
					t.Fatal(err)
				}
				if seq < n {
					t.Fatalf("id %d of the torn slot handed out again as %d", n-1, seq)
				}
				mustFlush(t, ix)
				ix.crash()

				ix, rec = mustOpen(t, cfg)
				defer ix.Close()
				if rec.Torn != 0 || rec.Corrupt != 0 || rec.Live != n {
					t.Fatalf("second recovery %+v, want no damage and %d live", rec, n)
				}
				want := wantFirst(n - 1)
				want[seq] = entryFor(n)
				checkEntries(t, ix, want)
			})
		}
	}
}

func zero(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, n), off); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func flipBit(t *testing.T, path string, off int64, bit uint) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 1 << bit
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFlippedBitInMiddleSlot flips each bit position of a slot in the middle
// of the index: that entry is reported and skipped, the rest survives.
func TestFlippedBitInMiddleSlot(t *testing.T) {
	const n, bad = 100, 50
	for byteOff := range SlotSize {
		bit := uint(byteOff % 8)
		t.Run(fmt.Sprintf("byte%d", byteOff), func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			writeFlushedAndCrash(t, cfg, n)
			path := filepath.Join(cfg.Dir, segName(0))
			flipBit(t, path, bad*SlotSize+int64(byteOff), bit)

			ix, rec := mustOpen(t, cfg)
			if rec.Corrupt != 1 || !slices.Equal(rec.CorruptSeqs, []uint64{bad}) || rec.Torn != 0 || rec.Live != n-1 {
				t.Fatalf("recovered %+v, want seq %d corrupt and %d live", rec, bad, n-1)
			}
			checkEntries(t, ix, wantFirst(n, bad))
			if err := ix.Ack(bad); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Ack of the corrupt slot: %v, want ErrNotFound", err)
			}
			if err := ix.Ack(bad + 1); err != nil {
				t.Fatal(err)
			}
			if err := ix.Close(); err != nil {
				t.Fatal(err)
			}
			// A clean restart keeps the count (the slot stays skipped).
			ix, rec = mustOpen(t, cfg)
			defer ix.Close()
			if !rec.Clean || rec.Live != n-2 {
				t.Fatalf("clean reopen: %+v", rec)
			}
			checkEntries(t, ix, wantFirst(n, bad, bad+1))
		})
	}
}

// TestCorruptionAcrossSegments: damage at the end of one segment is corrupt
// (not torn) when a later segment has valid slots; a garbage file past the
// last valid slot is torn and removed; reports are capped.
func TestCorruptionAcrossSegments(t *testing.T) {
	t.Run("end of earlier segment", func(t *testing.T) {
		cfg := testConfig(t.TempDir())
		writeFlushedAndCrash(t, cfg, SlotsPerSegment+10)
		flipBit(t, filepath.Join(cfg.Dir, segName(0)), SegmentSize-SlotSize+9, 3)
		ix, rec := mustOpen(t, cfg)
		defer ix.Close()
		if rec.Corrupt != 1 || rec.Torn != 0 || !slices.Equal(rec.CorruptSeqs, []uint64{SlotsPerSegment - 1}) {
			t.Fatalf("recovered %+v", rec)
		}
		checkEntries(t, ix, wantFirst(SlotsPerSegment+10, SlotsPerSegment-1))
	})
	t.Run("garbage segment past the end", func(t *testing.T) {
		cfg := testConfig(t.TempDir())
		writeFlushedAndCrash(t, cfg, 10)
		garbage := make([]byte, 1000)
		if _, err := rand.Read(garbage); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(cfg.Dir, segName(3))
		if err := os.WriteFile(path, garbage, 0o644); err != nil {
			t.Fatal(err)
		}
		ix, rec := mustOpen(t, cfg)
		defer ix.Close()
		if rec.Corrupt != 0 || rec.Torn != (1000+SlotSize-1)/SlotSize || rec.CutBytes != 1000 || rec.Live != 10 {
			t.Fatalf("recovered %+v", rec)
		}
		if fileExists(t, path) {
			t.Fatal("garbage segment past the last valid slot was kept")
		}
		checkEntries(t, ix, wantFirst(10))
	})
	t.Run("many corrupt slots", func(t *testing.T) {
		cfg := testConfig(t.TempDir())
		writeFlushedAndCrash(t, cfg, 300)
		path := filepath.Join(cfg.Dir, segName(0))
		var skip []uint64
		for seq := uint64(100); seq < 200; seq++ {
			flipBit(t, path, int64(seq)*SlotSize+5, 1)
			skip = append(skip, seq)
		}
		ix, rec := mustOpen(t, cfg)
		defer ix.Close()
		if rec.Corrupt != 100 || len(rec.CorruptSeqs) != MaxReportedCorrupt || rec.CorruptSeqs[0] != 100 || rec.Live != 200 {
			t.Fatalf("recovered %+v", rec)
		}
		checkEntries(t, ix, wantFirst(300, skip...))
	})
	t.Run("everything corrupt", func(t *testing.T) {
		cfg := testConfig(t.TempDir())
		writeFlushedAndCrash(t, cfg, 3)
		path := filepath.Join(cfg.Dir, segName(0))
		for seq := range int64(3) {
			flipBit(t, path, seq*SlotSize+20, 0)
		}
		ix, rec := mustOpen(t, cfg)
		defer ix.Close()
		// No valid slot at all: everything is past "the last valid one".
		if rec.Torn != 3 || rec.Live != 0 || rec.NextSeq < 3 {
			t.Fatalf("recovered %+v", rec)
		}
	})
}
