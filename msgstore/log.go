package msgstore

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Log is an append-only log of records in segment files. It is safe for
// concurrent use: appends are serialised, reads run in parallel with them, and
// one flusher goroutine makes data durable (see FlushPolicy).
//
// Lock order: writeMu → (Store.mu) → segMu → stateMu; segment.fileMu → segment.idxMu.
// writeMu is held across the write(2) of an append, which is the one syscall
// needed to serialise offsets; readers and the flusher never take it.
type Log struct {
	cfg   Config
	dirf  *os.File // the directory, for fsyncs after creating or renaming files
	lockf *os.File // holds the flock

	writeMu sync.Mutex
	active  *segment
	next    uint64 // offset of the next record
	closed  bool
	obs     appendObserver // set once by the Store before any append
	// prologue, when set, gives the record that starts every segment Append
	// starts (SetPrologue).
	prologue func() (Record, bool)

	segMu sync.Mutex                 // serialises changes to segs
	segs  atomic.Pointer[[]*segment] // sorted by base, copy-on-write: readers load without locks

	stateMu     sync.Mutex
	written     uint64 // offsets below are written to the OS
	synced      uint64 // offsets below are fsynced
	dirtySegs   []*segment
	spareSegs   []*segment
	dirDirty    bool // a file was created since the last directory fsync
	toSeal      []*segment
	waiters     []waiter
	readyBuf    []waiter // flusher-owned scratch
	unsynced    int      // records since the last fsync (FlushMessages)
	forceSync   bool
	failErr     error
	flusherDone bool
	truncations uint64 // TruncateAfter calls; a flush round started before one publishes nothing

	failed atomic.Pointer[error] // set once an fsync failed; appends refuse

	kick chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup

	closeOnce sync.Once
	closeErr  error

	recovery      RecoveryInfo
	nextOff       atomic.Uint64
	appends       atomic.Uint64
	fsyncs        atomic.Uint64
	bytesRead     atomic.Int64
	indexRebuilds atomic.Int64
	// timeIndexRebuilds counts time indexes rebuilt from their segment.
	timeIndexRebuilds atomic.Int64

	bufPool sync.Pool

	// onSynced, when set (tests only, before any append), receives the segment
	// sizes a flush round made durable, after the directory fsync of that round.
	onSynced func(map[string]int64)
	// onSealed is called by the flusher after it sealed segments (the Store kicks compaction).
	onSealed func()
}

// appendObserver sees every append and roll under writeMu; the Store uses it to
// account liveness before a segment can be considered for deletion.
type appendObserver interface {
	appended(loc Loc, refs int)
	rolled(old, cur *segment)
}

// LogStats is a snapshot of a Log's counters.
type LogStats struct {
	// Segments is the number of segment files.
	Segments int
	// Bytes is the total size of the segment files.
	Bytes int64
	// FirstOffset is the base offset of the oldest segment.
	FirstOffset uint64
	// LastOffset is the offset of the newest record, or 0 when none was ever appended.
	LastOffset uint64
	// NextOffset is the offset the next append gets.
	NextOffset uint64
	// SyncedOffset: every record below it has been fsynced.
	SyncedOffset uint64
	// FlushPolicy is the configured policy.
	FlushPolicy FlushPolicy
	// Appends counts records appended since Open.
	Appends uint64
	// Fsyncs counts fdatasync/fsync calls since Open (segments, indexes, directory).
	Fsyncs uint64
	// BytesRead counts segment bytes read since Open, Open's own reads included.
	BytesRead int64
	// IndexRebuilds counts sparse indexes rebuilt from their segment since Open.
	IndexRebuilds int64
	// TimeIndexRebuilds counts time indexes (.tix) rebuilt from their segment since Open.
	TimeIndexRebuilds int64
	// PendingWaiters is the number of WhenDurable callbacks not yet called.
	PendingWaiters int
	// Failed is the error that stopped the log, or "".
	Failed string
}

// Append writes r at the end of the log and returns its location. The record
// is in the OS (visible to readers and to a process that restarts) when Append
// returns; use WhenDurable for the flush policy's guarantee. On a write error
// (ErrDiskFull for ENOSPC) the partial record is cut off and the log is unchanged.
func (l *Log) Append(r Record) (Loc, error) { return l.append(&r, 1) }

// AppendBatch appends rs in order as Append would, with one write per run of
// records that fit in the active segment, and stores their locations in locs,
// which must be at least as long as rs. It returns how many records were
// appended: all, or with an error those before the record that failed (the
// rest were not written). Zero timestamps are set to the current time.
func (l *Log) AppendBatch(rs []Record, locs []Loc) (int, error) {
	if len(locs) < len(rs) {
		return 0, fmt.Errorf("%w: %d locations for %d records", ErrInvalidConfig, len(locs), len(rs))
	}
	return l.appendBatch(rs, nil, locs)
}

