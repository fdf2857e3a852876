package msgstore

import (
	"fmt"
	"iter"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Store is the shared, reference-counted message store of one vhost, built on
// a Log. A message routed to several durable queues is written once with Put
// and released by each queue; a segment whose records are all released is
// deleted, and a mostly dead one is compacted in the background. See doc.go for
// the crash-recovery contract with the owner (RebuildRefs).
//
// Lock order: Log.writeMu → Store.mu (the append hook) → Log.segMu → Log.stateMu.
// Store.mu only guards memory; no I/O is done under it.
type Store struct {
	cfg Config
	log *Log

	needRebuild atomic.Bool

	mu             sync.Mutex
	segs           []*segLive // sorted by base, same segments as the log
	rebuilding     bool
	closed         bool
	live           int64
	liveBytes      int64
	compactions    uint64
	compactedBytes int64
	deleted        uint64
	lastErr        string

	kick      chan struct{}
	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Stats is a snapshot of a Store for the management API.
type Stats struct {
	LogStats
	// LiveMessages is the number of records with at least one reference.
	LiveMessages int64
	// LiveBytes is the encoded size of the live records.
	LiveBytes int64
	// DeadBytes is segment space not used by live records (reclaimable).
	DeadBytes int64
	// MemoryBytes estimates the memory held by the liveness tables.
	MemoryBytes int64
	// Compactions counts segments rewritten since Open.
	Compactions uint64
	// CompactedBytes is the disk space compaction gave back since Open.
	CompactedBytes int64
	// SegmentsDeleted counts segments deleted because nothing in them was live.
	SegmentsDeleted uint64
	// NeedsRefRebuild is true until the owner has called RebuildRefs after a crash.
	NeedsRefRebuild bool
	// LastMaintenanceError is the last compaction or deletion error, or "".
	LastMaintenanceError string
}

// RebuildInfo reports what RebuildRefs found.
type RebuildInfo struct {
	// Refs is the number of Locs fed.
	Refs int64
	// Records is the number of distinct live records they name.
	Records int64
	// Missing counts Locs whose record is not in the log (lost in the crash,
	// or in a segment already deleted); reads of them return ErrNotFound.
	Missing int64
	// Duration is how long the rebuild took.
	Duration time.Duration
}

// Open opens (or creates) the store in cfg.Dir. After a crash the returned
// store reports NeedsRefRebuild and refuses Put and Release until the owner
// has called RebuildRefs.
func Open(cfg Config) (*Store, error) {
	l, extra, err := openLog(cfg)
	if err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, log: l, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	segs := l.segments()
	if extra != nil {
		tables, err := decodeLiveness(extra, segs)
		if err != nil {
			cfg.Logger.Warn("msgstore: checkpoint liveness tables unusable; owner must rebuild references",
				"dir", cfg.Dir, "error", err)
		} else {
			s.segs = tables
		}
	}
	if s.segs == nil {
		hasRecords := false
		for _, seg := range segs {
			s.segs = append(s.segs, &segLive{seg: seg, base: seg.base})
			hasRecords = hasRecords || seg.lastPlus1.Load() > 0
		}
		s.needRebuild.Store(hasRecords)
	}
	for _, sl := range s.segs {
		s.live += sl.live
		s.liveBytes += sl.liveBytes
	}
	l.obs = s
	l.onSealed = s.kickMaintenance
	l.start()
	s.wg.Add(1)
	go s.maintain()
	s.kickMaintenance()
	return s, nil
}

// Put appends r once for a message routed to refs durable queues and returns
// its location; each queue calls Release when it is done with it.
func (s *Store) Put(r Record, refs int) (Loc, error) {
	if refs < 1 || refs >= math.MaxUint32 {
		return Loc{}, fmt.Errorf("%w: %d", ErrInvalidRefs, refs)
	}
	if s.needRebuild.Load() {
		return Loc{}, ErrRebuildPending
	}
	return s.log.append(&r, refs)
}

// PutBatch stores rs with one write per run of records that fit in the active
// segment (see Log.AppendBatch): record i with refs[i] references, its
// location in locs[i]. It returns how many records were stored: all, or with
// an error those before the one that failed. A broker stores the persistent
// messages of one socket read this way, one system call instead of one each.
func (s *Store) PutBatch(rs []Record, refs []int, locs []Loc) (int, error) {
	if len(refs) != len(rs) || len(locs) < len(rs) {
		return 0, fmt.Errorf("%w: %d records, %d reference counts, %d locations", ErrInvalidRefs, len(rs), len(refs), len(locs))
	}
	for i, n := range refs {
		if n < 1 || n >= math.MaxUint32 {
			rs = rs[:i] // store those before the bad count, as a failure would
			k, err := s.PutBatch(rs, refs[:i], locs)
			if err != nil {
				return k, err
			}
			return k, fmt.Errorf("%w: %d", ErrInvalidRefs, n)
		}
	}
	if s.needRebuild.Load() {
		return 0, ErrRebuildPending
	}
	return s.log.appendBatch(rs, refs, locs)
}

// WhenDurable calls fn once every record up to offset is durable; see Log.WhenDurable.
func (s *Store) WhenDurable(offset uint64, fn func(error)) { s.log.WhenDurable(offset, fn) }

// Sync blocks until everything put so far is fsynced.
func (s *Store) Sync() error { return s.log.Sync() }

// Release drops one reference to the record at loc (a queue acked or dropped
// it). loc must be the Loc that Put returned (its Size feeds the byte counters).
// Releasing a record with no reference left returns ErrNotFound.
func (s *Store) Release(loc Loc) error {
	if s.needRebuild.Load() {
		return ErrRebuildPending
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	sl, rel, ok := s.findLocked(loc.Offset)
	if !ok {
		return fmt.Errorf("%w: offset %d", ErrNotFound, loc.Offset)
	}
	freed, ok := sl.release(rel, int64(loc.Size))
	if !ok {
		return fmt.Errorf("%w: offset %d has no reference left", ErrNotFound, loc.Offset)
	}
	if !freed {
		return nil
	}
	s.live--
	s.liveBytes -= int64(loc.Size)
	sl.cleanSinceCompact = false
	if sl.compacting {
		sl.releasedDuring += int64(loc.Size)
	}
	if s.candidateLocked(sl, time.Time{}) != jobNone {
		s.kickMaintenance()
	}
	return nil
}

// Get returns the record at loc if it is still referenced. The record owns its memory.
func (s *Store) Get(loc Loc) (Record, error) {
	if !s.needRebuild.Load() {
		s.mu.Lock()
		sl, rel, ok := s.findLocked(loc.Offset)
		live := ok && sl.isLive(rel)
		s.mu.Unlock()
		if !live {
			return Record{}, fmt.Errorf("%w: offset %d is not live", ErrNotFound, loc.Offset)
		}
	}
	return s.log.ReadAt(loc)
}

// NeedsRefRebuild reports whether the store was opened without valid reference
// counts (after a crash) and waits for RebuildRefs.
func (s *Store) NeedsRefRebuild() bool { return s.needRebuild.Load() }

// RebuildRefs sets the reference counts after a crash. refs must yield, once
// per reference, every Loc that a queue index still holds (a message in three
// queues is yielded three times). Afterwards records nobody named are dead and
// their space is reclaimed. Offsets named by a Loc but lost in the crash are
// never reused. It may be called once, only when NeedsRefRebuild is true.
func (s *Store) RebuildRefs(refs iter.Seq[Loc]) (RebuildInfo, error) {
	start := time.Now()
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return RebuildInfo{}, ErrClosed
	case !s.needRebuild.Load() || s.rebuilding:
		s.mu.Unlock()
		return RebuildInfo{}, ErrRebuildNotNeeded
	}
	s.rebuilding = true
	s.mu.Unlock()

	var info RebuildInfo
	var lostNext uint64 // one past the highest lost offset a queue still names
	var err error
	for loc := range refs {
		info.Refs++
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			err = ErrClosed
			break
		}
		sl, rel, ok := s.findLocked(loc.Offset)
		if !ok || loc.Offset >= sl.seg.lastPlus1.Load() {
			info.Missing++
			lostNext = max(lostNext, loc.Offset+1)
			s.mu.Unlock()
			continue
		}
		first, aerr := sl.addRefs(rel, 1, int64(loc.Size))
		if first {
			info.Records++
			s.live++
			s.liveBytes += int64(loc.Size)
		}
		s.mu.Unlock()
		if aerr != nil {
			err = aerr
			break
		}
	}
	// Skip the lost offsets before Put is allowed again, so none of them can be
	// handed to a new record.
	if err == nil && lostNext > 0 {
		if aerr := s.log.advanceTo(lostNext); aerr != nil {
			err = fmt.Errorf("skip lost offsets: %w", aerr)
		}
	}
	s.mu.Lock()
	s.rebuilding = false
	if err == nil {
		s.needRebuild.Store(false)
	} else {
		s.resetTablesLocked() // a later call starts from scratch
	}
	s.mu.Unlock()
	if err != nil {
		return info, fmt.Errorf("msgstore: rebuild references: %w", err)
	}
	s.kickMaintenance()
	info.Duration = time.Since(start)
	return info, nil
}

func (s *Store) resetTablesLocked() {
	for i, sl := range s.segs {
		s.segs[i] = &segLive{seg: sl.seg, base: sl.base}
	}
	s.live, s.liveBytes = 0, 0
}

// Recovery reports what Open found and repaired in the log.
func (s *Store) Recovery() RecoveryInfo { return s.log.Recovery() }

// Stats returns a snapshot of the store's counters.
func (s *Store) Stats() Stats {
	st := Stats{LogStats: s.log.Stats(), NeedsRefRebuild: s.needRebuild.Load()}
	s.mu.Lock()
	defer s.mu.Unlock()
	st.LiveMessages, st.LiveBytes = s.live, s.liveBytes
	for _, sl := range s.segs {
		st.DeadBytes += sl.deadBytes()
		st.MemoryBytes += sl.memory()
	}
	st.MemoryBytes += int64(cap(s.segs)) * 8
	st.Compactions, st.CompactedBytes, st.SegmentsDeleted = s.compactions, s.compactedBytes, s.deleted
	st.LastMaintenanceError = s.lastErr
	return st
}

// Close stops maintenance, makes everything durable and writes the checkpoint
// (with the liveness tables, unless a reference rebuild is still pending).
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.log.stopAppends()
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stop)
		s.wg.Wait()
		var extra []byte
		s.mu.Lock()
		if !s.needRebuild.Load() {
			extra = encodeLiveness(s.segs)
		}
		s.mu.Unlock()
		s.closeErr = s.log.close(extra)
	})
	return s.closeErr
}

