package msgstore

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// RecoveryInfo reports what Open found. The owner logs it (it implements
// slog.LogValuer); nothing in it is an error the caller must act on.
type RecoveryInfo struct {
	// Clean is true when a clean-shutdown checkpoint matched the files and no segment was scanned.
	Clean bool
	// CheckpointError says why an existing checkpoint was not used ("" if none existed or it was used).
	CheckpointError string
	// SegmentsScanned counts segments read record by record (unsealed or damaged ones).
	SegmentsScanned int
	// RecordsRecovered counts valid records in the scanned segments.
	RecordsRecovered int64
	// BytesCut is the total of bytes truncated from segments.
	BytesCut int64
	// Cuts lists every truncation: torn tails and corrupt middle segments.
	Cuts []Cut
	// IndexesRebuilt counts sparse index files written from a scan.
	IndexesRebuilt int
	// FilesRemoved lists leftovers deleted at Open: temporary files of an
	// interrupted compaction or index write, and indexes without a segment.
	FilesRemoved []string
	// BytesRead is the number of segment bytes Open read (0 on a clean open).
	BytesRead int64
	// Duration is how long Open took.
	Duration time.Duration
}

// Cut describes bytes removed from one segment during recovery.
type Cut struct {
	// File is the segment file name.
	File string
	// Pos is where the valid data now ends.
	Pos int64
	// Bytes is how many bytes were removed.
	Bytes int64
	// FirstLost is the offset the first dropped record would have had.
	FirstLost uint64
	// NextBase is the base of the following segment (offsets FirstLost to
	// NextBase-1 are gone) or 0 when the cut was in the last segment.
	NextBase uint64
	// Tail is true for the last segment (a torn write after a crash) and false
	// for a corrupt segment in the middle of the log.
	Tail bool
	// Reason is the first validation error found.
	Reason string
}

// LogValue renders the report for log/slog.
func (ri RecoveryInfo) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.Bool("clean", ri.Clean),
		slog.Int("segments_scanned", ri.SegmentsScanned),
		slog.Int64("records_recovered", ri.RecordsRecovered),
		slog.Int64("bytes_cut", ri.BytesCut),
		slog.Int("indexes_rebuilt", ri.IndexesRebuilt),
		slog.Int64("bytes_read", ri.BytesRead),
		slog.Duration("duration", ri.Duration),
	}
	if ri.CheckpointError != "" {
		attrs = append(attrs, slog.String("checkpoint_error", ri.CheckpointError))
	}
	for i, c := range ri.Cuts {
		attrs = append(attrs, slog.Group("cut"+strconv.Itoa(i), "file", c.File, "pos", c.Pos, "bytes", c.Bytes,
			"first_lost", c.FirstLost, "tail", c.Tail, "reason", c.Reason))
	}
	if len(ri.FilesRemoved) > 0 {
		attrs = append(attrs, slog.Any("files_removed", ri.FilesRemoved))
	}
	return slog.GroupValue(attrs...)
}

// OpenLog opens (or creates) the log in cfg.Dir, recovering from a crash if the
// last shutdown was not clean. See RecoveryInfo for what recovery reports.
func OpenLog(cfg Config) (*Log, error) {
	l, _, err := openLog(cfg)
	if err != nil {
		return nil, err
	}
	l.start()
	return l, nil
}

// start launches the flusher; hooks (obs, onSealed, onSynced) must be set before.
func (l *Log) start() {
	l.wg.Add(1)
	go l.runFlusher()
}

