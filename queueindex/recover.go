package queueindex

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// MaxReportedCorrupt bounds Recovered.CorruptSeqs.
const MaxReportedCorrupt = 64

// maxSegNum is the largest segment number whose sequence ids fit in a uint64.
const maxSegNum = maxSeq/SlotsPerSegment - 1

// Recovered reports what Open found and did.
//
// With a clean checkpoint (the previous Close succeeded and the segment files
// match it) Open takes the per-segment live counts from it and reads no slots.
// Otherwise it reads every segment file once and classifies each slot:
//
//   - all zero: never written;
//   - ready or settled with a good CRC: valid;
//   - anything else (bad CRC, bad status or flags, a partial slot at the end
//     of a file): damaged. A damaged slot past the last valid slot of the
//     whole index is a torn write: it is treated as never written and cut
//     from the files (Torn, CutBytes). A damaged slot before it is corrupt:
//     it is reported (Corrupt, CorruptSeqs) and skipped, and the rest of the
//     index survives.
//
// After a recovery without a clean checkpoint, NextSeq starts at the lease: a
// segment boundary past every id the previous run handed out, flushed or not,
// so no id is ever reused.
type Recovered struct {
	// NextSeq is the sequence id the next Append returns.
	NextSeq uint64
	// Live is the number of ready entries.
	Live uint64
	// Bytes is the sum of Entry.Size over the ready entries.
	Bytes uint64
	// Segments is the number of segment files kept.
	Segments int
	// Clean is set when the checkpoint of a clean Close was used and no slots
	// were read.
	Clean bool
	// CheckpointErr says why a checkpoint that was present was not used: it
	// wraps ErrCorrupt (unreadable) or ErrStaleCheckpoint (does not match the
	// files). It is nil when the checkpoint was used, absent, or simply the
	// dirty one of a run that did not close cleanly.
	CheckpointErr error
	// Torn counts damaged slots past the last valid one, treated as never
	// written.
	Torn uint64
	// CutBytes is how many bytes Open removed from the tail of the segment
	// files: torn slots, zero slots after the last valid one, and anything past
	// SegmentSize.
	CutBytes int64
	// Corrupt counts damaged slots before the last valid one; their entries
	// are lost and skipped.
	Corrupt uint64
	// CorruptSeqs lists the sequence ids of the first MaxReportedCorrupt
	// corrupt slots.
	CorruptSeqs []uint64
	// Removed counts segment files Open deleted because every slot in them was
	// settled (or corrupt).
	Removed int
}

// segFile is a segment file found in the directory.
type segFile struct {
	num  uint64
	size int64
}

// listSegments returns the segment files in dir by segment number. Files whose
// names are not exactly segName of a valid segment number are not ours and are
// left alone.
func listSegments(dir string) ([]segFile, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("queueindex: list %s: %w", dir, err)
	}
	var files []segFile
	for _, de := range des {
		name := de.Name()
		stem, ok := strings.CutSuffix(name, ".qi")
		if !ok || !de.Type().IsRegular() {
			continue
		}
		num, err := strconv.ParseUint(stem, 10, 64)
		if err != nil || num > maxSegNum || segName(num) != name {
			continue
		}
		info, err := de.Info()
		if err != nil {
			return nil, fmt.Errorf("queueindex: stat %s: %w", name, err)
		}
		files = append(files, segFile{num: num, size: info.Size()})
	}
	// ReadDir sorts by name, which is not numeric order past 8 digits.
	slices.SortFunc(files, func(a, b segFile) int {
		switch {
		case a.num < b.num:
			return -1
		case a.num > b.num:
			return 1
		}
		return 0
	})
	return files, nil
}

// matches checks a clean checkpoint against the segment files on disk.
func (c *checkpoint) matches(files []segFile) error {
	if len(files) != len(c.segs) {
		return fmt.Errorf("queueindex: %d segment files, checkpoint lists %d: %w", len(files), len(c.segs), ErrStaleCheckpoint)
	}
	for i, f := range files {
		if s := c.segs[i]; s.num != f.num || int64(s.size) != f.size {
			return fmt.Errorf("queueindex: segment %d of %d bytes, checkpoint has segment %d of %d: %w",
				f.num, f.size, s.num, s.size, ErrStaleCheckpoint)
		}
	}
	return nil
}

// recover rebuilds the in-memory state from the checkpoint or the files, cuts
// torn tails, removes settled segments and writes a dirty checkpoint.
func (ix *Index) recover() (Recovered, error) {
	var rec Recovered
	dir := ix.cfg.Dir
	if err := os.Remove(filepath.Join(dir, checkpointTmp)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return rec, fmt.Errorf("queueindex: remove stale checkpoint: %w", err)
	}
	files, err := listSegments(dir)
	if err != nil {
		return rec, err
	}
	ck, err := ix.readCheckpoint()
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return rec, err
		}
		rec.CheckpointErr = err
		ck = nil
	}
	if ck != nil && ck.clean {
		if err := ck.matches(files); err != nil {
			rec.CheckpointErr = err
		} else {
			rec.Clean = true
			ix.segs, ix.next = ck.segs, ck.next
			ix.lease.Store(ck.lease)
		}
	}
	syncDir := false
	if !rec.Clean {
		if syncDir, err = ix.scan(files, &rec); err != nil {
			return rec, err
		}
		if ck != nil {
			// Ids up to the lease may have been handed out and lost in the crash.
			ix.next = max(ix.next, ck.next, ck.lease)
		}
	}
	ix.lease.Store(max(ix.lease.Load(), leaseFor(ix.next)))

	kept := ix.segs[:0]
	for i := range ix.segs {
		s := ix.segs[i]
		if ix.deletableLocked(&s) {
			if err := os.Remove(ix.segPath(s.num)); err != nil {
				return rec, fmt.Errorf("queueindex: remove settled segment %d: %w", s.num, err)
			}
			rec.Removed++
			syncDir = true
			continue
		}
		kept = append(kept, s)
		ix.live += uint64(s.live)
		ix.bytes += s.bytes
	}
	ix.segs = kept
	if syncDir {
		if err := ix.syncDir(); err != nil {
			return rec, err
		}
	}
	ck = &checkpoint{next: ix.next, lease: ix.lease.Load()}
	if err = ix.writeCheckpoint(ck, true); err != nil {
		return rec, err
	}
	rec.NextSeq, rec.Live, rec.Bytes, rec.Segments = ix.next, ix.live, ix.bytes, len(ix.segs)
	ix.logRecovered(&rec)
	return rec, nil
}

