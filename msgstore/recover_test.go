package msgstore

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// buildLog writes n records of bodySize bytes and closes the log cleanly.
func buildLog(t *testing.T, cfg Config, n, bodySize int) []Loc {
	t.Helper()
	l := mustOpenLog(t, cfg)
	var locs []Loc
	for i := range n {
		locs = append(locs, mustAppend(t, l, mkRecord(i, bodySize)))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return locs
}

func TestMsgStoreRecoverTornTailAtEveryByte(t *testing.T) {
	src := t.TempDir()
	cfg := testConfig(src)
	const n = 6
	locs := buildLog(t, cfg, n, 40)
	last := locs[n-1]
	segFile := segName(0) + segSuffix
	for cut := int(last.Pos); cut <= int(last.Pos+last.Size); cut++ {
		// A crash: no checkpoint, the active segment's index is stale (here:
		// gone), and the segment ends anywhere inside the last record.
		dir := copyDirWith(t, src, func(name string, data []byte) []byte {
			switch name {
			case checkpointName, segName(0) + idxSuffix:
				return nil
			case segFile:
				return data[:cut]
			}
			return data
		})
		c := cfg
		c.Dir = dir
		l, err := OpenLog(c)
		if err != nil {
			t.Fatalf("cut at %d: Open: %v", cut, err)
		}
		ri := l.Recovery()
		whole := cut == int(last.Pos+last.Size)
		wantRecords := n - 1
		if whole {
			wantRecords = n
		}
		if ri.Clean || ri.SegmentsScanned != 1 || ri.RecordsRecovered != int64(wantRecords) {
			t.Fatalf("cut at %d: recovery %+v", cut, ri)
		}
		switch {
		case whole && len(ri.Cuts) != 0:
			t.Fatalf("whole file reported cuts: %+v", ri.Cuts)
		case !whole && cut > int(last.Pos) && (len(ri.Cuts) != 1 || ri.BytesCut != int64(cut)-int64(last.Pos) ||
			!ri.Cuts[0].Tail || ri.Cuts[0].FirstLost != n-1 || ri.Cuts[0].Pos != int64(last.Pos)):
			t.Fatalf("cut at %d: cuts %+v bytes %d", cut, ri.Cuts, ri.BytesCut)
		}
		for i := range wantRecords {
			checkRead(t, l.ReadAt, locs[i], mkRecord(i, 40))
		}
		if st, err := os.Stat(filepath.Join(dir, segFile)); err != nil || (!whole && st.Size() != int64(last.Pos)) {
			t.Fatalf("cut at %d: segment not truncated to %d: %v %v", cut, last.Pos, st.Size(), err)
		}
		loc, err := l.Append(mkRecord(99, 7))
		if err != nil || loc.Offset != uint64(wantRecords) {
			t.Fatalf("cut at %d: append after recovery: %+v %v", cut, loc, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMsgStoreRecoverFlippedBitCutsFromThere(t *testing.T) {
	src := t.TempDir()
	cfg := testConfig(src)
	locs := buildLog(t, cfg, 20, 100)
	bad := locs[12]
	dir := copyDirWith(t, src, func(name string, data []byte) []byte {
		if name == checkpointName || name == segName(0)+idxSuffix {
			return nil
		}
		if strings.HasSuffix(name, segSuffix) {
			data[int(bad.Pos+bad.Size)-50] ^= 0x01 // inside the body
		}
		return data
	})
	cfg.Dir = dir
	l := mustOpenLog(t, cfg)
	ri := l.Recovery()
	if len(ri.Cuts) != 1 || ri.Cuts[0].Pos != int64(bad.Pos) || ri.Cuts[0].FirstLost != 12 ||
		!strings.Contains(ri.Cuts[0].Reason, "crc") {
		t.Fatalf("recovery %+v", ri)
	}
	for i := range 12 {
		checkRead(t, l.ReadAt, locs[i], mkRecord(i, 100))
	}
	for _, loc := range locs[12:] {
		if _, err := l.ReadAt(loc); !errors.Is(err, ErrNotFound) {
			t.Fatalf("record %d after the flipped bit: %v, want ErrNotFound", loc.Offset, err)
		}
	}
	if l.Stats().NextOffset != 12 {
		t.Fatalf("next offset %d, want 12", l.Stats().NextOffset)
	}
}

func TestMsgStoreRecoverCorruptMiddleSegment(t *testing.T) {
	src := t.TempDir()
	cfg := testConfig(src)
	cfg.SegmentSize = 2048
	locs := buildLog(t, cfg, 100, 60)
	segs := listFiles(t, src, segSuffix)
	if len(segs) < 4 {
		t.Fatalf("%d segments", len(segs))
	}
	midBase, _ := parseBase(segs[1], segSuffix)
	nextBase, _ := parseBase(segs[2], segSuffix)
	victim := locs[midBase+2]
	dir := copyDirWith(t, src, func(name string, data []byte) []byte {
		switch name {
		case checkpointName, strings.TrimSuffix(segs[1], segSuffix) + idxSuffix:
			return nil // crash, and the segment's index is gone, so it is scanned
		case segs[1]:
			data[victim.Pos+30] ^= 0x80
		}
		return data
	})
	cfg.Dir = dir
	l := mustOpenLog(t, cfg)
	ri := l.Recovery()
	if len(ri.Cuts) != 1 {
		t.Fatalf("cuts %+v", ri.Cuts)
	}
	c := ri.Cuts[0]
	if c.File != segs[1] || c.Tail || c.FirstLost != victim.Offset || c.NextBase != nextBase || c.Pos != int64(victim.Pos) {
		t.Fatalf("cut %+v, want file %s from offset %d up to %d", c, segs[1], victim.Offset, nextBase)
	}
	for i, loc := range locs {
		_, err := l.ReadAt(loc)
		lost := loc.Offset >= victim.Offset && loc.Offset < nextBase
		if lost != errors.Is(err, ErrNotFound) || (!lost && err != nil) {
			t.Fatalf("record %d (lost=%v): %v", i, lost, err)
		}
	}
	if got, _ := readAll(t, l, 0); len(got) != 100-int(nextBase-victim.Offset) {
		t.Fatalf("iterated %d records", len(got))
	}
	if loc := mustAppend(t, l, mkRecord(100, 1)); loc.Offset != 100 {
		t.Fatalf("append after recovery got offset %d", loc.Offset)
	}
}

func TestMsgStoreRecoverStaleCheckpointIgnored(t *testing.T) {
	src := t.TempDir()
	cfg := testConfig(src)
	buildLog(t, cfg, 10, 20)
	// The active segment grew after the checkpoint was written (garbage tail).
	name := filepath.Join(src, segName(0)+segSuffix)
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("garbage after the checkpoint"))
	f.Close()
	l := mustOpenLog(t, cfg)
	ri := l.Recovery()
	if ri.Clean || ri.CheckpointError == "" || ri.BytesCut != int64(len("garbage after the checkpoint")) {
		t.Fatalf("recovery %+v", ri)
	}
	if _, err := os.Stat(filepath.Join(src, checkpointName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("checkpoint still present after Open: %v", err)
	}
	got, _ := readAll(t, l, 0)
	if len(got) != 10 {
		t.Fatalf("%d records", len(got))
	}
}

func TestMsgStoreRecoverDamagedCheckpoint(t *testing.T) {
	src := t.TempDir()
	cfg := testConfig(src)
	buildLog(t, cfg, 10, 20)
	flipByte(t, filepath.Join(src, checkpointName), 9)
	l := mustOpenLog(t, cfg)
	ri := l.Recovery()
	if ri.Clean || !strings.Contains(ri.CheckpointError, "crc") {
		t.Fatalf("recovery %+v", ri)
	}
	// The active segment's index still matched, so nothing needed scanning.
	if ri.SegmentsScanned != 0 || len(ri.Cuts) != 0 {
		t.Fatalf("recovery %+v", ri)
	}
	if got, _ := readAll(t, l, 0); len(got) != 10 {
		t.Fatalf("%d records", len(got))
	}
}

func TestMsgStoreRecoverRemovesLeftovers(t *testing.T) {
	src := t.TempDir()
	cfg := testConfig(src)
	buildLog(t, cfg, 3, 20)
	junk := []string{segName(0) + segSuffix + compactSuffix, segName(0) + idxSuffix + compactSuffix + tmpSuffix,
		checkpointName + tmpSuffix, segName(77) + idxSuffix}
	for _, name := range junk {
		if err := os.WriteFile(filepath.Join(src, name), []byte("junk"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := mustOpenLog(t, cfg)
	got := slices.Clone(l.Recovery().FilesRemoved)
	slices.Sort(got)
	slices.Sort(junk)
	if !slices.Equal(got, junk) {
		t.Fatalf("removed %v, want %v", got, junk)
	}
	for _, name := range junk {
		if _, err := os.Stat(filepath.Join(src, name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s still there", name)
		}
	}
}
