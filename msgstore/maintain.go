package msgstore

import (
	"slices"
	"time"
)

// jobKind is what maintenance would do with a segment.
type jobKind uint8

const (
	jobNone jobKind = iota
	jobDelete
	jobCompact
)

// retryDelay is how long a segment whose compaction or deletion failed is left alone.
const retryDelay = 30 * time.Second

// candidateLocked says what to do with sl now (now is zero when the caller
// does not care about retry delays). Caller holds s.mu.
func (s *Store) candidateLocked(sl *segLive, now time.Time) jobKind {
	if !sl.seg.sealed.Load() || sl.compacting || s.needRebuild.Load() {
		return jobNone
	}
	if !now.IsZero() && now.Before(sl.retryAt) {
		return jobNone
	}
	if sl.live == 0 {
		return jobDelete
	}
	if s.cfg.CompactDeadRatio >= 1 || sl.cleanSinceCompact || !sl.seg.sealDone.Load() {
		return jobNone
	}
	size := sl.seg.size.Load()
	if size > 0 && float64(sl.deadBytes()) > s.cfg.CompactDeadRatio*float64(size) {
		return jobCompact
	}
	return jobNone
}

// maintain is the Store's background goroutine: it deletes segments with no
// live record and compacts mostly dead ones, one at a time, off the publish
// path. Owned by the Store, stopped by s.stop (Close).
func (s *Store) maintain() {
	defer s.wg.Done()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
		case <-retry.C:
		}
		if wait := s.runJobs(); wait > 0 {
			retry.Reset(wait)
		}
	}
}

// runJobs runs jobs until none is left; it returns how long until a deferred
// (failed) segment may be retried, or 0.
func (s *Store) runJobs() time.Duration {
	for {
		select {
		case <-s.stop:
			return 0
		default:
		}
		sl, keep, kind, wait := s.pickJob()
		switch kind {
		case jobNone:
			return wait
		case jobDelete:
			s.deleteSegment(sl)
		case jobCompact:
			s.compact(sl, keep)
		}
	}
}

// pickJob returns the next job: deletions first (cheap, free the most), then
// the compaction with the most dead bytes.
// For a compaction it marks the segment and snapshots its bitmap under the
// same lock, so releases from then on are counted in releasedDuring.
func (s *Store) pickJob() (*segLive, []uint64, jobKind, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	var best *segLive
	var wait time.Duration
	for _, sl := range s.segs {
		if now.Before(sl.retryAt) {
			if d := sl.retryAt.Sub(now); wait == 0 || d < wait {
				wait = d
			}
			continue
		}
		switch s.candidateLocked(sl, now) {
		case jobDelete:
			return sl, nil, jobDelete, 0
		case jobCompact:
			if best == nil || sl.deadBytes() > best.deadBytes() {
				best = sl
			}
		}
	}
	if best != nil {
		best.compacting = true
		best.releasedDuring = 0
		return best, append([]uint64(nil), best.bits...), jobCompact, 0
	}
	return nil, nil, jobNone, wait
}

// deleteSegment drops a segment with no live record.
func (s *Store) deleteSegment(sl *segLive) {
	s.mu.Lock()
	if sl.live != 0 { // cannot happen: only the active segment gains records
		s.mu.Unlock()
		return
	}
	if i := slices.Index(s.segs, sl); i >= 0 {
		s.segs = slices.Delete(s.segs, i, i+1)
	}
	s.deleted++
	s.mu.Unlock()
	if err := s.log.removeSegment(sl.seg); err != nil {
		// Already out of the tables and closed; a file left behind holds no
		// live record and is deleted after the next Open.
		s.cfg.Logger.Error("msgstore: delete segment", "segment", sl.seg.segPath, "error", err)
		s.mu.Lock()
		s.lastErr = err.Error()
		s.mu.Unlock()
	}
}

// compact rewrites a mostly dead segment (pickJob marked it compacting and
// took the snapshot keep).
func (s *Store) compact(sl *segLive, keep []uint64) {
	oldSize := sl.seg.size.Load()
	kept, err := s.log.compactSegment(sl.seg, keep, s.cfg.CompactBytesPerSec, s.stop)

	s.mu.Lock()
	defer s.mu.Unlock()
	sl.compacting = false
	if err != nil {
		if errStopped(err) {
			return
		}
		sl.retryAt = time.Now().Add(retryDelay)
		s.lastErr = err.Error()
		s.cfg.Logger.Error("msgstore: compaction failed; will retry", "segment", sl.seg.segPath,
			"retry_in", retryDelay, "error", err)
		return
	}
	// kept is exact for the records live when we started; take away what was
	// released since, so the counter tracks the file again.
	newLive := max(0, kept-sl.releasedDuring)
	if sl.live == 0 {
		newLive = 0
	}
	s.liveBytes += newLive - sl.liveBytes
	sl.liveBytes = newLive
	sl.cleanSinceCompact = sl.releasedDuring == 0
	s.compactions++
	s.compactedBytes += oldSize - sl.seg.size.Load()
}