func (l *Log) append(r *Record, refs int) (Loc, error) {
	if len(r.Exchange) > 255 || len(r.RoutingKey) > 255 {
		return Loc{}, ErrFieldTooLong
	}
	n := r.EncodedSize()
	if n > l.cfg.MaxRecordSize {
		return Loc{}, fmt.Errorf("%w: %d bytes, limit %d", ErrRecordTooLarge, n, l.cfg.MaxRecordSize)
	}
	if r.Timestamp == 0 {
		r.Timestamp = time.Now().UnixNano()
	}
	// Copy the fields outside the lock; only the offset and CRC are left for later.
	bp := l.getBuf(n)
	defer l.putBuf(bp)
	buf := (*bp)[:n]
	putRecordFields(buf, r)

	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if l.closed {
		return Loc{}, ErrClosed
	}
	if fe := l.failed.Load(); fe != nil {
		return Loc{}, *fe
	}
	s, err := l.activeForLocked(n)
	if err != nil {
		return Loc{}, err
	}
	return l.writeLocked(s, buf, r.Timestamp, refs)
}

// writeLocked writes the encoded record buf (all but its offset and CRC) at
// the end of s, which is the active segment. Caller holds writeMu.
func (l *Log) writeLocked(s *segment, buf []byte, ts int64, refs int) (Loc, error) {
	n := len(buf)
	off, pos := l.next, s.size.Load()
	sealRecord(buf, off)
	if _, err := s.f.WriteAt(buf, pos); err != nil {
		return Loc{}, l.writeFailedLocked(s, pos, off, err)
	}
	loc := l.notedAppendLocked(s, off, pos, n, ts, refs)
	l.publishWriteLocked(s, off)
	return loc, nil
}

// SetPrologue makes every segment that Append starts from now on begin with
// the record fn returns, written just before the record that started the
// segment (its offset comes first; a zero Timestamp is set to the current
// time). When fn reports false the segment gets no prologue. An owner that
// keeps its own state in the log (stream offset tracking) uses it so a copy of
// that state is in every segment and removing old segments never removes the
// only one. fn runs under the append lock: it must be quick and must not call
// the Log. If writing the prologue fails, the Append fails and the next
// Append tries again, so the prologue is always a new segment's first record.
// nil removes the hook. The segment Open creates for an empty log has no
// prologue. Not for a Store's log (the Store does not expose it).
func (l *Log) SetPrologue(fn func() (Record, bool)) {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.prologue = fn
}

// writePrologueLocked writes the prologue at the start of s, a segment that
// Append started. Caller holds writeMu.
func (l *Log) writePrologueLocked(s *segment) error {
	if l.prologue == nil {
		s.needPrologue = false
		return nil
	}
	r, ok := l.prologue()
	if !ok {
		s.needPrologue = false
		return nil
	}
	if len(r.Exchange) > 255 || len(r.RoutingKey) > 255 {
		return fmt.Errorf("msgstore: prologue: %w", ErrFieldTooLong)
	}
	n := r.EncodedSize()
	if n > l.cfg.MaxRecordSize {
		return fmt.Errorf("msgstore: prologue: %w: %d bytes, limit %d", ErrRecordTooLarge, n, l.cfg.MaxRecordSize)
	}
	if r.Timestamp == 0 {
		r.Timestamp = time.Now().UnixNano()
	}
	buf := make([]byte, n) // once per segment: not worth the pool
	putRecordFields(buf, &r)
	if _, err := l.writeLocked(s, buf, r.Timestamp, 1); err != nil {
		return err
	}
	s.needPrologue = false
	return nil
}

// SetSegmentSize changes the size at which Append starts a new segment, for
// an owner whose configuration changes while the log is open (a stream policy).
// The active segment keeps filling until it reaches the new size. IndexInterval
// stays as configured: when it exceeds the new size, each segment gets one
// index entry and a lookup reads at most its segment. It returns
// ErrInvalidConfig when n is outside [1024, MaxSegmentSize].
func (l *Log) SetSegmentSize(n int64) error {
	if n < 1024 || n > MaxSegmentSize {
		return fmt.Errorf("%w: SegmentSize %d outside [1024, %d]", ErrInvalidConfig, n, MaxSegmentSize)
	}
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.cfg.SegmentSize = n
	return nil
}

