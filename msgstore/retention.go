package msgstore

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// SegmentInfo describes one segment of a Log, for retention decisions made by
// the owner (streams delete whole old segments by size or age).
type SegmentInfo struct {
	// Base is the offset of the segment's first record.
	Base uint64
	// Size is the segment's size in bytes.
	Size int64
	// Active is set for the segment appends go to; it is never removed.
	Active bool
	// FirstTimestamp is the timestamp (unix ns) of the segment's first record,
	// or 0 when the segment holds none.
	FirstTimestamp int64
}

// Segments describes the log's segments, oldest first. It reads one record
// header per non-empty segment (one small pread) for FirstTimestamp; callers
// that ask often should cache it by Base, as a segment's first record never
// changes in a log that is not compacted.
func (l *Log) Segments() ([]SegmentInfo, error) {
	segs := l.segments()
	out := make([]SegmentInfo, 0, len(segs))
	for _, s := range segs {
		si := SegmentInfo{Base: s.base, Size: s.size.Load(), Active: !s.sealed.Load()}
		if si.Size >= MinRecordSize {
			ts, err := l.firstTimestamp(s)
			if err != nil {
				return nil, err
			}
			si.FirstTimestamp = ts
		}
		out = append(out, si)
	}
	return out, nil
}

// firstTimestamp reads the timestamp of the record at position 0 of s.
func (l *Log) firstTimestamp(s *segment) (int64, error) {
	var hdr [offFields]byte
	s.fileMu.RLock()
	defer s.fileMu.RUnlock()
	if s.f == nil {
		return 0, fmt.Errorf("%w: segment %s removed", ErrNotFound, s.segPath)
	}
	if _, err := s.f.ReadAt(hdr[:], 0); err != nil {
		return 0, fmt.Errorf("msgstore: read first record of %s: %w", s.segPath, err)
	}
	l.bytesRead.Add(int64(len(hdr)))
	return int64(binary.BigEndian.Uint64(hdr[offTimestamp:])), nil
}

// RemoveSegment deletes the sealed segment starting at base with its index.
// Iterators positioned in it move on to the oldest remaining segment. It
// returns ErrActiveSegment for the active segment and ErrNotFound when no
// segment starts at base.
func (l *Log) RemoveSegment(base uint64) error {
	for _, s := range l.segments() {
		if s.base != base {
			continue
		}
		if !s.sealed.Load() {
			return fmt.Errorf("%w: %s", ErrActiveSegment, s.segPath)
		}
		return l.removeSegment(s)
	}
	return fmt.Errorf("%w: no segment starts at offset %d", ErrNotFound, base)
}

// OffsetAtTime is in timeindex.go.

// ErrActiveSegment is returned by RemoveSegment for the active segment, which
// appends still go to and which is never removed.
var ErrActiveSegment = errors.New("msgstore: segment is active")
