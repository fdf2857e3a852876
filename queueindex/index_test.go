package queueindex

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	ok := testConfig(t.TempDir())
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for name, mod := range map[string]func(*Config){
		"no dir":     func(c *Config) { c.Dir = "" },
		"zero cache": func(c *Config) { c.CacheSegments = 0 },
		"huge cache": func(c *Config) { c.CacheSegments = MaxCacheSegments + 1 },
		"nil logger": func(c *Config) { c.Logger = nil },
		"zero value": func(c *Config) { *c = Config{Dir: c.Dir} },
	} {
		c := ok
		mod(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v, want ErrInvalidConfig", name, err)
		}
		if _, _, err := Open(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Open = %v, want ErrInvalidConfig", name, err)
		}
	}
}

func TestAppendAckRoundTripAcrossRestart(t *testing.T) {
	for _, clean := range []bool{true, false} {
		name := map[bool]string{true: "clean", false: "crash"}[clean]
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.Sync = true
			ix, rec := mustOpen(t, cfg)
			if rec.NextSeq != 0 || rec.Live != 0 {
				t.Fatalf("fresh index: %+v", rec)
			}
			const n = 3*SlotsPerSegment + 500
			appendN(t, ix, 0, n)
			want := map[uint64]Entry{}
			var wantBytes uint64
			for seq := range uint64(n) {
				if seq%3 == 0 {
					if err := ix.Ack(seq); err != nil {
						t.Fatalf("Ack %d: %v", seq, err)
					}
					continue
				}
				want[seq] = entryFor(seq)
				wantBytes += uint64(entryFor(seq).Size)
			}
			mustFlush(t, ix)
			checkEntries(t, ix, want)
			if clean {
				if err := ix.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				ix.crash()
			}

			ix, rec = mustOpen(t, cfg)
			defer ix.Close()
			if rec.Live != uint64(len(want)) || rec.Bytes != wantBytes || rec.Clean != clean {
				t.Fatalf("recovered %+v, want live %d bytes %d clean %v", rec, len(want), wantBytes, clean)
			}
			if rec.Torn != 0 || rec.Corrupt != 0 {
				t.Fatalf("damage reported after an orderly write: %+v", rec)
			}
			checkEntries(t, ix, want)
			if st := ix.Stats(); st.LiveBytes != wantBytes {
				t.Fatalf("Stats.LiveBytes = %d, want %d", st.LiveBytes, wantBytes)
			}
			// Settling everything recovered works and survives another restart.
			for seq := range want {
				if err := ix.Ack(seq); err != nil {
					t.Fatalf("Ack recovered %d: %v", seq, err)
				}
			}
			mustFlush(t, ix)
			if err := ix.Close(); err != nil {
				t.Fatal(err)
			}
			ix, rec = mustOpen(t, cfg)
			if rec.Live != 0 {
				t.Fatalf("after acking all: %+v", rec)
			}
			// At most the segment of the last id handed out is kept (it has no
			// file if that id came from the lease after the crash).
			files := segFiles(t, cfg.Dir)
			if len(files) > 1 || (len(files) == 1 && files[0] != segName((rec.NextSeq-1)/SlotsPerSegment)) {
				t.Fatalf("settled index keeps files %v (next seq %d)", files, rec.NextSeq)
			}
			if clean && len(files) != 1 {
				t.Fatalf("clean run lost its last segment: %v", files)
			}
		})
	}
}

