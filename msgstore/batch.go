package msgstore

import (
	"fmt"
	"math"
	"time"
)

// maxBatchWrite bounds the bytes one write of AppendBatch carries; a larger
// batch is written in several writes (still under one lock hold).
const maxBatchWrite = 1 << 20

// batchRecord is one record of a batch being written: where its encoding
// sits in the batch buffer, and what the bookkeeping after the write needs.
type batchRecord struct {
	start, n int
	ts       int64
	refs     int
}

// appendBatch writes rs with one write per run of records that fit in the
// active segment (and in maxBatchWrite), instead of one write per record. It
// stores each record's location in locs (len(locs) >= len(rs)) and returns
// how many records were appended: all of them, or, with an error, those
// before the one that failed. Records after a failure are not written, so a
// batch keeps the log's order. refs[i] is record i's reference count (nil
// means 1 each).
func (l *Log) appendBatch(rs []Record, refs []int, locs []Loc) (int, error) {
	// Encode outside the lock, as append does; offsets and CRCs come later.
	total := 0
	valid := len(rs)
	var verr error
	for i := range rs {
		r := &rs[i]
		if len(r.Exchange) > 255 || len(r.RoutingKey) > 255 {
			valid, verr = i, ErrFieldTooLong
			break
		}
		if n := r.EncodedSize(); n > l.cfg.MaxRecordSize {
			valid, verr = i, fmt.Errorf("%w: %d bytes, limit %d", ErrRecordTooLarge, n, l.cfg.MaxRecordSize)
			break
		}
		total += r.EncodedSize()
	}
	rs = rs[:valid]
	bp := l.getBuf(total)
	defer l.putBuf(bp)
	buf := (*bp)[:total]
	metas := make([]batchRecord, len(rs))
	now := time.Now().UnixNano()
	at := 0
	for i := range rs {
		r := &rs[i]
		if r.Timestamp == 0 {
			r.Timestamp = now
		}
		n := r.EncodedSize()
		putRecordFields(buf[at:at+n], r)
		metas[i] = batchRecord{start: at, n: n, ts: r.Timestamp, refs: 1}
		if refs != nil {
			metas[i].refs = refs[i]
		}
		at += n
	}

	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	if fe := l.failed.Load(); fe != nil {
		return 0, *fe
	}
	done := 0
	for done < len(metas) {
		s, err := l.activeForLocked(metas[done].n)
		if err != nil {
			return done, err
		}
		// Take the records that fit in s after the first, which always goes in.
		end := done + 1
		size := s.size.Load() + int64(metas[done].n)
		for end < len(metas) {
			n := int64(metas[end].n)
			if size+n > l.cfg.SegmentSize || l.next+uint64(end-done)-s.base >= math.MaxUint32 ||
				metas[end].start+metas[end].n-metas[done].start > maxBatchWrite {
				break
			}
			size += n
			end++
		}
		from, to := metas[done].start, metas[end-1].start+metas[end-1].n
		if err := l.writeRunLocked(s, buf[from:to], metas[done:end], locs[done:end]); err != nil {
			return done, err
		}
		done = end
	}
	if verr != nil {
		return done, verr
	}
	return done, nil
}

// activeForLocked returns the active segment, rolling first when a record of
// n bytes does not fit in it, and writes the prologue a new segment needs.
// Caller holds writeMu.
func (l *Log) activeForLocked(n int) (*segment, error) {
	s := l.active
	if sz := s.size.Load(); sz > 0 && (sz+int64(n) > l.cfg.SegmentSize || l.next-s.base > math.MaxUint32) {
		var err error
		if s, err = l.rollLocked(l.next); err != nil {
			return nil, err
		}
	}
	if s.needPrologue {
		if err := l.writePrologueLocked(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// writeRunLocked writes the encoded records in buf (described by metas, with
// starts relative to the whole batch) at the end of s with one write, then
// does every record's bookkeeping and fills locs. Caller holds writeMu.
func (l *Log) writeRunLocked(s *segment, buf []byte, metas []batchRecord, locs []Loc) error {
	first, pos := l.next, s.size.Load()
	base := metas[0].start
	for i, m := range metas {
		sealRecord(buf[m.start-base:m.start-base+m.n], first+uint64(i))
	}
	if _, err := s.f.WriteAt(buf, pos); err != nil {
		return l.writeFailedLocked(s, pos, first, err)
	}
	for i, m := range metas {
		off, rpos := first+uint64(i), pos+int64(m.start-base)
		locs[i] = l.notedAppendLocked(s, off, rpos, m.n, m.ts, m.refs)
	}
	l.publishWriteLocked(s, l.next-1)
	return nil
}

// notedAppendLocked does the bookkeeping of a record written at rpos of s:
// sizes, sparse and time index, next offset, the Store's observer and the
// counters. Caller holds writeMu.
func (l *Log) notedAppendLocked(s *segment, off uint64, rpos int64, n int, ts int64, refs int) Loc {
	s.size.Store(rpos + int64(n))
	s.lastPlus1.Store(off + 1)
	indexed := rpos >= s.idxNext
	if indexed {
		s.idxMu.Lock()
		s.idx = append(s.idx, indexEntry{rel: uint32(off - s.base), pos: uint32(rpos)})
		s.idxMu.Unlock()
		s.idxNext = rpos + int64(l.cfg.IndexInterval)
	}
	s.noteAppendLocked(ts, uint32(off-s.base), rpos, indexed)
	l.next = off + 1
	l.nextOff.Store(l.next)
	loc := Loc{Offset: off, Pos: uint32(rpos), Size: uint32(n)}
	if l.obs != nil {
		l.obs.appended(loc, refs)
	}
	l.appends.Add(1)
	return loc
}
