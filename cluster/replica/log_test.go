package replica

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/warrenmq/warren/msgstore"
)

func dataRecs(from, n, epoch uint64) []Record {
	var out []Record
	for o := from; o < from+n; o++ {
		out = append(out, Record{Offset: o, Epoch: epoch, Kind: KindData, Data: []byte(fmt.Sprintf("rec-%d-%d", o, epoch))})
	}
	return out
}

func readAllRecs(t *testing.T, l Log) []Record {
	t.Helper()
	var out []Record
	from := l.FirstOffset()
	for from <= l.LastOffset() {
		n := 0
		if err := l.Read(from, 300, func(r Record) bool { out = append(out, r); from = r.Offset + 1; n++; return true }); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("read from %d got nothing, last %d", from, l.LastOffset())
		}
	}
	return out
}

func checkRecs(t *testing.T, l Log, want []Record) {
	t.Helper()
	got := readAllRecs(t, l)
	if len(got) != len(want) {
		t.Fatalf("log holds %d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Offset != w.Offset || g.Epoch != w.Epoch || g.Kind != w.Kind || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("record %d: %+v, want %+v", i, g, w)
		}
	}
}

// logContract runs the Log contract against one implementation. reopen
// simulates a restart after a clean close (the same storage).
func logContract(t *testing.T, l Log, reopen func(Log) Log) {
	if l.LastOffset() != 0 || l.FirstOffset() != 1 || l.DurableOffset() != 0 || len(l.Epochs()) != 0 {
		t.Fatalf("new log: last %d first %d durable %d epochs %v", l.LastOffset(), l.FirstOffset(), l.DurableOffset(), l.Epochs())
	}
	id := l.StorageID()
	if id == "" {
		t.Fatal("empty storage id")
	}
	want := append(dataRecs(1, 10, 1), Record{Offset: 11, Epoch: 3, Kind: KindEpochStart})
	want = append(want, dataRecs(12, 20, 3)...)
	if err := l.Append(want...); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(dataRecs(40, 1, 3)...); !errors.Is(err, ErrOffsetGap) {
		t.Fatalf("append with a gap: %v", err)
	}
	if err := l.Append(dataRecs(32, 1, 2)...); !errors.Is(err, ErrOffsetGap) {
		t.Fatalf("append of an older epoch: %v", err)
	}
	if l.LastOffset() != 31 || l.DurableOffset() != 0 {
		t.Fatalf("last %d durable %d before sync", l.LastOffset(), l.DurableOffset())
	}
	if err := l.Sync(); err != nil || l.DurableOffset() != 31 {
		t.Fatalf("sync: %v, durable %d", err, l.DurableOffset())
	}
	if e := l.Epochs(); len(e) != 2 || e[0] != (EpochStart{1, 1}) || e[1] != (EpochStart{3, 11}) {
		t.Fatalf("epochs %v", e)
	}
	checkRecs(t, l, want)

	// Truncate inside epoch 3, then into epoch 1: history follows.
	if err := l.TruncateAfter(20); err != nil {
		t.Fatal(err)
	}
	want = want[:20]
	checkRecs(t, l, want)
	if err := l.TruncateAfter(8); err != nil {
		t.Fatal(err)
	}
	want = want[:8]
	if e := l.Epochs(); len(e) != 1 || l.LastOffset() != 8 || l.DurableOffset() != 8 {
		t.Fatalf("after truncation: epochs %v last %d durable %d", e, l.LastOffset(), l.DurableOffset())
	}
	more := dataRecs(9, 5, 4)
	if err := l.Append(more...); err != nil {
		t.Fatal(err)
	}
	want = append(want, more...)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	logContractReopened(t, reopen(l), id, want, reopen)
}

