package msgstore

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// File name suffixes.
const (
	segSuffix     = ".seg"
	idxSuffix     = ".idx"
	tmpSuffix     = ".tmp"
	compactSuffix = ".compact"
)

// Loc locates a record: its offset, a hint of its position in its segment file
// and its encoded size. Queues store Locs; the hint makes the common read one
// pread, and the offset keeps the Loc valid after compaction moves the record.
type Loc struct {
	// Offset is the record's offset in the log.
	Offset uint64
	// Pos is where the record started in its segment file when the Loc was made.
	Pos uint32
	// Size is the record's encoded size in bytes.
	Size uint32
}

// segment is one .seg file with its sparse index.
//
// Locking: fileMu guards f and gen; readers hold it shared for the whole read, so
// compaction and removal (which take it exclusively) never close a file under a
// read. The appender never takes fileMu. idxMu guards idx and idxLoaded and is
// only held for memory work, except when a sealed segment's index is loaded or
// rebuilt (the appender never touches a sealed segment). Order: fileMu → idxMu.
type segment struct {
	base    uint64
	segPath string
	idxPath string
	tixPath string

	fileMu sync.RWMutex
	f      *os.File // nil once the segment is removed
	gen    uint64   // bumped when compaction swaps f

	size      atomic.Int64  // bytes of complete records; readers never read past it
	lastPlus1 atomic.Uint64 // last offset + 1; 0 when the segment holds no record
	sealed    atomic.Bool   // no more appends (set under Log.writeMu)
	sealDone  atomic.Bool   // flusher fsynced the data and wrote the .idx

	idxMu     sync.Mutex
	idx       []indexEntry
	idxLoaded bool

	// Time index (timeindex.go): tix, tixLoaded and tixSavedSize under idxMu;
	// tixLive (appends maintain tix) and tixTried under Log.writeMu; tsMax is the largest
	// timestamp in the segment once tixLoaded, noTimestamp when it has none.
	tix          []timeEntry
	tixLoaded    bool
	tixSavedSize int64 // segment size the .tix file on disk describes; -1 when none
	tixLive      bool
	tixTried     bool // the first append after Open tried the .tix file; Log.writeMu
	tsMax        atomic.Int64

	idxNext int64 // position from which the next index entry is due; Log.writeMu
	dirty   bool  // written since the flusher's last round; Log.stateMu

	// needPrologue: the next Append writes the Log's prologue first; Log.writeMu.
	needPrologue bool
}

func segName(base uint64) string { return fmt.Sprintf("%020d", base) }

func newSegment(dir string, base uint64) *segment {
	n := segName(base)
	return &segment{base: base, segPath: filepath.Join(dir, n+segSuffix), idxPath: filepath.Join(dir, n+idxSuffix),
		tixPath: filepath.Join(dir, n+tixSuffix)}
}

// readLocked reads the record loc points at. The caller holds s.fileMu shared and
// has checked s.f is open. The fast path is one pread at the position hint; if
// the record there is not loc's (compaction moved it, or the hint is wrong) the
// sparse index bounds a scan to one index interval.
func (l *Log) readLocked(s *segment, loc Loc) (Record, error) {
	size := s.size.Load()
	if n := int64(loc.Size); n >= MinRecordSize && int64(loc.Pos)+n <= size {
		buf := make([]byte, n)
		m, err := s.f.ReadAt(buf, int64(loc.Pos))
		l.bytesRead.Add(int64(m))
		if err != nil && !(err == io.EOF && int64(m) == n) {
			return Record{}, fmt.Errorf("msgstore: read %s at %d: %w", s.segPath, loc.Pos, err)
		}
		if rec, k, err := DecodeRecord(buf); err == nil && int64(k) == n && rec.Offset == loc.Offset {
			return rec, nil
		}
	}
	return l.readByIndexLocked(s, loc, size)
}

