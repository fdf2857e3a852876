package msgstore

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// compactSegment rewrites a sealed segment keeping only the records whose bit
// is set in keep (indexed by offset - base), with their offsets unchanged, and
// swaps the new file in. It returns the bytes kept.
//
// Crash safety: the new data and index go to *.compact files, are fsynced, and
// are renamed over the old names; a crash leaves the old segment or the new one
// complete (Open deletes *.compact leftovers, and a stale index is detected by
// its trailer and rebuilt). Readers holding the old file finish on it; Locs
// made before keep working through the index fallback, since offsets do not change.
func (l *Log) compactSegment(s *segment, keep []uint64, rate int64, stop <-chan struct{}) (int64, error) {
	if !s.sealDone.Load() {
		return 0, fmt.Errorf("msgstore: segment %s is not sealed yet", s.segPath)
	}
	s.fileMu.RLock()
	gen, open := s.gen, s.f != nil
	s.fileMu.RUnlock()
	if !open {
		return 0, fmt.Errorf("%w: segment %s removed", ErrNotFound, s.segPath)
	}
	tmpSeg, tmpIdx := s.segPath+compactSuffix, s.idxPath+compactSuffix
	out, err := os.OpenFile(tmpSeg, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, fmt.Errorf("msgstore: compact %s: %w", s.segPath, wrapWriteErr(err))
	}
	fail := func(err error) (int64, error) {
		out.Close()
		os.Remove(tmpSeg)
		os.Remove(tmpIdx)
		return 0, fmt.Errorf("msgstore: compact %s: %w", s.segPath, err)
	}

	kept, entries, err := l.copyLive(s, gen, out, keep, rate, stop)
	if err != nil {
		return fail(err)
	}
	if err := fdatasync(out); err != nil {
		return fail(err)
	}
	l.fsyncs.Add(1)
	lastPlus1 := s.lastPlus1.Load() // the segment's offset range does not shrink
	if err := writeFileAtomic(tmpIdx, encodeIndex(entries, lastPlus1, kept), true); err != nil {
		return fail(err)
	}
	l.fsyncs.Add(1)

	// Swap under the exclusive lock so no reader pairs the new index with the
	// old file or the other way round.
	s.fileMu.Lock()
	if s.f == nil || s.gen != gen {
		s.fileMu.Unlock()
		return fail(errSegmentChanged)
	}
	if err := os.Rename(tmpSeg, s.segPath); err != nil {
		s.fileMu.Unlock()
		return fail(err)
	}
	old := s.f
	s.f, s.gen = out, s.gen+1
	s.size.Store(kept)
	if err := os.Rename(tmpIdx, s.idxPath); err != nil {
		// The stale .idx no longer matches the segment's size: it will be rebuilt.
		l.cfg.Logger.Error("msgstore: cannot install compacted index", "index", s.idxPath, "error", err)
	}
	s.idxMu.Lock()
	s.idx, s.idxLoaded = entries, true
	s.idxMu.Unlock()
	s.fileMu.Unlock()

	if err := old.Close(); err != nil {
		l.cfg.Logger.Error("msgstore: close replaced segment", "segment", s.segPath, "error", err)
	}
	if err := l.syncDir(); err != nil {
		return kept, err
	}
	return kept, nil
}

// copyLive copies the kept records of s (read at generation gen) to out,
// rate-limited, and returns the bytes written and the new index.
func (l *Log) copyLive(s *segment, gen uint64, out *os.File, keep []uint64, rate int64, stop <-chan struct{}) (int64, []indexEntry, error) {
	sc := newScanner(segReaderAt{s: s, gen: gen, read: &l.bytesRead}, 0, s.size.Load(), 256<<10, nil)
	w := bufio.NewWriterSize(out, 256<<10)
	ib := indexBuilder{interval: int64(l.cfg.IndexInterval)}
	lim := rateLimiter{rate: rate, start: time.Now()}
	var pos int64
	for {
		rec, raw, _, err := sc.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, nil, err // a damaged segment is left as it is
		}
		if err := lim.wait(len(raw), stop); err != nil {
			return 0, nil, err
		}
		rel := rec.Offset - s.base
		if !bitSet(keep, rel) {
			continue
		}
		if _, err := w.Write(raw); err != nil {
			return 0, nil, wrapWriteErr(err)
		}
		ib.add(uint32(rel), pos)
		pos += int64(len(raw))
	}
	if err := w.Flush(); err != nil {
		return 0, nil, wrapWriteErr(err)
	}
	return pos, ib.entries, nil
}

// rateLimiter paces a copy to rate bytes per second (0: unlimited), sleeping
// in steps of at least a few milliseconds and waking early on stop.
type rateLimiter struct {
	rate  int64
	start time.Time
	done  int64
}

func (r *rateLimiter) wait(n int, stop <-chan struct{}) error {
	select {
	case <-stop:
		return ErrClosed
	default:
	}
	if r.rate <= 0 {
		return nil
	}
	r.done += int64(n)
	due := r.start.Add(time.Duration(float64(r.done) / float64(r.rate) * float64(time.Second)))
	d := time.Until(due)
	if d < 5*time.Millisecond {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-stop:
		return ErrClosed
	}
}

// errStopped reports whether err came from a stop request.
func errStopped(err error) bool { return errors.Is(err, ErrClosed) }