// logContractReopened continues logContract after a reopen: history and
// records survive, DropBefore, truncation below everything, a skipped start.
func logContractReopened(t *testing.T, l Log, id string, want []Record, reopen func(Log) Log) {
	if l.StorageID() != id {
		t.Fatalf("storage id changed on reopen: %s → %s", id, l.StorageID())
	}
	checkRecs(t, l, want)
	if e := l.Epochs(); len(e) != 2 || e[1] != (EpochStart{4, 9}) {
		t.Fatalf("epochs after reopen %v", e)
	}
	if err := l.DropBefore(100); err == nil {
		t.Fatal("drop above durable accepted")
	}
	if err := l.DropBefore(10); err != nil {
		t.Fatal(err)
	}
	if f := l.FirstOffset(); f < 1 || f > 10 {
		t.Fatalf("first %d after DropBefore(10)", f)
	}
	if err := l.Read(0, 10, func(Record) bool { return true }); !errors.Is(err, ErrCompacted) {
		t.Fatalf("read below first: %v", err)
	}
	// Truncating below everything kept leaves an empty log that may start
	// anywhere above, as a mirror catching up from a compacted leader does.
	if err := l.TruncateAfter(0); err != nil {
		t.Fatal(err)
	}
	if l.LastOffset() != 0 || l.FirstOffset() != 1 {
		t.Fatalf("after TruncateAfter(0): last %d first %d", l.LastOffset(), l.FirstOffset())
	}
	start := dataRecs(500, 3, 5)
	if err := l.Append(start...); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l = reopen(l)
	if l.FirstOffset() != 500 || l.LastOffset() != 502 {
		t.Fatalf("skipped log: first %d last %d", l.FirstOffset(), l.LastOffset())
	}
	checkRecs(t, l, start)
	l.Close()
}

func TestReplicaMemLogContract(t *testing.T) {
	logContract(t, NewMemLog(), func(l Log) Log { m := l.(*MemLog); m.Close(); m.Reopen(); return m })
}

func TestReplicaMemLogPowerCut(t *testing.T) {
	m := NewMemLog()
	m.Append(dataRecs(1, 5, 1)...)
	m.Sync()
	m.Append(Record{Offset: 6, Epoch: 2, Kind: KindEpochStart})
	m.Append(dataRecs(7, 5, 2)...)
	m.PowerCut()
	if m.LastOffset() != 5 || len(m.Epochs()) != 1 {
		t.Fatalf("after power cut: last %d epochs %v", m.LastOffset(), m.Epochs())
	}
	checkRecs(t, m, dataRecs(1, 5, 1))
	id := m.StorageID()
	m.Wipe()
	if m.StorageID() == id || m.LastOffset() != 0 {
		t.Fatal("wipe kept the storage id or records")
	}
}

func fileLogConfig(dir string) msgstore.Config {
	cfg := msgstore.DefaultConfig(dir)
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.SegmentSize = 4096 // many segments, so DropBefore and truncation cross them
	return cfg
}

func openFileLog(t *testing.T, dir string) *FileLog {
	t.Helper()
	l, err := OpenFileLog(fileLogConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestReplicaFileLogContract(t *testing.T) {
	dir := t.TempDir()
	logContract(t, openFileLog(t, dir), func(l Log) Log {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return openFileLog(t, dir)
	})
}

func TestReplicaFileLogNewDirNewID(t *testing.T) {
	a, b := openFileLog(t, t.TempDir()), openFileLog(t, t.TempDir())
	defer a.Close()
	defer b.Close()
	if a.StorageID() == b.StorageID() {
		t.Fatal("two new directories share a storage id")
	}
}

// A crash (the files as the OS holds them, no clean close) after records of
// a new epoch: the history is recovered; a stale or missing epochs file is
// rebuilt from the records.
func TestReplicaFileLogCrashRecoversEpochs(t *testing.T) {
	dir := t.TempDir()
	l := openFileLog(t, dir)
	want := append(dataRecs(1, 50, 1), Record{Offset: 51, Epoch: 2, Kind: KindEpochStart})
	want = append(want, dataRecs(52, 50, 2)...)
	if err := l.Append(want...); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, edit := range []string{"keep", "delete", "stale"} {
		t.Run(edit, func(t *testing.T) {
			cp := copyTree(t, dir)
			p := filepath.Join(cp, epochsFile)
			switch edit {
			case "delete":
				os.Remove(p)
			case "stale":
				h := &FileLog{dir: cp}
				if err := h.saveEpochs([]EpochStart{{1, 1}}); err != nil {
					t.Fatal(err)
				}
			}
			l2 := openFileLog(t, cp)
			defer l2.Close()
			checkRecs(t, l2, want)
			if e := l2.Epochs(); len(e) != 2 || e[1] != (EpochStart{2, 51}) {
				t.Fatalf("epochs %v", e)
			}
			if l2.DurableOffset() != 101 || l2.StorageID() != l.StorageID() {
				t.Fatalf("durable %d id %s", l2.DurableOffset(), l2.StorageID())
			}
		})
	}
}

// copyTree copies dir (files and one level of subdirectories, skipping
// msgstore's LOCK) as a process crash leaves it.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if d.Name() == "LOCK" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
