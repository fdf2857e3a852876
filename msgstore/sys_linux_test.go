//go:build linux

package msgstore

import (
	"errors"
	"syscall"
	"testing"
)

var errENOSPC = syscall.ENOSPC

// TestMsgStoreWriteErrorKeepsLogConsistent makes real writes fail part-way with
// RLIMIT_FSIZE (the kernel writes up to the limit, then EFBIG), as a full disk
// would, and checks the partial record is cut and appends work afterwards.
func TestMsgStoreWriteErrorKeepsLogConsistent(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.SegmentSize = 1 << 20
	l := mustOpenLog(t, cfg)
	var locs []Loc
	for i := range 10 {
		locs = append(locs, mustAppend(t, l, mkRecord(i, 100)))
	}
	size := l.active.size.Load()

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	lim := old
	lim.Cur = uint64(size) + 500 // the next record (5000 bytes) fits only partly
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	_, err := l.Append(mkRecord(10, 5000))
	_, err2 := l.Append(mkRecord(11, 5000))
	if rerr := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); rerr != nil {
		t.Fatalf("restore rlimit: %v", rerr)
	}
	if !errors.Is(err, syscall.EFBIG) || !errors.Is(err2, syscall.EFBIG) {
		t.Fatalf("appends over the limit: %v / %v, want EFBIG", err, err2)
	}
	if got := l.active.size.Load(); got != size {
		t.Fatalf("size after failed appends %d, want %d", got, size)
	}
	// Space is back: offsets continue where they were, nothing partial is left.
	loc := mustAppend(t, l, mkRecord(10, 5000))
	if loc.Offset != 10 || int64(loc.Pos) != size {
		t.Fatalf("append after the error: %+v, want offset 10 at %d", loc, size)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A crash-style reopen scans the segment: every record is whole.
	cfg.Dir = copyDirWith(t, cfg.Dir, func(name string, data []byte) []byte {
		if name == checkpointName || name == segName(0)+idxSuffix {
			return nil
		}
		return data
	})
	l2 := mustOpenLog(t, cfg)
	if ri := l2.Recovery(); len(ri.Cuts) != 0 || ri.RecordsRecovered != 11 {
		t.Fatalf("recovery after write errors: %+v", ri)
	}
	for i, loc := range locs {
		checkRead(t, l2.ReadAt, loc, mkRecord(i, 100))
	}
	checkRead(t, l2.ReadAt, loc, mkRecord(10, 5000))
}
