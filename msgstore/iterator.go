package msgstore

import (
	"io"
)

// Iterator reads records in offset order, starting from an offset, across
// segments. It reads through its own buffer without blocking appenders; when
// it reaches the end of the log Next returns false, and a later Next continues
// with records appended since. An Iterator is not safe for concurrent use.
type Iterator struct {
	l    *Log
	next uint64 // smallest offset still wanted
	seg  *segment
	sc   *scanner
	rec  Record
	loc  Loc
	err  error
}

// Iterate returns an iterator over the records with offsets >= from.
func (l *Log) Iterate(from uint64) *Iterator { return &Iterator{l: l, next: from} }

// Next advances to the next record and reports whether there is one. It returns
// false at the end of the log or on an error (see Err).
func (it *Iterator) Next() bool {
	for it.err == nil {
		if it.sc == nil && !it.position() {
			return false
		}
		it.sc.end = it.seg.size.Load()
		rec, raw, pos, err := it.sc.next()
		switch {
		case err == io.EOF:
			nxt := it.l.segmentAfter(it.seg.base)
			if nxt == nil {
				return false
			}
			// The segment is sealed once a later one exists; re-read its final
			// size in case records landed after our size check.
			if it.seg.size.Load() > it.sc.pos {
				continue
			}
			it.start(nxt, 0)
			continue
		case err != nil && isGone(err):
			it.seg, it.sc = nil, nil // compacted or removed: seek again by offset
			continue
		case err != nil:
			it.err = err
			return false
		}
		if rec.Offset < it.next {
			continue
		}
		it.rec = rec
		it.loc = Loc{Offset: rec.Offset, Pos: uint32(pos), Size: uint32(len(raw))}
		it.next = rec.Offset + 1
		return true
	}
	return false
}

// position finds the segment and file position to resume from it.next.
func (it *Iterator) position() bool {
	for {
		s := it.l.findSegment(it.next)
		if s == nil {
			segs := it.l.segments()
			if len(segs) == 0 {
				return false
			}
			s = segs[0]
		} else if lp := s.lastPlus1.Load(); s.sealed.Load() && lp != 0 && lp <= it.next {
			// Everything in s is older than wanted; skip straight to the next segment.
			if nxt := it.l.segmentAfter(s.base); nxt != nil {
				s = nxt
			}
		}
		s.fileMu.RLock()
		if s.f == nil {
			// Removed between lookup and lock. Removal publishes the new segment
			// list before closing the file, so the next lookup does not find s.
			s.fileMu.RUnlock()
			continue
		}
		pos, err := it.l.seekLocked(s, it.next)
		gen := s.gen
		s.fileMu.RUnlock()
		if err != nil {
			it.err = err
			return false
		}
		it.seg = s
		it.sc = newScanner(segReaderAt{s: s, gen: gen, read: &it.l.bytesRead}, pos, s.size.Load(), 64<<10, nil)
		return true
	}
}

// start positions the iterator at pos in s.
func (it *Iterator) start(s *segment, pos int64) {
	s.fileMu.RLock()
	gen := s.gen
	s.fileMu.RUnlock()
	it.seg = s
	it.sc = newScanner(segReaderAt{s: s, gen: gen, read: &it.l.bytesRead}, pos, s.size.Load(), 64<<10, nil)
}

// Record returns the current record. Its slices alias the iterator's buffer and
// are valid until the next call to Next; copy what must outlive it.
func (it *Iterator) Record() Record { return it.rec }

// Loc returns the current record's location.
func (it *Iterator) Loc() Loc { return it.loc }

// Err returns the error that stopped the iterator, or nil at the end of the log.
func (it *Iterator) Err() error { return it.err }