// writeFailedLocked cuts a partial record off the file so the log stays a
// sequence of whole records, and wraps the error.
func (l *Log) writeFailedLocked(s *segment, pos int64, off uint64, err error) error {
	if terr := s.f.Truncate(pos); terr != nil {
		// The next append overwrites from pos anyway and readers never read past
		// s.size; recovery would cut the garbage after a crash.
		l.cfg.Logger.Error("msgstore: cannot cut partial record after failed write",
			"segment", s.segPath, "pos", pos, "error", terr)
	}
	return fmt.Errorf("msgstore: append offset %d to %s at %d: %w", off, s.segPath, pos, wrapWriteErr(err))
}

// publishWriteLocked tells the flusher about a write. Caller holds writeMu.
func (l *Log) publishWriteLocked(s *segment, off uint64) {
	kick := false
	l.stateMu.Lock()
	l.written = off + 1
	if !s.dirty {
		s.dirty = true
		l.dirtySegs = append(l.dirtySegs, s)
	}
	switch l.cfg.Flush {
	case FlushFsync:
		kick = true
	case FlushMessages:
		l.unsynced++
		kick = l.unsynced >= l.cfg.FlushMessages
	}
	l.stateMu.Unlock()
	if kick {
		l.kickFlusher()
	}
}

// rollLocked starts a new active segment at base. Caller holds writeMu.
func (l *Log) rollLocked(base uint64) (*segment, error) {
	ns := newSegment(l.cfg.Dir, base)
	f, err := os.OpenFile(ns.segPath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("msgstore: start segment %s: %w", ns.segPath, wrapWriteErr(err))
	}
	ns.f, ns.idxLoaded = f, true
	ns.needPrologue = l.prologue != nil
	ns.startTimeIndex()
	old := l.active
	old.sealed.Store(true)
	l.active = ns
	l.addSegment(ns)
	if l.obs != nil {
		l.obs.rolled(old, ns)
	}
	l.stateMu.Lock()
	l.dirDirty = true
	l.toSeal = append(l.toSeal, old)
	l.stateMu.Unlock()
	l.kickFlusher()
	return ns, nil
}

// advanceTo makes the next offset at least off, starting a new segment, so
// offsets that a crash lost but a queue still references are never reused.
func (l *Log) advanceTo(off uint64) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if off <= l.next {
		return nil
	}
	if _, err := l.rollLocked(off); err != nil {
		return err
	}
	l.next = off
	l.nextOff.Store(off)
	return nil
}

func (l *Log) getBuf(n int) *[]byte {
	if bp, ok := l.bufPool.Get().(*[]byte); ok && cap(*bp) >= n {
		return bp
	}
	b := make([]byte, n, max(n, 4096))
	return &b
}

func (l *Log) putBuf(bp *[]byte) {
	if cap(*bp) <= 1<<20 { // do not pin huge bodies in the pool
		l.bufPool.Put(bp)
	}
}

// addSegment publishes a new segment to readers.
func (l *Log) addSegment(s *segment) {
	l.segMu.Lock()
	defer l.segMu.Unlock()
	old := l.segments()
	segs := make([]*segment, len(old), len(old)+1)
	copy(segs, old)
	segs = append(segs, s)
	l.segs.Store(&segs)
}

// segments returns the current segment list; callers must not modify it.
func (l *Log) segments() []*segment {
	if p := l.segs.Load(); p != nil {
		return *p
	}
	return nil
}

// findSegment returns the segment whose offset range would hold off, or nil.
func (l *Log) findSegment(off uint64) *segment {
	segs := l.segments()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > off })
	if i == 0 {
		return nil
	}
	return segs[i-1]
}

// segmentAfter returns the first segment with a base above base, or nil.
func (l *Log) segmentAfter(base uint64) *segment {
	segs := l.segments()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > base })
	if i == len(segs) {
		return nil
	}
	return segs[i]
}

// removeSegment deletes a sealed segment and its index. Readers in the middle of
// a read finish first (fileMu); later reads of its offsets get ErrNotFound.
func (l *Log) removeSegment(s *segment) error {
	if !s.sealed.Load() {
		return fmt.Errorf("msgstore: refusing to remove active segment %s", s.segPath)
	}
	l.segMu.Lock()
	old := l.segments()
	segs := make([]*segment, 0, len(old))
	for _, x := range old {
		if x != s {
			segs = append(segs, x)
		}
	}
	l.segs.Store(&segs)
	l.segMu.Unlock()

	s.fileMu.Lock()
	f := s.f
	s.f = nil
	s.fileMu.Unlock()
	var errs []error
	if f != nil {
		errs = append(errs, f.Close())
	}
	for _, p := range []string{s.segPath, s.idxPath, s.tixPath} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("msgstore: remove segment %s: %w", s.segPath, err)
	}
	return nil
}

