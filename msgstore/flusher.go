package msgstore

import (
	"fmt"
	"time"
)

// waiter is a WhenDurable or Sync request.
type waiter struct {
	off  uint64 // satisfied once every offset below off is durable
	fn   func(error)
	sync bool // needs an fsync whatever the policy (Sync)
	err  error
}

// WhenDurable calls fn once every record up to and including offset is durable
// as the flush policy defines it: fsynced under FlushFsync, written to the OS
// under the other policies. fn runs on the flusher goroutine and must not block;
// it may call Append or WhenDurable. It receives a non-nil error if the log
// failed or closed before that point. After Close, fn is called at once, on the
// caller's goroutine, with ErrClosed.
//
// Waiters are kept until satisfied, so their number is bounded by what the
// caller keeps in flight (for the broker: unconfirmed publishes).
func (l *Log) WhenDurable(offset uint64, fn func(error)) {
	l.stateMu.Lock()
	if l.flusherDone {
		err := l.doneErrLocked()
		l.stateMu.Unlock()
		fn(err)
		return
	}
	l.waiters = append(l.waiters, waiter{off: offset + 1, fn: fn})
	l.stateMu.Unlock()
	l.kickFlusher()
}

// Sync blocks until everything appended before the call is fsynced, whatever the policy.
func (l *Log) Sync() error {
	ch := make(chan error, 1)
	l.stateMu.Lock()
	if l.flusherDone {
		err := l.doneErrLocked()
		l.stateMu.Unlock()
		return err
	}
	l.waiters = append(l.waiters, waiter{off: l.written, fn: func(err error) { ch <- err }, sync: true})
	l.forceSync = true
	l.stateMu.Unlock()
	l.kickFlusher()
	return <-ch
}

func (l *Log) doneErrLocked() error {
	if l.failErr != nil {
		return l.failErr
	}
	return ErrClosed
}

func (l *Log) kickFlusher() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// runFlusher is the group-commit goroutine, owned by the Log and stopped by
// closing l.stop (Close). Each round takes the files written since the last
// round, fdatasyncs them without any lock held, then calls every waiter the
// round covers. It loops without sleeping while there is work, so a burst of
// appends from many goroutines shares one fsync.
func (l *Log) runFlusher() {
	defer l.wg.Done()
	var tick <-chan time.Time
	if l.cfg.Flush == FlushInterval {
		t := time.NewTicker(l.cfg.FlushInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-l.kick:
		case <-tick:
			l.stateMu.Lock()
			l.forceSync = l.forceSync || l.written > l.synced
			l.stateMu.Unlock()
		case <-l.stop:
			l.stateMu.Lock()
			l.forceSync = true
			l.stateMu.Unlock()
			for l.flushRound() {
			}
			l.stateMu.Lock()
			l.flusherDone = true
			err := l.doneErrLocked()
			rest := l.waiters
			l.waiters = nil
			l.stateMu.Unlock()
			for _, w := range rest {
				w.fn(err)
			}
			return
		}
		for l.flushRound() {
		}
	}
}

// needSyncLocked reports whether a round should fsync now. Caller holds stateMu.
func (l *Log) needSyncLocked() bool {
	if l.failErr != nil {
		return false
	}
	if len(l.toSeal) > 0 {
		return true
	}
	if l.written <= l.synced && !l.dirDirty {
		return false
	}
	switch {
	case l.forceSync, l.cfg.Flush == FlushFsync:
		return true
	case l.cfg.Flush == FlushMessages:
		return l.unsynced >= l.cfg.FlushMessages
	}
	return false
}