// openLog opens the log without starting the flusher and returns the Store's
// part of a valid checkpoint.
func openLog(cfg Config) (*Log, []byte, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	start := time.Now()
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("msgstore: create %s: %w", cfg.Dir, err)
	}
	lockf, err := os.OpenFile(filepath.Join(cfg.Dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("msgstore: open lock file: %w", err)
	}
	if err := lockFile(lockf); err != nil {
		lockf.Close()
		return nil, nil, fmt.Errorf("msgstore: lock %s: %w", cfg.Dir, err)
	}
	dirf, err := os.Open(cfg.Dir)
	if err != nil {
		lockf.Close()
		return nil, nil, fmt.Errorf("msgstore: open %s: %w", cfg.Dir, err)
	}
	l := &Log{cfg: cfg, dirf: dirf, lockf: lockf, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	extra, err := l.recover()
	if err != nil {
		for _, s := range l.segments() {
			if s.f != nil {
				s.f.Close()
			}
		}
		dirf.Close()
		lockf.Close()
		return nil, nil, err
	}
	l.nextOff.Store(l.next)
	l.written, l.synced = l.next, l.next
	l.recovery.BytesRead = l.bytesRead.Load()
	l.recovery.Duration = time.Since(start)
	return l, extra, nil
}

func (l *Log) path(name string) string { return filepath.Join(l.cfg.Dir, name) }

// recover loads the segments, from the checkpoint when it matches the files and
// by the dirty path otherwise, then deletes the checkpoint: from now on only a
// new clean Close may vouch for the files.
func (l *Log) recover() ([]byte, error) {
	bases, sizes, err := l.listDir()
	if err != nil {
		return nil, err
	}
	cp, cpErr := readCheckpoint(l.cfg.Dir)
	haveCP := !errors.Is(cpErr, os.ErrNotExist)
	if cpErr != nil && haveCP {
		l.recovery.CheckpointError = cpErr.Error()
	}
	var extra []byte
	if cp != nil && cp.matches(bases, sizes) {
		l.recovery.Clean = true
		extra = cp.extra
		err = l.openClean(cp)
		if err == nil && len(l.recovery.Cuts) > 0 {
			// The active segment was damaged after the clean shutdown: the
			// Store's tables may name records that are gone.
			l.recovery.Clean = false
			l.recovery.CheckpointError = "active segment damaged after clean shutdown"
			extra = nil
		}
	} else {
		if cp != nil {
			l.recovery.CheckpointError = "checkpoint does not match the segment files"
		}
		err = l.openDirty(bases)
	}
	if err != nil {
		return nil, err
	}
	if len(l.segments()) == 0 {
		base := uint64(0)
		if cp != nil && l.recovery.Clean {
			base = cp.next
		}
		if err := l.createFirst(base); err != nil {
			return nil, err
		}
	}
	if haveCP {
		if err := os.Remove(l.path(checkpointName)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("msgstore: remove checkpoint: %w", err)
		}
	}
	if err := l.syncDir(); err != nil {
		return nil, err
	}
	return extra, nil
}

// listDir returns the segment bases in order with their file sizes, deleting
// leftover temporary files and indexes whose segment is gone.
func (l *Log) listDir() ([]uint64, map[uint64]int64, error) {
	ents, err := os.ReadDir(l.cfg.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("msgstore: list %s: %w", l.cfg.Dir, err)
	}
	var bases []uint64
	sizes := make(map[uint64]int64)
	var idxs []string
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, tmpSuffix) || strings.HasSuffix(name, compactSuffix):
			if err := os.Remove(l.path(name)); err != nil {
				return nil, nil, fmt.Errorf("msgstore: remove leftover %s: %w", name, err)
			}
			l.recovery.FilesRemoved = append(l.recovery.FilesRemoved, name)
		case strings.HasSuffix(name, idxSuffix):
			idxs = append(idxs, name)
		case strings.HasSuffix(name, segSuffix):
			base, ok := parseBase(name, segSuffix)
			if !ok {
				continue // not ours; leave it alone
			}
			info, err := e.Info()
			if err != nil {
				return nil, nil, fmt.Errorf("msgstore: stat %s: %w", name, err)
			}
			bases = append(bases, base)
			sizes[base] = info.Size()
		}
	}
	for _, name := range idxs {
		if base, ok := parseBase(name, idxSuffix); ok {
			if _, seg := sizes[base]; !seg {
				if err := os.Remove(l.path(name)); err != nil {
					return nil, nil, fmt.Errorf("msgstore: remove orphan index %s: %w", name, err)
				}
				l.recovery.FilesRemoved = append(l.recovery.FilesRemoved, name)
			}
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, sizes, nil
}

func parseBase(name, suffix string) (uint64, bool) {
	digits := strings.TrimSuffix(name, suffix)
	if len(digits) != 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(digits, 10, 64)
	return v, err == nil
}

// matches reports whether the checkpoint describes exactly these files.
func (c *checkpoint) matches(bases []uint64, sizes map[uint64]int64) bool {
	if len(c.segs) != len(bases) {
		return false
	}
	for i, s := range c.segs {
		if s.base != bases[i] || s.size != sizes[s.base] {
			return false
		}
	}
	return len(c.segs) == 0 || c.next >= c.segs[len(c.segs)-1].base
}

// openClean trusts the checkpoint: it opens the files without reading them,
// except the active segment's index file.
func (l *Log) openClean(cp *checkpoint) error {
	for i, cs := range cp.segs {
		s := newSegment(l.cfg.Dir, cs.base)
		last := i == len(cp.segs)-1
		flag := os.O_RDONLY
		if last {
			flag = os.O_RDWR
		}
		f, err := os.OpenFile(s.segPath, flag, 0)
		if err != nil {
			return fmt.Errorf("msgstore: open %s: %w", s.segPath, err)
		}
		s.f = f
		s.size.Store(cs.size)
		s.lastPlus1.Store(cs.lastPlus1)
		if !last {
			s.sealed.Store(true)
			s.sealDone.Store(true)
		}
		l.addSegment(s)
	}
	l.next = cp.next
	if len(cp.segs) == 0 {
		return nil
	}
	a := l.segments()[len(cp.segs)-1]
	l.active = a
	return l.loadActiveIndex(a)
}

// openDirty opens after a crash. A segment whose .idx trailer describes its
// current size was sealed (fsynced, then indexed) and is trusted without reading
// it; every other segment (normally only the last) is scanned and cut at its
// first bad record.
func (l *Log) openDirty(bases []uint64) error {
	for i, base := range bases {
		s := newSegment(l.cfg.Dir, base)
		last := i == len(bases)-1
		limit := uint64(math.MaxUint64)
		if !last {
			limit = bases[i+1]
		}
		f, err := os.OpenFile(s.segPath, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("msgstore: open %s: %w", s.segPath, err)
		}
		s.f = f
		st, err := f.Stat()
		if err != nil {
			return fmt.Errorf("msgstore: stat %s: %w", s.segPath, err)
		}
		size := st.Size()
		info, terr := readIndexTrailer(s.idxPath)
		trusted := terr == nil && info.size == size &&
			(info.lastPlus1 == 0 || (info.lastPlus1 > base && info.lastPlus1 <= limit))
		if trusted {
			s.size.Store(size)
			s.lastPlus1.Store(info.lastPlus1)
		} else if err := l.scanAndRepair(s, size, limit, last); err != nil {
			return err
		}
		if !last {
			s.sealed.Store(true)
			s.sealDone.Store(true)
		}
		l.addSegment(s)
	}
	if len(bases) == 0 {
		return nil
	}
	a := l.segments()[len(bases)-1]
	l.active = a
	l.next = a.base
	if lp := a.lastPlus1.Load(); lp > a.base {
		l.next = lp
	}
	if !a.idxLoaded {
		return l.loadActiveIndex(a)
	}
	return nil
}

// scanAndRepair scans a segment, truncates it after its last good record,
// fsyncs it (its contents may have been only in the page cache of a crashed
// process) and, for a non-last segment, writes its index so it counts as sealed.
func (l *Log) scanAndRepair(s *segment, size int64, limit uint64, last bool) error {
	res := scanSegment(s.f, s.base, size, limit, l.cfg.IndexInterval, &l.bytesRead)
	l.recovery.SegmentsScanned++
	l.recovery.RecordsRecovered += res.records
	if res.err != nil {
		if err := s.f.Truncate(res.validEnd); err != nil {
			return fmt.Errorf("msgstore: truncate %s to %d: %w", s.segPath, res.validEnd, err)
		}
		c := Cut{File: filepath.Base(s.segPath), Pos: res.validEnd, Bytes: size - res.validEnd,
			FirstLost: s.base, Tail: last, Reason: res.err.Error()}
		if res.lastPlus1 > 0 {
			c.FirstLost = res.lastPlus1
		}
		if !last {
			c.NextBase = limit
		}
		l.recovery.Cuts = append(l.recovery.Cuts, c)
		l.recovery.BytesCut += c.Bytes
		l.cfg.Logger.Warn("msgstore: cut segment during recovery", "file", c.File, "pos", c.Pos,
			"bytes", c.Bytes, "tail", c.Tail, "reason", c.Reason)
	}
	if err := fdatasync(s.f); err != nil {
		return fmt.Errorf("msgstore: fdatasync %s: %w", s.segPath, err)
	}
	l.fsyncs.Add(1)
	s.size.Store(res.validEnd)
	s.lastPlus1.Store(res.lastPlus1)
	s.idx, s.idxLoaded = res.entries, true
	if len(res.entries) > 0 {
		s.idxNext = int64(res.entries[len(res.entries)-1].pos) + int64(l.cfg.IndexInterval)
	}
	if !last {
		if err := writeFileAtomic(s.idxPath, encodeIndex(res.entries, res.lastPlus1, res.validEnd), true); err != nil {
			return fmt.Errorf("msgstore: write index %s: %w", s.idxPath, err)
		}
		l.fsyncs.Add(1)
		l.recovery.IndexesRebuilt++
		s.idx, s.idxLoaded = nil, false
	}
	return nil
}

// loadActiveIndex loads the active segment's index into memory (appends extend
// it), scanning the segment if the file is missing, damaged or stale.
func (l *Log) loadActiveIndex(s *segment) error {
	data, err := os.ReadFile(s.idxPath)
	if err == nil {
		entries, info, derr := decodeIndex(data)
		if derr == nil && info.size == s.size.Load() && info.lastPlus1 == s.lastPlus1.Load() {
			s.idx, s.idxLoaded = entries, true
			if len(entries) > 0 {
				s.idxNext = int64(entries[len(entries)-1].pos) + int64(l.cfg.IndexInterval)
			}
			return nil
		}
	}
	if err := l.scanAndRepair(s, s.size.Load(), math.MaxUint64, true); err != nil {
		return err
	}
	l.recovery.IndexesRebuilt++
	return nil
}

// createFirst creates the first segment of an empty log.
func (l *Log) createFirst(base uint64) error {
	s := newSegment(l.cfg.Dir, base)
	f, err := os.OpenFile(s.segPath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("msgstore: create %s: %w", s.segPath, wrapWriteErr(err))
	}
	s.f, s.idxLoaded = f, true
	l.addSegment(s)
	l.active = s
	l.next = base
	return nil
}