// ReadAt returns the record at loc. The record owns its memory. It returns
// ErrNotFound when no record with loc.Offset exists (removed, never written, or
// an offset reused for a different record after a crash).
func (l *Log) ReadAt(loc Loc) (Record, error) {
	s := l.findSegment(loc.Offset)
	if s == nil {
		return Record{}, fmt.Errorf("%w: offset %d before the first segment", ErrNotFound, loc.Offset)
	}
	s.fileMu.RLock()
	defer s.fileMu.RUnlock()
	if s.f == nil {
		return Record{}, fmt.Errorf("%w: offset %d: segment removed", ErrNotFound, loc.Offset)
	}
	return l.readLocked(s, loc)
}

// Recovery reports what Open found and repaired.
func (l *Log) Recovery() RecoveryInfo { return l.recovery }

// Stats returns a snapshot of the log's counters. It takes no lock that an
// append holds across I/O.
func (l *Log) Stats() LogStats {
	segs := l.segments()
	st := LogStats{
		Segments:          len(segs),
		NextOffset:        l.nextOff.Load(),
		FlushPolicy:       l.cfg.Flush,
		Appends:           l.appends.Load(),
		Fsyncs:            l.fsyncs.Load(),
		BytesRead:         l.bytesRead.Load(),
		IndexRebuilds:     l.indexRebuilds.Load(),
		TimeIndexRebuilds: l.timeIndexRebuilds.Load(),
	}
	for _, s := range segs {
		st.Bytes += s.size.Load()
	}
	if len(segs) > 0 {
		st.FirstOffset = segs[0].base
	}
	if st.NextOffset > 0 {
		st.LastOffset = st.NextOffset - 1
	}
	l.stateMu.Lock()
	st.SyncedOffset = l.synced
	st.PendingWaiters = len(l.waiters)
	if l.failErr != nil {
		st.Failed = l.failErr.Error()
	}
	l.stateMu.Unlock()
	return st
}

// Close stops accepting appends, makes everything durable, seals the active
// segment's index, writes the clean-shutdown checkpoint and closes the files.
// Pending WhenDurable callbacks are called before it returns.
func (l *Log) Close() error { return l.close(nil) }

// stopAppends makes later appends fail with ErrClosed and waits for one in flight.
func (l *Log) stopAppends() {
	l.writeMu.Lock()
	l.closed = true
	l.writeMu.Unlock()
}

// close finishes Close; extra is the Store's part of the checkpoint.
func (l *Log) close(extra []byte) error {
	l.stopAppends()
	l.closeOnce.Do(func() { l.closeErr = l.finishClose(extra) })
	return l.closeErr
}

func (l *Log) finishClose(extra []byte) error {
	close(l.stop)
	l.wg.Wait()
	var errs []error
	if fe := l.failed.Load(); fe != nil {
		errs = append(errs, *fe) // no checkpoint: the next Open must recover from disk
	} else if err := l.writeCheckpoint(extra); err != nil {
		errs = append(errs, err)
	}
	l.saveTimeIndexes()
	for _, s := range l.segments() {
		s.fileMu.Lock()
		if s.f != nil {
			if err := s.f.Close(); err != nil {
				errs = append(errs, err)
			}
			s.f = nil
		}
		s.fileMu.Unlock()
	}
	errs = append(errs, l.dirf.Close(), l.lockf.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("msgstore: close %s: %w", l.cfg.Dir, err)
	}
	return nil
}

// writeCheckpoint seals the active segment's index and writes checkpoint.dat.
// Called after the flusher's final round, so all data is fsynced.
func (l *Log) writeCheckpoint(extra []byte) error {
	a := l.active
	a.idxMu.Lock()
	data := encodeIndex(a.idx, a.lastPlus1.Load(), a.size.Load())
	a.idxMu.Unlock()
	if err := writeFileAtomic(a.idxPath, data, true); err != nil {
		return fmt.Errorf("write index %s: %w", a.idxPath, err)
	}
	l.fsyncs.Add(1)
	cp := checkpoint{next: l.next, extra: extra}
	for _, s := range l.segments() {
		cp.segs = append(cp.segs, cpSegment{base: s.base, size: s.size.Load(), lastPlus1: s.lastPlus1.Load()})
	}
	if err := writeFileAtomic(l.path(checkpointName), cp.encode(), true); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	l.fsyncs.Add(1)
	return l.syncDir()
}

func (l *Log) syncDir() error {
	l.fsyncs.Add(1)
	if err := l.dirf.Sync(); err != nil {
		return fmt.Errorf("msgstore: fsync directory %s: %w", l.cfg.Dir, err)
	}
	return nil
}