// flushRound runs one round and reports whether more work is already waiting.
func (l *Log) flushRound() bool {
	l.stateMu.Lock()
	doSync := l.needSyncLocked()
	target, truncs := l.written, l.truncations
	var dirty, seal []*segment
	var dir bool
	if doSync {
		dirty, l.dirtySegs = l.dirtySegs, l.spareSegs[:0]
		for _, s := range dirty {
			s.dirty = false
		}
		dir, l.dirDirty = l.dirDirty, false
		seal, l.toSeal = l.toSeal, nil
		l.unsynced = 0
	}
	l.forceSync = false
	l.stateMu.Unlock()

	var err error
	if doSync {
		err = l.syncFiles(dirty, dir, seal)
		clear(dirty)
	}

	l.stateMu.Lock()
	if doSync {
		l.spareSegs = dirty[:0]
		if err != nil && l.failErr == nil {
			l.failErr = fmt.Errorf("%w: %w", ErrLogFailed, err)
			l.failed.Store(&l.failErr)
			l.cfg.Logger.Error("msgstore: fsync failed; log refuses appends until reopened", "dir", l.cfg.Dir, "error", err)
		} else if err == nil && target > l.synced && truncs == l.truncations {
			l.synced = target
		}
	}
	ready := l.popReadyLocked(l.readyBuf[:0])
	more := l.needSyncLocked()
	l.stateMu.Unlock()

	for _, w := range ready {
		w.fn(w.err)
	}
	clear(ready) // drop references to the callbacks
	l.readyBuf = ready[:0]
	return more
}

// popReadyLocked moves satisfied waiters to ready. Caller holds stateMu.
func (l *Log) popReadyLocked(ready []waiter) []waiter {
	keep := l.waiters[:0]
	for _, w := range l.waiters {
		var ok bool
		switch {
		case l.failErr != nil:
			ok, w.err = true, l.failErr
		case w.sync || l.cfg.Flush == FlushFsync:
			ok = w.off <= l.synced
		default:
			ok = w.off <= l.written
		}
		if ok {
			ready = append(ready, w)
		} else {
			keep = append(keep, w)
		}
	}
	clear(l.waiters[len(keep):])
	l.waiters = keep
	return ready
}

// syncFiles fdatasyncs the written segments, then the directory if files were
// created, then seals rolled segments (index written only after their data is
// durable, so a matching .idx proves the segment needs no scan).
func (l *Log) syncFiles(dirty []*segment, dir bool, seal []*segment) error {
	var sizes map[string]int64
	if l.onSynced != nil {
		sizes = make(map[string]int64, len(dirty))
	}
	for _, s := range dirty {
		s.fileMu.RLock()
		if s.f == nil { // removed since it was written
			s.fileMu.RUnlock()
			continue
		}
		size := s.size.Load()
		err := fdatasync(s.f)
		s.fileMu.RUnlock()
		l.fsyncs.Add(1)
		if err != nil {
			return fmt.Errorf("msgstore: fdatasync %s: %w", s.segPath, err)
		}
		if sizes != nil {
			sizes[s.segPath] = size
		}
	}
	if dir {
		if err := l.syncDir(); err != nil {
			return err
		}
	}
	if sizes != nil {
		l.onSynced(sizes)
	}
	if len(seal) == 0 {
		return nil
	}
	for _, s := range seal {
		l.sealSegment(s)
	}
	if err := l.syncDir(); err != nil {
		return err
	}
	if l.onSealed != nil {
		l.onSealed()
	}
	return nil
}

// sealSegment writes a rolled segment's index file and frees the in-memory copy
// (it is loaded again on demand). A failure only costs a scan at the next
// unclean Open, so it is logged, not fatal.
func (l *Log) sealSegment(s *segment) {
	s.fileMu.RLock()
	defer s.fileMu.RUnlock()
	if s.f == nil {
		return
	}
	s.idxMu.Lock()
	data := encodeIndex(s.idx, s.lastPlus1.Load(), s.size.Load())
	err := writeFileAtomic(s.idxPath, data, true)
	l.fsyncs.Add(1)
	if err == nil {
		s.idx, s.idxLoaded = nil, false
	}
	s.idxMu.Unlock()
	if err != nil {
		l.cfg.Logger.Error("msgstore: cannot write index of sealed segment", "index", s.idxPath, "error", err)
	}
	s.sealDone.Store(true)
}
