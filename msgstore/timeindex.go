package msgstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"sort"
)

// Time index file (%020d.tix) layout, big-endian:
//
//	entries    count × (timestamp int64, relative offset uint32)
//	count      uint32
//	maxTs      int64   largest timestamp in the segment (math.MinInt64: none)
//	lastPlus1  uint64  last offset in the segment + 1 (0: segment empty)
//	size       uint64  segment bytes the index describes
//	crc        uint32  CRC32C of everything before it
//
// There is one entry per sparse-index entry (the first record at or after every
// IndexInterval bytes). An entry's timestamp is the largest timestamp of any
// record up to and including the record it names, not that record's own, so
// the entries are non-decreasing even when clocks step back: if entry j's
// timestamp is below t, every record up to entry j is older than t, and if
// entry j+1's is at least t, a record at or before entry j+1 is not. The first
// record at or after t therefore lies in one index interval.
const (
	tixSuffix      = ".tix"
	tixEntrySize   = 8 + 4
	tixTrailerSize = 4 + 8 + 8 + 8 + 4
)

// noTimestamp is the running maximum of a segment with no record.
const noTimestamp = math.MinInt64

// timeEntry maps the running maximum timestamp to a record's relative offset.
type timeEntry struct {
	ts  int64
	rel uint32
}

// timeIndexInfo is what a time index trailer says about its segment.
type timeIndexInfo struct {
	maxTs     int64
	lastPlus1 uint64
	size      int64
}