func TestSeqNeverReusedAfterRestart(t *testing.T) {
	type step func(t *testing.T, ix *Index, dir string) *Index
	reopen := func(clean bool) step {
		return func(t *testing.T, ix *Index, dir string) *Index {
			if clean {
				if err := ix.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				ix.crash()
			}
			nix, _ := mustOpen(t, testConfig(dir))
			return nix
		}
	}
	removeSegments := func(t *testing.T, dir string) {
		for _, f := range segFiles(t, dir) {
			if err := os.Remove(filepath.Join(dir, f)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := map[string]struct {
		flush bool
		mid   func(t *testing.T, ix *Index, dir string) // between the appends and the restart
		clean bool
		after func(t *testing.T, dir string) // while the index is closed
	}{
		"clean close":               {flush: true, clean: true},
		"crash after flush":         {flush: true},
		"crash before flush":        {flush: false},
		"all acked, clean":          {flush: true, mid: ackAll, clean: true},
		"all acked, crash":          {flush: true, mid: ackAll},
		"segments deleted, clean":   {flush: true, clean: true, after: removeSegments},
		"segments deleted, crash":   {flush: true, after: removeSegments},
		"purged, crash":             {flush: false, mid: purge},
		"acked, deleted, crash":     {flush: true, mid: ackAll, after: removeSegments},
		"exact segment end, crash":  {flush: true, mid: fillSegment},
		"exact segment end, clean":  {flush: true, mid: fillSegment, clean: true},
		"settled, deleted, removed": {flush: true, mid: ackAll, clean: true, after: removeSegments},
		// Past the lease without a Flush: Append must extend the lease itself.
		"far past the lease, no flush, crash": {flush: false, mid: appendPastLease},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ix, _ := mustOpen(t, testConfig(dir))
			appendN(t, ix, 0, 10)
			if c.flush {
				mustFlush(t, ix)
			}
			if c.mid != nil {
				c.mid(t, ix, dir)
			}
			handedOut := ix.Stats().NextSeq
			if c.clean {
				if err := ix.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				ix.crash()
			}
			if c.after != nil {
				c.after(t, dir)
			}
			ix, rec := mustOpen(t, testConfig(dir))
			defer ix.Close()
			if rec.NextSeq < handedOut {
				t.Fatalf("NextSeq %d after restart, but %d ids were handed out", rec.NextSeq, handedOut)
			}
			if c.clean && c.after == nil && rec.NextSeq != handedOut {
				t.Fatalf("clean restart: NextSeq %d, want exactly %d", rec.NextSeq, handedOut)
			}
			seq, err := ix.Append(entryFor(99))
			if err != nil {
				t.Fatal(err)
			}
			if seq < handedOut {
				t.Fatalf("Append after restart returned reused id %d (< %d)", seq, handedOut)
			}
			// And again, from the state this restart left.
			mustFlush(t, ix)
			ix = reopen(false)(t, ix, dir)
			if seq2, err := ix.Append(entryFor(100)); err != nil || seq2 <= seq {
				t.Fatalf("second restart: Append = %d, %v; want > %d", seq2, err, seq)
			}
		})
	}
}

func ackAll(t *testing.T, ix *Index, _ string) {
	t.Helper()
	_, err := ix.ReadRange(0, 1<<30, func(seq uint64, _ Entry) bool {
		if err := ix.Ack(seq); err != nil {
			t.Fatalf("Ack %d: %v", seq, err)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	mustFlush(t, ix)
}

func appendPastLease(t *testing.T, ix *Index, _ string) {
	t.Helper()
	appendN(t, ix, 10, 2*leaseAhead+5)
}

func purge(t *testing.T, ix *Index, _ string) {
	t.Helper()
	if _, err := ix.Purge(nil); err != nil {
		t.Fatal(err)
	}
}

// fillSegment appends up to the end of the segment, acks everything and
// flushes, so the settled segment is complete and the next id starts a new one.
func fillSegment(t *testing.T, ix *Index, dir string) {
	t.Helper()
	appendN(t, ix, 10, SlotsPerSegment-ix.Stats().NextSeq%SlotsPerSegment)
	ackAll(t, ix, dir)
}

func TestDeliveredFlagSurvivesRestart(t *testing.T) {
	for _, clean := range []bool{true, false} {
		t.Run(map[bool]string{true: "clean", false: "crash"}[clean], func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			ix, _ := mustOpen(t, cfg)
			appendN(t, ix, 0, 100)
			mustFlush(t, ix)
			for _, seq := range []uint64{3, 50, 99} {
				if err := ix.MarkDelivered(seq); err != nil {
					t.Fatal(err)
				}
			}
			if err := ix.MarkDelivered(3); err != nil { // idempotent
				t.Fatal(err)
			}
			mustFlush(t, ix)
			if err := ix.MarkDelivered(7); err != nil { // never flushed
				t.Fatal(err)
			}
			if clean {
				if err := ix.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				ix.crash()
			}
			ix, _ = mustOpen(t, cfg)
			defer ix.Close()
			got := all(t, ix)
			for seq, e := range got {
				wantDelivered := seq == 3 || seq == 50 || seq == 99 || (clean && seq == 7)
				if e.Delivered != wantDelivered {
					t.Errorf("seq %d: Delivered = %v, want %v", seq, e.Delivered, wantDelivered)
				}
				e.Delivered = false
				if e != entryFor(seq) {
					t.Errorf("seq %d: entry %+v, want %+v", seq, e, entryFor(seq))
				}
			}
		})
	}
}

func TestAckAndMarkErrors(t *testing.T) {
	ix, _ := mustOpen(t, testConfig(t.TempDir()))
	defer ix.Close()
	appendN(t, ix, 0, 5)
	if err := ix.Ack(2); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"double ack":            ix.Ack(2),
		"mark acked":            ix.MarkDelivered(2),
		"ack not appended":      ix.Ack(5),
		"mark not appended":     ix.MarkDelivered(1 << 40),
		"ack far segment":       ix.Ack(10 * SlotsPerSegment),
		"ack max":               ix.Ack(^uint64(0)),
		"mark far segment, max": ix.MarkDelivered(^uint64(0) - 1),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	if st := ix.Stats(); st.Live != 4 {
		t.Fatalf("Live = %d after failed acks, want 4", st.Live)
	}
}

func TestSettledSegmentDeletedOnFlush(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Sync = true
	ix, _ := mustOpen(t, cfg)
	defer ix.Close()
	appendN(t, ix, 0, 3*SlotsPerSegment+10)
	mustFlush(t, ix)
	want := []string{"00000000.qi", "00000001.qi", "00000002.qi", "00000003.qi"}
	if got := segFiles(t, cfg.Dir); !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	// Settle segment 1 entirely and segment 0 but one entry.
	for seq := uint64(1); seq < 2*SlotsPerSegment; seq++ {
		if err := ix.Ack(seq); err != nil {
			t.Fatal(err)
		}
	}
	if !fileExists(t, filepath.Join(cfg.Dir, "00000001.qi")) {
		t.Fatal("settled segment removed before Flush")
	}
	mustFlush(t, ix)
	want = []string{"00000000.qi", "00000002.qi", "00000003.qi"}
	if got := segFiles(t, cfg.Dir); !slices.Equal(got, want) {
		t.Fatalf("after acking segment 1: files %v, want %v", got, want)
	}
	if err := ix.Ack(0); err != nil {
		t.Fatal(err)
	}
	// The last segment is kept even when settled: it records how far ids got.
	for seq := uint64(3 * SlotsPerSegment); seq < 3*SlotsPerSegment+10; seq++ {
		if err := ix.Ack(seq); err != nil {
			t.Fatal(err)
		}
	}
	mustFlush(t, ix)
	want = []string{"00000002.qi", "00000003.qi"}
	if got := segFiles(t, cfg.Dir); !slices.Equal(got, want) {
		t.Fatalf("after acking segment 0: files %v, want %v", got, want)
	}
	st := ix.Stats()
	if st.Segments != 2 || st.Live != SlotsPerSegment {
		t.Fatalf("Stats %+v, want 2 segments and %d live", st, SlotsPerSegment)
	}
	// Filling segment 3, settling it and moving on to segment 4 releases it.
	first := appendN(t, ix, 0, SlotsPerSegment-10+5)
	for seq := first; seq < 4*SlotsPerSegment; seq++ {
		if err := ix.Ack(seq); err != nil {
			t.Fatal(err)
		}
	}
	mustFlush(t, ix)
	want = []string{"00000002.qi", "00000004.qi"}
	if got := segFiles(t, cfg.Dir); !slices.Equal(got, want) {
		t.Fatalf("after moving on: files %v, want %v", got, want)
	}
}

func TestFlushCoalescesAdjacentSlots(t *testing.T) {
	ix, _ := mustOpen(t, testConfig(t.TempDir()))
	defer ix.Close()
	writes := func() uint64 { return ix.Stats().Writes }
	appendN(t, ix, 0, 300)
	w0 := writes()
	mustFlush(t, ix)
	if d := writes() - w0; d != 1 {
		t.Fatalf("flush of 300 appends made %d writes, want 1", d)
	}
	for _, seq := range []uint64{10, 11, 12, 100, 102, 200} {
		if err := ix.Ack(seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.MarkDelivered(13); err != nil {
		t.Fatal(err)
	}
	w0 = writes()
	mustFlush(t, ix)
	// 10-13 is one run, 100 and 102 merge across a one-slot gap, 200 is alone.
	if d := writes() - w0; d != 3 {
		t.Fatalf("flush of scattered changes made %d writes, want 3", d)
	}
	w0 = writes()
	mustFlush(t, ix)
	if d := writes() - w0; d != 0 {
		t.Fatalf("empty flush made %d writes", d)
	}
}

func TestReadRangePagingOverThreeSegments(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.CacheSegments = 2
	ix, _ := mustOpen(t, cfg)
	defer ix.Close()
	const n = 3 * SlotsPerSegment
	appendN(t, ix, 0, n)
	var want []uint64
	for seq := range uint64(n) {
		if seq%7 == 0 || (seq >= 5000 && seq < 6000) {
			if err := ix.Ack(seq); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want = append(want, seq)
	}
	mustFlush(t, ix)
	// Drop the cache through a restart so reads come from the files.
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix, _ = mustOpen(t, cfg)

	var got []uint64
	next, pages := uint64(0), 0
	for {
		before := len(got)
		nx, err := ix.ReadRange(next, 1000, func(seq uint64, e Entry) bool {
			if e != entryFor(seq) {
				t.Fatalf("seq %d: %+v, want %+v", seq, e, entryFor(seq))
			}
			got = append(got, seq)
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		if nx < next {
			t.Fatalf("ReadRange went backwards: %d -> %d", next, nx)
		}
		if st := ix.Stats(); st.CachedSegments > cfg.CacheSegments {
			t.Fatalf("cache holds %d pages, bound %d", st.CachedSegments, cfg.CacheSegments)
		}
		next = nx
		pages++
		if len(got) == before {
			break
		}
		if len(got)-before > 1000 {
			t.Fatalf("page of %d entries, max 1000", len(got)-before)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged read returned %d entries, want %d (first diff near %d)", len(got), len(want), firstDiff(got, want))
	}
	if next != n {
		t.Fatalf("final next %d, want NextSeq %d", next, n)
	}
	if pages < len(want)/1000 {
		t.Fatalf("read in %d pages", pages)
	}

	// A refusing fn stops before the refused entry and hands its id back.
	nx, err := ix.ReadRange(4999, 10, func(seq uint64, _ Entry) bool { return seq < 6002 })
	if err != nil || nx != 6002 {
		t.Fatalf("ReadRange with refusal = %d, %v; want 6002", nx, err)
	}
	// Reading past the end returns where the index ends.
	nx, err = ix.ReadRange(n+50, 10, func(uint64, Entry) bool { t.Fatal("entry past the end"); return false })
	if err != nil || nx != n+50 {
		t.Fatalf("ReadRange past end = %d, %v", nx, err)
	}
	if nx, err = ix.ReadRange(0, 0, nil); err != nil || nx != 0 {
		t.Fatalf("ReadRange max 0 = %d, %v", nx, err)
	}
}

func firstDiff(a, b []uint64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestPurge(t *testing.T) {
	cfg := testConfig(t.TempDir())
	ix, _ := mustOpen(t, cfg)
	const n = 2*SlotsPerSegment + 100
	appendN(t, ix, 0, n)
	mustFlush(t, ix)
	appendN(t, ix, n, 50) // unflushed ones are purged too
	want := map[uint64]Entry{}
	for seq := range uint64(n + 50) {
		if seq%10 == 0 {
			if err := ix.Ack(seq); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want[seq] = entryFor(seq)
	}
	seen := map[uint64]Entry{}
	purged, err := ix.Purge(func(seq uint64, e Entry) { seen[seq] = e })
	if err != nil {
		t.Fatal(err)
	}
	if purged != uint64(len(want)) || len(seen) != len(want) {
		t.Fatalf("Purge settled %d and visited %d, want %d", purged, len(seen), len(want))
	}
	for seq, e := range want {
		if seen[seq] != e {
			t.Fatalf("Purge visited seq %d as %+v, want %+v", seq, seen[seq], e)
		}
	}
	if files := segFiles(t, cfg.Dir); len(files) != 0 {
		t.Fatalf("files after Purge: %v", files)
	}
	st := ix.Stats()
	if st.Live != 0 || st.Segments != 0 || st.NextSeq != n+50 {
		t.Fatalf("Stats after Purge: %+v", st)
	}
	if err := ix.Ack(5); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Ack after Purge: %v", err)
	}
	seq := appendN(t, ix, 0, 3)
	if seq != n+50 {
		t.Fatalf("first id after Purge %d, want %d", seq, n+50)
	}
	mustFlush(t, ix)
	ix.crash()
	ix, rec := mustOpen(t, cfg)
	defer ix.Close()
	if rec.Live != 3 || rec.Corrupt != 0 {
		t.Fatalf("after Purge and crash: %+v", rec)
	}
	checkEntries(t, ix, map[uint64]Entry{seq: entryFor(0), seq + 1: entryFor(1), seq + 2: entryFor(2)})
}

func TestCheckpointUsedOnCleanOpen(t *testing.T) {
	cfg := testConfig(t.TempDir())
	ix, _ := mustOpen(t, cfg)
	const n = 3*SlotsPerSegment + 7
	appendN(t, ix, 0, n)
	for seq := uint64(0); seq < n; seq += 2 {
		if err := ix.Ack(seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix, rec := mustOpen(t, cfg)
	defer ix.Close()
	if !rec.Clean || rec.CheckpointErr != nil {
		t.Fatalf("clean open did not use the checkpoint: %+v", rec)
	}
	if st := ix.Stats(); st.SegmentReads != 0 {
		t.Fatalf("clean open read %d segments, want 0", st.SegmentReads)
	}
	if rec.Live != n/2 || rec.NextSeq != n || rec.Segments != 4 {
		t.Fatalf("recovered %+v", rec)
	}
	// The counts are right: settling the rest deletes the segments.
	for seq := uint64(1); seq < 3*SlotsPerSegment; seq += 2 {
		if err := ix.Ack(seq); err != nil {
			t.Fatal(err)
		}
	}
	mustFlush(t, ix)
	if files := segFiles(t, cfg.Dir); !slices.Equal(files, []string{"00000003.qi"}) {
		t.Fatalf("files %v", files)
	}
}

func TestCheckpointIgnoredWhenDamaged(t *testing.T) {
	setup := func(t *testing.T) (Config, map[uint64]Entry) {
		cfg := testConfig(t.TempDir())
		ix, _ := mustOpen(t, cfg)
		appendN(t, ix, 0, 2*SlotsPerSegment+10)
		want := map[uint64]Entry{}
		for seq := range uint64(2*SlotsPerSegment + 10) {
			if seq%5 == 0 {
				if err := ix.Ack(seq); err != nil {
					t.Fatal(err)
				}
			} else {
				want[seq] = entryFor(seq)
			}
		}
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
		return cfg, want
	}
	ckPath := func(cfg Config) string { return filepath.Join(cfg.Dir, checkpointName) }
	cases := map[string]struct {
		damage func(t *testing.T, cfg Config)
		want   error
	}{
		"flipped bit": {func(t *testing.T, cfg Config) {
			b, err := os.ReadFile(ckPath(cfg))
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x10
			if err := os.WriteFile(ckPath(cfg), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, ErrCorrupt},
		"truncated": {func(t *testing.T, cfg Config) {
			if err := os.Truncate(ckPath(cfg), 20); err != nil {
				t.Fatal(err)
			}
		}, ErrCorrupt},
		"segment file grew": {func(t *testing.T, cfg Config) {
			f, err := os.OpenFile(filepath.Join(cfg.Dir, "00000002.qi"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write(make([]byte, SlotSize)); err != nil {
				t.Fatal(err)
			}
		}, ErrStaleCheckpoint},
		"segment file missing": {func(t *testing.T, cfg Config) {
			if err := os.Remove(filepath.Join(cfg.Dir, "00000000.qi")); err != nil {
				t.Fatal(err)
			}
		}, ErrStaleCheckpoint},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, want := setup(t)
			c.damage(t, cfg)
			if name == "segment file missing" {
				for seq := range want {
					if seq < SlotsPerSegment {
						delete(want, seq)
					}
				}
			}
			ix, rec := mustOpen(t, cfg)
			defer ix.Close()
			if rec.Clean || !errors.Is(rec.CheckpointErr, c.want) {
				t.Fatalf("recovered %+v, want a scan with CheckpointErr %v", rec, c.want)
			}
			if st := ix.Stats(); st.SegmentReads != uint64(rec.Segments) {
				t.Fatalf("scan read %d segments, have %d", st.SegmentReads, rec.Segments)
			}
			checkEntries(t, ix, want)
			if rec.NextSeq < 2*SlotsPerSegment+10 {
				t.Fatalf("NextSeq %d reuses ids", rec.NextSeq)
			}
		})
	}
	t.Run("dirty after crash", func(t *testing.T) {
		cfg := testConfig(t.TempDir())
		ix, _ := mustOpen(t, cfg)
		appendN(t, ix, 0, 10)
		mustFlush(t, ix)
		ix.crash()
		ix, rec := mustOpen(t, cfg)
		defer ix.Close()
		if rec.Clean || rec.CheckpointErr != nil || rec.Live != 10 {
			t.Fatalf("after crash: %+v", rec)
		}
	})
}

func TestSecondOpenIsLocked(t *testing.T) {
	cfg := testConfig(t.TempDir())
	ix, _ := mustOpen(t, cfg)
	if _, _, err := Open(cfg); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix, _ = mustOpen(t, cfg)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestClosedAndDeleted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	ix, _ := mustOpen(t, testConfig(dir))
	appendN(t, ix, 0, 10)
	if err := ix.Delete(); err != nil {
		t.Fatal(err)
	}
	if fileExists(t, dir) {
		t.Fatal("Delete left the directory")
	}
	checks := map[string]error{
		"Append":        func() error { _, err := ix.Append(Entry{}); return err }(),
		"Ack":           ix.Ack(1),
		"MarkDelivered": ix.MarkDelivered(1),
		"Flush":         ix.Flush(),
		"Sync":          ix.Sync(),
		"ReadRange":     func() error { _, err := ix.ReadRange(0, 1, func(uint64, Entry) bool { return true }); return err }(),
		"ForEach":       ix.ForEach(func(uint64, Entry) bool { return true }),
		"Purge":         func() error { _, err := ix.Purge(nil); return err }(),
		"Close":         ix.Close(),
		"Delete":        ix.Delete(),
	}
	for name, err := range checks {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Delete: %v, want ErrClosed", name, err)
		}
	}
}

func TestWriteFailureIsSticky(t *testing.T) {
	cfg := testConfig(t.TempDir())
	ix, _ := mustOpen(t, cfg)
	appendN(t, ix, 0, 10)
	mustFlush(t, ix)
	appendN(t, ix, 10, 10)
	// Pull the file out from under the index: the next pwrite fails as a
	// failing disk would make it.
	ix.mu.Lock()
	h := ix.tail.h
	ix.files.mu.Lock()
	if err := h.f.Close(); err != nil {
		t.Fatal(err)
	}
	ix.files.mu.Unlock()
	ix.mu.Unlock()
	if err := ix.Flush(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Flush with a closed file: %v, want ErrFailed", err)
	}
	if _, err := ix.Append(Entry{}); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append after failure: %v, want ErrFailed", err)
	}
	if err := ix.Flush(); !errors.Is(err, ErrFailed) {
		t.Fatalf("second Flush: %v, want ErrFailed", err)
	}
	// The ten entries the failed flush did not write are still handed out,
	// in order and intact, however long the failed index stays open.
	ix.ReleaseIdle()
	ix.ReleaseIdle()
	var lost []uint64
	if err := ix.Unflushed(func(seq uint64, e Entry) {
		if e != entryFor(seq) {
			t.Errorf("Unflushed entry %d = %+v, want %+v", seq, e, entryFor(seq))
		}
		lost = append(lost, seq)
	}); err != nil {
		t.Fatalf("Unflushed on a failed index: %v", err)
	}
	if len(lost) != 10 || lost[0] != 10 || lost[9] != 19 {
		t.Fatalf("Unflushed gave %v, want ids 10..19", lost)
	}
	ix.files.mu.Lock()
	ix.files.detachLocked(h) // already closed above
	ix.files.mu.Unlock()
	if err := ix.Close(); err != nil {
		t.Fatalf("Close after failure: %v", err)
	}
	ix, rec := mustOpen(t, cfg)
	if rec.Clean || rec.Live != 10 {
		t.Fatalf("after a failed index: %+v, want a scan finding the 10 flushed entries", rec)
	}
	n := 0
	if err := ix.Unflushed(func(uint64, Entry) { n++ }); err != nil || n != 0 {
		t.Fatalf("Unflushed after a clean open: %d entries, err %v; want none", n, err)
	}
	// Abandon writes nothing: the append and the ack are gone at the next Open.
	appendN(t, ix, 20, 1)
	if err := ix.Ack(rec.NextSeq - 1); err == nil {
		t.Fatal("ack of an id never appended succeeded")
	}
	first, _ := ix.ReadRange(0, 1, func(uint64, Entry) bool { return true })
	if err := ix.Ack(first - 1); err != nil {
		t.Fatal(err)
	}
	if err := ix.Abandon(); err != nil {
		t.Fatalf("Abandon: %v", err)
	}
	if err := ix.Abandon(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Abandon: %v, want ErrClosed", err)
	}
	ix2, rec2 := mustOpen(t, cfg)
	defer ix2.Close()
	if rec2.Live != 10 {
		t.Fatalf("after Abandon: %d live entries, want the 10 flushed ones", rec2.Live)
	}
}

func TestForeignFilesAndOversizeSegment(t *testing.T) {
	cfg := testConfig(t.TempDir())
	ix, _ := mustOpen(t, cfg)
	appendN(t, ix, 0, SlotsPerSegment+5)
	mustFlush(t, ix)
	ix.crash()
	for _, name := range []string{"1.qi", "notes.qi", "00000007.qi.bak"} {
		if err := os.WriteFile(filepath.Join(cfg.Dir, name), []byte("not a segment"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(filepath.Join(cfg.Dir, "00000000.qi"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("trailing junk past the last slot")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ix, rec := mustOpen(t, cfg)
	defer ix.Close()
	if rec.Live != SlotsPerSegment+5 || rec.Corrupt != 0 || rec.CutBytes != 32 {
		t.Fatalf("recovered %+v", rec)
	}
	for _, name := range []string{"1.qi", "notes.qi", "00000007.qi.bak"} {
		if !fileExists(t, filepath.Join(cfg.Dir, name)) {
			t.Fatalf("Open removed foreign file %s", name)
		}
	}
	if fi, err := os.Stat(filepath.Join(cfg.Dir, "00000000.qi")); err != nil || fi.Size() != SegmentSize {
		t.Fatalf("oversize segment not cut back: %v %v", fi.Size(), err)
	}
}

// TestConcurrentFlusher runs the intended pattern: one owner goroutine that
// appends, reads and acks, and a flusher goroutine calling Flush, under -race.
func TestConcurrentFlusher(t *testing.T) {
	cfg := testConfig(t.TempDir())
	ix, _ := mustOpen(t, cfg)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	flushErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := ix.Flush(); err != nil {
				flushErr <- err
				return
			}
			_ = ix.Stats()
		}
	}()
	const n = 3 * SlotsPerSegment
	want := map[uint64]Entry{}
	head := uint64(0)
	for i := range uint64(n) {
		seq, err := ix.Append(entryFor(i))
		if err != nil {
			t.Fatal(err)
		}
		want[seq] = entryFor(i)
		if i%100 == 99 {
			head, err = ix.ReadRange(head, 60, func(seq uint64, _ Entry) bool {
				if err := ix.MarkDelivered(seq); err != nil {
					t.Error(err)
				}
				if err := ix.Ack(seq); err != nil {
					t.Error(err)
				}
				delete(want, seq)
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-flushErr:
		t.Fatal(err)
	default:
	}
	mustFlush(t, ix)
	ix.crash()
	ix, _ = mustOpen(t, cfg)
	defer ix.Close()
	checkEntries(t, ix, want)
}

// TestKilledProcess kills a real process that is using an index and checks
// what survives: everything flushed, nothing that was not. In the shared
// variant the index shares a FileCache of two files with another index that
// writes between its calls, so its files are closed and reopened throughout.
func TestKilledProcess(t *testing.T) {
	if dir := os.Getenv("QUEUEINDEX_CRASH_DIR"); dir != "" {
		crashChild(dir, os.Getenv("QUEUEINDEX_CRASH_SHARED") != "")
		return
	}
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "own files", true: "shared cache"}[shared], func(t *testing.T) {
			killedProcess(t, shared)
		})
	}
}

func killedProcess(t *testing.T, shared bool) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledProcess$")
	cmd.Env = append(os.Environ(), "QUEUEINDEX_CRASH_DIR="+dir)
	if shared {
		cmd.Env = append(cmd.Env, "QUEUEINDEX_CRASH_SHARED=1")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	var got strings.Builder
	for !strings.Contains(got.String(), "ready") {
		n, err := out.Read(buf)
		if err != nil {
			_ = cmd.Process.Kill()
			t.Fatalf("child did not get ready (%q): %v", got.String(), err)
		}
		got.Write(buf[:n])
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed: the exit error is expected

	ix, rec := mustOpen(t, testConfig(dir))
	defer ix.Close()
	if rec.Clean || rec.Live != 4000 || rec.NextSeq < 5010 {
		t.Fatalf("after kill: %+v, want 4000 live and NextSeq >= 5010", rec)
	}
	for seq, e := range all(t, ix) {
		if seq < 1000 || seq >= 5000 {
			t.Fatalf("seq %d survived, but it was acked or never flushed", seq)
		}
		if e.Delivered != (seq == 1500) {
			t.Fatalf("seq %d Delivered=%v", seq, e.Delivered)
		}
	}
}

// crashChild is the body of the killed process: it flushes 5000 appends, the
// acks of the first 1000 and one delivered flag, then appends 10 more and an
// ack it never flushes, says "ready" and waits to be killed.
func crashChild(dir string, shared bool) {
	cfg := testConfig(dir)
	cfg.Sync = true
	interfere := func() {}
	if shared {
		cfg.Files, _ = NewFileCache(MinFileCacheLimit, nil)
		other := cfg
		other.Dir = dir + ".other"
		oix, _, err := Open(other)
		if err != nil {
			panic(err)
		}
		interfere = func() {
			if _, err := oix.Append(entryFor(0)); err != nil {
				panic(err)
			}
			if err := oix.Flush(); err != nil {
				panic(err)
			}
		}
	}
	ix, _, err := Open(cfg)
	if err != nil {
		panic(err)
	}
	for i := range uint64(5000) {
		if _, err := ix.Append(entryFor(i)); err != nil {
			panic(err)
		}
		if i%1000 == 999 {
			if err := ix.Flush(); err != nil {
				panic(err)
			}
			interfere()
		}
	}
	for seq := range uint64(1000) {
		if err := ix.Ack(seq); err != nil {
			panic(err)
		}
	}
	if err := ix.MarkDelivered(1500); err != nil {
		panic(err)
	}
	if err := ix.Flush(); err != nil {
		panic(err)
	}
	interfere()
	for i := range uint64(10) {
		if _, err := ix.Append(entryFor(i)); err != nil {
			panic(err)
		}
	}
	if err := ix.Ack(2000); err != nil {
		panic(err)
	}
	os.Stdout.WriteString("ready\n")
	select {}
}

// TestImportsOnlyStandardLibrary keeps queueindex a leaf package.
func TestImportsOnlyStandardLibrary(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/warrenmq/warren/queueindex" {
			t.Errorf("queueindex depends on non-standard package %s", p)
		}
	}
}

// TestSyncPolicy checks that Flush fdatasyncs exactly when Config.Sync says
// so, and that Sync always does.
func TestSyncPolicy(t *testing.T) {
	for _, syncOn := range []bool{false, true} {
		t.Run(map[bool]string{false: "os", true: "fsync"}[syncOn], func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.Sync = syncOn
			ix, _ := mustOpen(t, cfg)
			defer ix.Close()
			appendN(t, ix, 0, 10)
			mustFlush(t, ix) // creates the segment file
			appendN(t, ix, 10, 10)
			s0 := ix.Stats().Syncs
			mustFlush(t, ix)
			s1 := ix.Stats().Syncs
			if got := s1 > s0; got != syncOn {
				t.Fatalf("Flush with Sync=%v made %d syncs", syncOn, s1-s0)
			}
			appendN(t, ix, 20, 10)
			if err := ix.Sync(); err != nil {
				t.Fatal(err)
			}
			if s2 := ix.Stats().Syncs; s2 == s1 {
				t.Fatal("Sync made no fdatasync")
			}
		})
	}
}

// TestReleaseIdleFreesUnusedPages: pages untouched between two ReleaseIdle
// calls are freed, dirty ones never, and the index works on as before.
func TestReleaseIdleFreesUnusedPages(t *testing.T) {
	ix, _ := mustOpen(t, testConfig(t.TempDir()))
	defer ix.Close()
	first := appendN(t, ix, 0, 10)
	if got := ix.ReleaseIdle(); got != 0 {
		t.Fatalf("first ReleaseIdle freed %d pages used since the start", got)
	}
	// Unflushed appends keep their page through any number of calls.
	if got := ix.ReleaseIdle(); got != 0 || ix.Stats().CachedSegments != 1 {
		t.Fatalf("ReleaseIdle freed %d pages holding unflushed appends (cached %d)", got, ix.Stats().CachedSegments)
	}
	mustFlush(t, ix)
	if got := ix.ReleaseIdle(); got != 1 || ix.Stats().CachedSegments != 0 {
		t.Fatalf("ReleaseIdle on an idle flushed index freed %d, cached %d; want 1, 0", got, ix.Stats().CachedSegments)
	}
	// The next append reads the tail back; a page in use survives one call.
	appendN(t, ix, 10, 5)
	mustFlush(t, ix)
	if got := ix.ReleaseIdle(); got != 0 {
		t.Fatalf("ReleaseIdle freed %d pages used since the previous call", got)
	}
	if err := ix.Ack(first + 3); err != nil {
		t.Fatal(err)
	}
	mustFlush(t, ix)
	want := map[uint64]Entry{}
	for i := range uint64(15) {
		if i != 3 {
			want[first+i] = entryFor(i)
		}
	}
	checkEntries(t, ix, want)
}
