package msgstore

import (
	"errors"
	"os"
	"testing"
	"time"
)

// checkLog asserts that l holds exactly records 0..n-1 of want (by offset),
// read both by iteration and by ReadAt through each Loc.
func checkLog(t *testing.T, l *Log, want []Record, n int) {
	t.Helper()
	recs, locs := readAll(t, l, 0)
	if len(recs) != n {
		t.Fatalf("log holds %d records, want %d", len(recs), n)
	}
	for i, r := range recs {
		if r.Offset != uint64(i) || !sameRecord(r, want[i]) {
			t.Fatalf("record %d: offset %d, differs from what was appended", i, r.Offset)
		}
		checkRead(t, l.ReadAt, locs[i], want[i])
	}
	if st := l.Stats(); st.NextOffset != uint64(n) {
		t.Fatalf("next offset %d, want %d", st.NextOffset, n)
	}
}

func TestMsgStoreLogTruncateAfter(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  int // keep offsets 0..cut
	}{
		{"in active segment", 295},
		{"in a sealed segment", 123},
		{"at a segment's last record", -1}, // set from the segments below
		{"below everything", -2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(dir)
			cfg.SegmentSize = 4096
			l := mustOpenLog(t, cfg)
			var recs []Record
			for i := range 300 {
				r := mkRecord(i, 100)
				mustAppend(t, l, r)
				recs = append(recs, r)
			}
			cut := tc.cut
			if cut == -1 {
				cut = int(l.segments()[3].lastPlus1.Load()) - 1
			}
			got := make(chan error, 1)
			l.WhenDurable(299, func(err error) { got <- err })
			var keep int
			if cut == -2 {
				// Offsets are unsigned: "below everything" is a log whose first
				// segment was removed, truncated below its base.
				if err := l.RemoveSegment(0); err != nil {
					t.Fatal(err)
				}
				base := l.segments()[0].base
				if err := l.TruncateAfter(base - 2); err != nil {
					t.Fatal(err)
				}
				if st := l.Stats(); st.NextOffset != base-1 || st.Segments != 1 {
					t.Fatalf("stats %+v, want one empty segment at %d", st, base-1)
				}
				return
			}
			if err := l.TruncateAfter(uint64(cut)); err != nil {
				t.Fatal(err)
			}
			keep = cut + 1
			// The cut is in the file itself, not only in memory: a crash
			// before the new segment reaches the disk must not bring it back.
			for _, s := range l.segments() {
				if fi, err := os.Stat(s.segPath); err != nil || fi.Size() != s.size.Load() {
					t.Fatalf("segment %s: file %v (err %v), published size %d", s.segPath, fi.Size(), err, s.size.Load())
				}
			}
			select {
			case err := <-got:
				if err != nil && !errors.Is(err, ErrTruncatedAway) {
					t.Fatalf("waiter of a removed offset: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("waiter of a removed offset never called")
			}
			checkLog(t, l, recs, keep)
			// Appends continue at cut+1 with new records; they become durable.
			for i := keep; i < keep+50; i++ {
				r := mkRecord(i+1000, 60)
				if loc := mustAppend(t, l, r); loc.Offset != uint64(i) {
					t.Fatalf("append after truncate got offset %d, want %d", loc.Offset, i)
				}
				if i < len(recs) {
					recs[i] = r
				} else {
					recs = append(recs, r)
				}
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			checkLog(t, l, recs, keep+50)

			// A crash now (what the OS holds, no checkpoint) and a clean
			// close both reopen to the same log.
			crashed := copyDir(t, dir)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{dir, crashed} {
				c := cfg
				c.Dir = d
				l2 := mustOpenLog(t, c)
				checkLog(t, l2, recs, keep+50)
				l2.Close()
			}
		})
	}
}

// A crash in the middle of a truncation leaves a prefix: the later segments
// go first, so the old tail can never reappear after a hole.
func TestMsgStoreLogTruncateCrashLeavesPrefix(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.SegmentSize = 4096
	l := mustOpenLog(t, cfg)
	var recs []Record
	for i := range 200 {
		r := mkRecord(i, 100)
		mustAppend(t, l, r)
		recs = append(recs, r)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	segs := l.segments()
	// The state after the later segments were removed but before the
	// segment holding the cut was cut: the segment files after segs[2].
	crashed := copyDirWith(t, dir, func(name string, data []byte) []byte {
		for _, s := range segs[3:] {
			if name == segName(s.base)+segSuffix || name == segName(s.base)+idxSuffix {
				return nil
			}
		}
		return data
	})
	c := cfg
	c.Dir = crashed
	l2 := mustOpenLog(t, c)
	checkLog(t, l2, recs, int(segs[3].base))
}

func TestMsgStoreLogTruncateRefusesStore(t *testing.T) {
	s := mustOpenStore(t, testConfig(t.TempDir()))
	if err := s.log.TruncateAfter(0); err == nil {
		t.Fatal("TruncateAfter on a Store's log succeeded")
	}
}