// encodeTimeIndex renders a .tix file.
func encodeTimeIndex(entries []timeEntry, info timeIndexInfo) []byte {
	be := binary.BigEndian
	b := make([]byte, 0, len(entries)*tixEntrySize+tixTrailerSize)
	for _, e := range entries {
		b = be.AppendUint64(b, uint64(e.ts))
		b = be.AppendUint32(b, e.rel)
	}
	b = be.AppendUint32(b, uint32(len(entries)))
	b = be.AppendUint64(b, uint64(info.maxTs))
	b = be.AppendUint64(b, info.lastPlus1)
	b = be.AppendUint64(b, uint64(info.size))
	return be.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeTimeIndex decodes and verifies a whole .tix file.
func decodeTimeIndex(b []byte) ([]timeEntry, timeIndexInfo, error) {
	if len(b) < tixTrailerSize {
		return nil, timeIndexInfo{}, corruptf("time index file is %d bytes", len(b))
	}
	be := binary.BigEndian
	crcAt := len(b) - 4
	if crc32.Checksum(b[:crcAt], castagnoli) != be.Uint32(b[crcAt:]) {
		return nil, timeIndexInfo{}, corruptf("time index crc mismatch")
	}
	t := b[len(b)-tixTrailerSize:]
	count := be.Uint32(t)
	info := timeIndexInfo{maxTs: int64(be.Uint64(t[4:])), lastPlus1: be.Uint64(t[12:]), size: int64(be.Uint64(t[20:]))}
	if int64(count)*tixEntrySize+tixTrailerSize != int64(len(b)) {
		return nil, timeIndexInfo{}, corruptf("time index file is %d bytes for %d entries", len(b), count)
	}
	if info.size < 0 || info.size > MaxSegmentSize+MaxRecordLimit {
		return nil, timeIndexInfo{}, corruptf("time index describes impossible segment size %d", info.size)
	}
	entries := make([]timeEntry, count)
	for i := range entries {
		e := timeEntry{ts: int64(be.Uint64(b[i*tixEntrySize:])), rel: be.Uint32(b[i*tixEntrySize+8:])}
		if i > 0 && (e.rel <= entries[i-1].rel || e.ts < entries[i-1].ts) {
			return nil, timeIndexInfo{}, corruptf("time index entries out of order at %d", i)
		}
		if e.ts > info.maxTs {
			return nil, timeIndexInfo{}, corruptf("time index entry %d is after the segment's newest timestamp", i)
		}
		entries[i] = e
	}
	return entries, info, nil
}

// noteAppendLocked keeps the active segment's time index up to date for a record
// just appended at pos. Caller holds Log.writeMu. Until the time index of the
// active segment is loaded (after Open) appends leave it alone; loading it
// takes writeMu, so no append slips between the scan and the first update.
func (s *segment) noteAppendLocked(ts int64, rel uint32, pos int64, indexed bool) {
	if !s.tixLive {
		if pos != 0 && s.tixTried {
			return
		}
		s.idxMu.Lock()
		if pos == 0 {
			// The segment was empty until now (created by Open): nothing to load.
			s.startTimeIndex()
		} else {
			// The first append after Open adopts the .tix that Close saved, if it
			// describes the segment as it was before this record; otherwise
			// the index is rebuilt on first use, off the append path.
			s.tixTried = true
			if !s.tixLoaded {
				if s.loadTimeIndexFile(pos, s.base+uint64(rel)) {
					s.tixLoaded, s.tixSavedSize = true, pos
				}
			}
			s.tixLive = s.tixLoaded
		}
		s.idxMu.Unlock()
		if !s.tixLive {
			return
		}
	}
	m := max(s.tsMax.Load(), ts)
	if indexed {
		s.idxMu.Lock()
		s.tix = append(s.tix, timeEntry{ts: m, rel: rel})
		s.idxMu.Unlock()
	}
	// Published after the record's size, so a reader that sees m also sees the record.
	s.tsMax.Store(m)
}

// startTimeIndex marks a new, empty active segment's time index as maintained
// by appends. Caller holds Log.writeMu, and s.idxMu once s is visible to readers.
func (s *segment) startTimeIndex() {
	s.tix, s.tixLoaded, s.tixLive, s.tixSavedSize = nil, true, true, -1
	s.tsMax.Store(noTimestamp)
}

// loadActiveTimeIndex loads the active segment's time index if it is not yet,
// holding writeMu so appends resume maintaining it exactly where the load
// stopped. Lock order: writeMu → fileMu → idxMu.
func (l *Log) loadActiveTimeIndex(s *segment) error {
	s.idxMu.Lock()
	done := s.tixLoaded
	s.idxMu.Unlock()
	if done {
		return nil
	}
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	s.fileMu.RLock()
	defer s.fileMu.RUnlock()
	if s.f == nil {
		return nil
	}
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if err := l.ensureTimeIndexLocked(s); err != nil {
		return err
	}
	s.tixLive = !s.sealed.Load()
	return nil
}

// ensureTimeIndexLocked loads a segment's time index from its .tix file, or
// rebuilds it from the segment when the file is missing, damaged or stale, and
// saves an index that appends built once the segment is sealed. Caller holds
// s.fileMu shared and s.idxMu, and writeMu when s may be the active segment.
func (l *Log) ensureTimeIndexLocked(s *segment) error {
	if s.tixLoaded {
		if s.tixSavedSize != s.size.Load() && s.sealDone.Load() {
			l.saveTimeIndexLocked(s)
		}
		return nil
	}
	size := s.size.Load()
	if s.loadTimeIndexFile(size, s.lastPlus1.Load()) {
		s.tixLoaded, s.tixSavedSize = true, size
		return nil
	}
	entries, maxTs, serr := l.scanTimes(s, size)
	if serr != nil {
		return serr
	}
	s.tix, s.tixLoaded, s.tixSavedSize = entries, true, -1
	s.tsMax.Store(maxTs)
	l.timeIndexRebuilds.Add(1)
	l.cfg.Logger.Info("msgstore: rebuilt time index (missing, damaged or stale)", "segment", s.segPath)
	l.saveTimeIndexLocked(s)
	return nil
}

// loadTimeIndexFile reads s's .tix file into s.tix and s.tsMax if it is whole
// and describes the segment at size bytes up to lastPlus1. Caller holds s.idxMu.
func (s *segment) loadTimeIndexFile(size int64, lastPlus1 uint64) bool {
	data, err := os.ReadFile(s.tixPath)
	if err != nil {
		return false
	}
	entries, info, err := decodeTimeIndex(data)
	if err != nil || info.size != size || info.lastPlus1 != lastPlus1 {
		return false
	}
	s.tix = entries
	s.tsMax.Store(info.maxTs)
	return true
}

// saveTimeIndexLocked writes s's time index without an fsync: a torn or lost
// file is detected (CRC, trailer) and rebuilt. Caller holds s.idxMu and, for
// the active segment, writeMu, so the index matches the size it records.
func (l *Log) saveTimeIndexLocked(s *segment) {
	info := timeIndexInfo{maxTs: s.tsMax.Load(), lastPlus1: s.lastPlus1.Load(), size: s.size.Load()}
	if err := writeFileAtomic(s.tixPath, encodeTimeIndex(s.tix, info), false); err != nil {
		l.cfg.Logger.Error("msgstore: cannot write time index", "index", s.tixPath, "error", err)
		return
	}
	s.tixSavedSize = info.size
}

// scanTimes reads a segment's first size bytes and builds its time index with
// entries at the same records the sparse index names. Caller holds s.fileMu shared.
func (l *Log) scanTimes(s *segment, size int64) ([]timeEntry, int64, error) {
	sc := newScanner(s.f, 0, size, 256<<10, &l.bytesRead)
	var entries []timeEntry
	maxTs := int64(noTimestamp)
	next := int64(0)
	for {
		rec, _, pos, err := sc.next()
		if err == io.EOF {
			return entries, maxTs, nil
		}
		if err != nil {
			// Recovery already cut torn tails, so this is damage in the middle:
			// keep what precedes it, as the sparse index does.
			l.cfg.Logger.Error("msgstore: segment damaged; time index covers only its valid prefix",
				"segment", s.segPath, "error", err)
			return entries, maxTs, nil
		}
		maxTs = max(maxTs, rec.Timestamp)
		if pos >= next && rec.Offset >= s.base && rec.Offset-s.base <= math.MaxUint32 {
			entries = append(entries, timeEntry{ts: maxTs, rel: uint32(rec.Offset - s.base)})
			next = pos + int64(l.cfg.IndexInterval)
		}
	}
}

// OffsetAtTime returns the offset of the first record with a timestamp at or
// after ts (unix ns), or the next offset to be appended when there is none.
// Per segment it consults the time index in memory (loaded from its .tix file
// or rebuilt once), then reads at most one index interval of data: the records
// between the last entry older than ts and the next one.
func (l *Log) OffsetAtTime(ts int64) (uint64, error) {
	for _, s := range l.segments() {
		off, found, err := l.offsetAtTimeIn(s, ts)
		if err != nil {
			return 0, err
		}
		if found {
			return off, nil
		}
	}
	return l.nextOff.Load(), nil
}

// offsetAtTimeIn looks for the first record at or after ts in s.
func (l *Log) offsetAtTimeIn(s *segment, ts int64) (uint64, bool, error) {
	if !s.sealed.Load() {
		if err := l.loadActiveTimeIndex(s); err != nil {
			return 0, false, err
		}
	}
	s.fileMu.RLock()
	defer s.fileMu.RUnlock()
	if s.f == nil {
		return 0, false, nil // removed by retention meanwhile; later segments follow
	}
	s.idxMu.Lock()
	err := l.ensureTimeIndexLocked(s)
	segMax := s.tsMax.Load()
	entries := s.tix // appends only add past len(entries)
	s.idxMu.Unlock()
	if err != nil || segMax < ts {
		return 0, false, err
	}
	size := s.size.Load() // after tsMax: covers the record that raised it
	i := sort.Search(len(entries), func(i int) bool { return entries[i].ts >= ts })
	var start int64
	if i > 0 {
		if start, _, err = l.indexPos(s, entries[i-1].rel); err != nil {
			return 0, false, err
		}
	}
	// Every record before entry i's is older than ts, and entry i's record
	// itself is not (its running maximum rose to ts there). When the sparse
	// index knows where that record starts, the scan stops there: it then reads
	// only the records between two entries, one index interval.
	end, chunk, stopAt := size, l.cfg.IndexInterval, false
	if i < len(entries) {
		p, exact, err := l.indexPos(s, entries[i].rel)
		if err != nil {
			return 0, false, err
		}
		if exact && p >= start {
			end, chunk, stopAt = p, max(int(p-start), recordHeaderSize), true
		}
	}
	sc := newScanner(s.f, start, end, chunk, &l.bytesRead)
	for {
		rec, _, _, err := sc.next()
		// Past the first read only a record straddling its end is left (when
		// the stop is unknown): read exactly what that record needs.
		sc.chunk = recordHeaderSize
		if err == io.EOF {
			if stopAt {
				return s.base + uint64(entries[i].rel), true, nil
			}
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("msgstore: seek to time %d in %s: %w", ts, s.segPath, err)
		}
		if rec.Timestamp >= ts {
			return rec.Offset, true, nil
		}
	}
}

// indexPos returns where the sparse index says scanning for relative offset
// rel starts, and whether an index entry names rel exactly (then the position
// is that record's). Caller holds s.fileMu shared.
func (l *Log) indexPos(s *segment, rel uint32) (int64, bool, error) {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if err := l.ensureIndexLocked(s); err != nil {
		return 0, false, err
	}
	k := sort.Search(len(s.idx), func(k int) bool { return s.idx[k].rel >= rel })
	if k < len(s.idx) && s.idx[k].rel == rel {
		return int64(s.idx[k].pos), true, nil
	}
	start, _ := lookupEntry(s.idx, rel)
	return start, false, nil
}

// saveTimeIndexes writes the time indexes that appends built and no file holds
// yet. Close calls it after the flusher stopped and appends were refused.
func (l *Log) saveTimeIndexes() {
	for _, s := range l.segments() {
		s.idxMu.Lock()
		if s.tixLoaded && s.tixSavedSize != s.size.Load() {
			l.saveTimeIndexLocked(s)
		}
		s.idxMu.Unlock()
	}
}