func (ix *Index) logRecovered(rec *Recovered) {
	args := []any{"dir", ix.cfg.Dir, "next_seq", rec.NextSeq, "live", rec.Live, "segments", rec.Segments,
		"clean", rec.Clean, "removed", rec.Removed}
	if rec.Torn == 0 && rec.Corrupt == 0 && rec.CutBytes == 0 && rec.CheckpointErr == nil {
		ix.cfg.Logger.Debug("queueindex: recovered", args...)
		return
	}
	args = append(args, "torn", rec.Torn, "cut_bytes", rec.CutBytes, "corrupt", rec.Corrupt,
		"corrupt_seqs", rec.CorruptSeqs, "checkpoint_err", rec.CheckpointErr)
	ix.cfg.Logger.Warn("queueindex: recovered with damage", args...)
}

// scanner classifies damaged slots as torn or corrupt while the files are read
// in sequence order: damaged slots stay pending until a later valid slot shows
// they were in the middle.
type scanner struct {
	haveValid bool
	lastValid uint64
	pending   uint64
	npend     int
	pendSeqs  [MaxReportedCorrupt]uint64
}

func (sc *scanner) bad(seq uint64) {
	if sc.npend < len(sc.pendSeqs) {
		sc.pendSeqs[sc.npend] = seq
		sc.npend++
	}
	sc.pending++
}

func (sc *scanner) valid(seq uint64, rec *Recovered) {
	if sc.pending > 0 {
		rec.Corrupt += sc.pending
		for _, s := range sc.pendSeqs[:sc.npend] {
			if len(rec.CorruptSeqs) < MaxReportedCorrupt {
				rec.CorruptSeqs = append(rec.CorruptSeqs, s)
			}
		}
		sc.pending, sc.npend = 0, 0
	}
	sc.haveValid, sc.lastValid = true, seq
}

// scan reads every segment file once, counts live entries, classifies damaged
// slots and cuts everything past the last valid slot. It reports whether it
// removed files (so the directory needs a sync).
func (ix *Index) scan(files []segFile, rec *Recovered) (bool, error) {
	buf := pagePool.Get().(*[SegmentSize]byte)
	defer pagePool.Put(buf)
	var sc scanner
	segs := make([]segment, 0, len(files))
	for _, fl := range files {
		n, err := ix.readSegmentFile(ix.segPath(fl.num), buf)
		if err != nil {
			return false, err
		}
		ix.stats.segmentReads.Add(1)
		s := segment{num: fl.num}
		base := fl.num * SlotsPerSegment
		for off := 0; off < n; off += SlotSize {
			seq := base + uint64(off/SlotSize)
			if n-off < SlotSize {
				sc.bad(seq)
				break
			}
			st, e, err := decodeSlot(buf[off : off+SlotSize])
			switch {
			case err != nil:
				sc.bad(seq)
			case st == statusReady:
				s.live++
				s.bytes += uint64(e.Size)
				sc.valid(seq, rec)
			case st == statusSettled:
				sc.valid(seq, rec)
			}
		}
		segs = append(segs, s)
	}
	rec.Torn = sc.pending
	if sc.haveValid {
		ix.next = sc.lastValid + 1
	}
	removed := false
	kept := segs[:0]
	for i, s := range segs {
		size := files[i].size
		keep := int64(0) // bytes of this file before the cut
		if base := s.num * SlotsPerSegment; sc.haveValid && ix.next > base {
			keep = int64(min(ix.next-base, SlotsPerSegment)) * SlotSize
		}
		if keep == 0 {
			if err := os.Remove(ix.segPath(s.num)); err != nil {
				return removed, fmt.Errorf("queueindex: cut segment %d: %w", s.num, err)
			}
			rec.CutBytes += size
			removed = true
			continue
		}
		if size > keep {
			if err := ix.cutFile(ix.segPath(s.num), keep); err != nil {
				return removed, err
			}
			rec.CutBytes += size - keep
		}
		s.size = uint32(min(size, keep))
		kept = append(kept, s)
	}
	ix.segs = kept
	return removed, nil
}

// cutFile truncates the file at path to size and syncs it, so a cut torn tail
// does not come back after another crash.
func (ix *Index) cutFile(path string, size int64) error {
	err := ix.files.withFile(path, os.O_RDWR, func(f *os.File) error {
		if err := f.Truncate(size); err != nil {
			return err
		}
		return fdatasync(f)
	})
	if err != nil {
		return fmt.Errorf("queueindex: cut %s to %d bytes: %w", path, size, err)
	}
	return nil
}

// readSegmentFile reads up to SegmentSize bytes of the file at path into buf
// with one read and returns how many it got.
func (ix *Index) readSegmentFile(path string, buf *[SegmentSize]byte) (int, error) {
	var n int
	err := ix.files.withFile(path, os.O_RDONLY, func(f *os.File) error {
		var err error
		n, err = f.ReadAt(buf[:], 0)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("queueindex: read %s: %w", path, err)
	}
	return n, nil
}