// readByIndexLocked finds loc.Offset through the sparse index. Caller holds s.fileMu shared.
func (l *Log) readByIndexLocked(s *segment, loc Loc, size int64) (Record, error) {
	if loc.Offset < s.base || loc.Offset-s.base > math.MaxUint32 {
		return Record{}, fmt.Errorf("%w: offset %d not in segment %d", ErrNotFound, loc.Offset, s.base)
	}
	rel := uint32(loc.Offset - s.base)
	s.idxMu.Lock()
	err := l.ensureIndexLocked(s)
	start, bound := lookupEntry(s.idx, rel)
	s.idxMu.Unlock()
	if err != nil {
		return Record{}, err
	}
	sc := newScanner(s.f, start, size, l.cfg.IndexInterval+MinRecordSize, &l.bytesRead)
	for {
		rec, raw, pos, err := sc.next()
		if err == io.EOF || (bound >= 0 && pos >= bound) || (err == nil && rec.Offset > loc.Offset) {
			return Record{}, fmt.Errorf("%w: offset %d in %s", ErrNotFound, loc.Offset, s.segPath)
		}
		if err != nil {
			return Record{}, fmt.Errorf("msgstore: %s: %w", s.segPath, err)
		}
		if rec.Offset < loc.Offset {
			continue
		}
		if loc.Size != 0 && int(loc.Size) != len(raw) {
			// Same offset, different record: the offset was reused after a crash
			// lost the record the Loc was made for.
			return Record{}, fmt.Errorf("%w: offset %d holds a %d-byte record, Loc says %d", ErrNotFound, loc.Offset, len(raw), loc.Size)
		}
		own := append([]byte(nil), raw...)
		rec, _, err = DecodeRecord(own)
		return rec, err
	}
}

// ensureIndexLocked loads a sealed segment's index from its .idx file, or
// rebuilds it from the segment when the file is missing, damaged or stale.
// Caller holds s.fileMu shared (the rebuild reads s.f) and s.idxMu.
func (l *Log) ensureIndexLocked(s *segment) error {
	if s.idxLoaded {
		return nil
	}
	size := s.size.Load()
	data, err := os.ReadFile(s.idxPath)
	if err == nil {
		entries, info, derr := decodeIndex(data)
		if derr == nil && info.size == size && info.lastPlus1 == s.lastPlus1.Load() {
			s.idx, s.idxLoaded = entries, true
			return nil
		}
		err = derr
		if err == nil {
			err = fmt.Errorf("stale index: describes %d bytes up to offset %d, segment has %d bytes up to %d",
				info.size, info.lastPlus1, size, s.lastPlus1.Load())
		}
	}
	res := scanSegment(s.f, s.base, size, math.MaxUint64, l.cfg.IndexInterval, &l.bytesRead)
	s.idx, s.idxLoaded = res.entries, true
	l.indexRebuilds.Add(1)
	if res.err != nil {
		// Keep the entries up to the damage so earlier records stay reachable;
		// reads past it report the corruption. Do not persist a partial index.
		l.cfg.Logger.Error("msgstore: segment damaged; index covers only its valid prefix",
			"segment", s.segPath, "valid_bytes", res.validEnd, "error", res.err)
		return nil
	}
	if werr := writeFileAtomic(s.idxPath, encodeIndex(res.entries, res.lastPlus1, size), false); werr != nil {
		l.cfg.Logger.Error("msgstore: cannot write rebuilt index", "index", s.idxPath, "error", werr)
	}
	l.cfg.Logger.Info("msgstore: rebuilt sparse index", "segment", s.segPath, "reason", err)
	return nil
}

// seekLocked returns the position of the first record with an offset >= off
// (or a position before it: callers skip smaller offsets). Caller holds s.fileMu shared.
func (l *Log) seekLocked(s *segment, off uint64) (int64, error) {
	if off <= s.base {
		return 0, nil
	}
	rel := off - s.base
	if rel > math.MaxUint32 {
		rel = math.MaxUint32
	}
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if err := l.ensureIndexLocked(s); err != nil {
		return 0, err
	}
	start, _ := lookupEntry(s.idx, uint32(rel))
	return start, nil
}

// segReaderAt reads a segment file under its lock, failing when the segment was
// removed or replaced by compaction since the reader started (gen differs).
type segReaderAt struct {
	s    *segment
	gen  uint64
	read *atomic.Int64
}

func (r segReaderAt) ReadAt(p []byte, off int64) (int, error) {
	r.s.fileMu.RLock()
	defer r.s.fileMu.RUnlock()
	if r.s.f == nil {
		return 0, fmt.Errorf("%w: segment %s removed", ErrNotFound, r.s.segPath)
	}
	if r.s.gen != r.gen {
		return 0, errSegmentChanged
	}
	n, err := r.s.f.ReadAt(p, off)
	r.read.Add(int64(n))
	return n, err
}

// isGone reports whether err means the segment disappeared or changed under a reader.
func isGone(err error) bool {
	return errors.Is(err, errSegmentChanged) || errors.Is(err, ErrNotFound)
}
