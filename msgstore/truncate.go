package msgstore

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// ErrTruncatedAway is given to WhenDurable callbacks whose offset
// TruncateAfter removed: that record will never be durable.
var ErrTruncatedAway = errors.New("msgstore: record removed by TruncateAfter")

// TruncateAfter removes every record with an offset above off, so the next
// Append gets offset off+1, for an owner whose uncommitted tail must go (a
// replica rejoining a new leader). The change is durable when it returns:
// later segments are deleted newest first and the directory fsynced, then
// the segment holding off is cut after it and fdatasynced, so a crash at any
// point leaves a prefix of the log, never a hole with old records after it.
// Appends then go to a new segment starting at off+1. Iterators positioned
// beyond off see the records appended there later. WhenDurable callbacks for
// removed offsets get ErrTruncatedAway. A Store's log is refused (queues hold
// Locs into it), and so is a failed log. An error during the change leaves the
// log failed (ErrLogFailed): reopen it, and recovery yields a prefix of it.
func (l *Log) TruncateAfter(off uint64) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	switch {
	case l.closed:
		return ErrClosed
	case l.obs != nil:
		return errors.New("msgstore: TruncateAfter on a Store's log")
	}
	if fe := l.failed.Load(); fe != nil {
		return *fe
	}
	if off+1 >= l.next {
		return nil
	}
	if err := l.truncateLocked(off); err != nil {
		err = fmt.Errorf("%w: truncate %s after %d: %w", ErrLogFailed, l.cfg.Dir, off, err)
		l.stateMu.Lock()
		if l.failErr == nil {
			l.failErr = err
			l.failed.Store(&l.failErr)
		}
		l.stateMu.Unlock()
		l.kickFlusher() // fails the waiters
		return err
	}
	return nil
}

func (l *Log) truncateLocked(off uint64) error {
	segs := l.segments()
	var keep *segment
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		if s.base <= off {
			keep = s
			break
		}
		s.sealed.Store(true) // removeSegment refuses the active one
		if err := l.removeSegment(s); err != nil {
			return err
		}
	}
	if err := l.syncDir(); err != nil {
		return err
	}
	if keep != nil {
		if err := l.cutSegment(keep, off); err != nil {
			return err
		}
	}
	l.stateMu.Lock()
	l.written = min(l.written, off+1)
	l.synced = min(l.synced, off+1)
	l.truncations++ // a flush round in progress must not publish its older target
	keepW := l.waiters[:0]
	var gone []waiter
	for _, w := range l.waiters {
		switch {
		case w.off <= off+1:
			keepW = append(keepW, w)
		case w.sync:
			w.off = off + 1 // Sync wants what is left durable
			keepW = append(keepW, w)
		default:
			gone = append(gone, w)
		}
	}
	clear(l.waiters[len(keepW):])
	l.waiters = keepW
	l.stateMu.Unlock()
	for _, w := range gone {
		w.fn(ErrTruncatedAway)
	}
	if _, err := l.rollLocked(off + 1); err != nil {
		return err
	}
	l.next = off + 1
	l.nextOff.Store(off + 1)
	return nil
}

// cutSegment cuts s after the record at off and makes the cut durable.
// Caller holds writeMu. It holds s.fileMu exclusively so no read runs
// meanwhile, and bumps s.gen so iterators in s seek again by offset.
func (l *Log) cutSegment(s *segment, off uint64) error {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	if s.f == nil {
		return fmt.Errorf("segment %s removed", s.segPath)
	}
	pos, lastPlus1, err := l.cutPosLocked(s, off)
	if err != nil {
		return err
	}
	if err := s.f.Truncate(pos); err != nil {
		return fmt.Errorf("cut %s at %d: %w", s.segPath, pos, err)
	}
	l.fsyncs.Add(1)
	if err := fdatasync(s.f); err != nil {
		return fmt.Errorf("fdatasync %s: %w", s.segPath, err)
	}
	s.gen++
	s.size.Store(pos)
	s.lastPlus1.Store(lastPlus1)
	s.idxMu.Lock()
	if s.idxLoaded {
		i := 0
		for i < len(s.idx) && int64(s.idx[i].pos) < pos {
			i++
		}
		s.idx = s.idx[:i]
	}
	// The time index is rebuilt from the segment when next needed.
	s.tix, s.tixLoaded, s.tixLive, s.tixSavedSize = nil, false, false, -1
	s.tsMax.Store(noTimestamp)
	s.idxMu.Unlock()
	var errs []error
	for _, p := range []string{s.idxPath, s.tixPath} {
		// Stale now; a sealed segment without its .idx is scanned at an unclean Open.
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cutPosLocked finds the end of the record at off in s (or of the last one
// below it): the size s keeps, and its lastPlus1. Caller holds s.fileMu.
func (l *Log) cutPosLocked(s *segment, off uint64) (int64, uint64, error) {
	rel := min(off-s.base, math.MaxUint32)
	s.idxMu.Lock()
	err := l.ensureIndexLocked(s)
	start, _ := lookupEntry(s.idx, uint32(rel))
	s.idxMu.Unlock()
	if err != nil {
		return 0, 0, err
	}
	sc := newScanner(s.f, start, s.size.Load(), 64<<10, &l.bytesRead)
	pos, lastPlus1 := start, uint64(0)
	for {
		rec, raw, at, err := sc.next()
		if err == io.EOF || (err == nil && rec.Offset > off) {
			break
		}
		if err != nil {
			return 0, 0, fmt.Errorf("scan %s: %w", s.segPath, err)
		}
		pos, lastPlus1 = at+int64(len(raw)), rec.Offset+1
	}
	if lastPlus1 == 0 && pos > 0 {
		// The index entry was the first record above off; offsets are dense
		// in a segment that is never compacted, so off ends right before it.
		lastPlus1 = off + 1
	}
	return pos, lastPlus1, nil
}

// SkipTo makes the next Append's offset at least off by starting a new
// segment there, for an owner whose log must begin where another copy's
// begins (a replica catching up from a leader that reclaimed its prefix).
// Offsets in between never hold records.
func (l *Log) SkipTo(off uint64) error { return l.advanceTo(off) }