// appended is the Log's hook, called under Log.writeMu after a record is written.
func (s *Store) appended(loc Loc, refs int) {
	s.mu.Lock()
	sl := s.segs[len(s.segs)-1]
	// addRefs cannot fail for a new record: refs < MaxUint32 was checked by Put.
	if first, _ := sl.addRefs(uint32(loc.Offset-sl.base), uint32(refs), int64(loc.Size)); first {
		s.live++
		s.liveBytes += int64(loc.Size)
	}
	s.mu.Unlock()
}

// rolled is the Log's hook, called under Log.writeMu when a new segment starts.
func (s *Store) rolled(old, cur *segment) {
	s.mu.Lock()
	s.segs = append(s.segs, &segLive{seg: cur, base: cur.base})
	s.mu.Unlock()
	s.kickMaintenance()
}

// findLocked returns the table of the segment holding off and off's relative offset.
func (s *Store) findLocked(off uint64) (*segLive, uint32, bool) {
	i := sort.Search(len(s.segs), func(i int) bool { return s.segs[i].base > off })
	if i == 0 {
		return nil, 0, false
	}
	sl := s.segs[i-1]
	if off-sl.base > math.MaxUint32 {
		return nil, 0, false
	}
	return sl, uint32(off - sl.base), true
}

func (s *Store) kickMaintenance() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}
