package queueindex

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
)

// maxSeq bounds sequence ids so that the end of the last segment,
// (num+1)*SlotsPerSegment, still fits in a uint64. Append stops leaseAhead
// earlier, so that the lease fits too.
const maxSeq = math.MaxUint64 - SlotsPerSegment + 1

// leaseAhead is how far past the next id a lease reaches: 16 segments. A
// Flush renews the lease when less than half of that is left, so the lease is
// written once per 8 segments (32,768 ids), and a crash skips at most 16
// segments' worth of ids.
const leaseAhead = 16 * SlotsPerSegment

// Index is the on-disk index of one durable queue. It is safe for concurrent
// use; the intended pattern is one owner goroutine (the queue) that appends,
// marks, acks and reads, and the group-commit flusher that calls Flush.
type Index struct {
	cfg Config
	// files holds every file the index opens: Config.Files, or a cache of
	// its own without a bound.
	files *FileCache
	// dirh is the directory, fsynced after files are created or removed.
	// Without Config.Files it is acquired for the index's lifetime and
	// flock'ed (dirPinned), so no other process opens the directory; with
	// a shared cache it is opened when needed and may be closed meanwhile,
	// and the owner must keep other processes out (see Config.Files).
	dirh      *handle
	dirPinned bool
	// dirKey is the directory's entry in openDirs, which keeps two indexes
	// of this process out of one directory.
	dirKey string

	// flushMu serializes Flush, Sync, Purge, Close and Delete. Lock order:
	// flushMu, then mu, then ckMu. flushMu is held across file I/O; mu is not,
	// except for page loads (see pageLocked), Purge and the rare synchronous
	// lease write of Append.
	flushMu sync.Mutex

	// ckMu serializes checkpoint writes, so the lease on disk never goes back.
	ckMu  sync.Mutex
	ckbuf []byte // encoding scratch, under ckMu
	// lease: every sequence id handed out is below it, and it is in the
	// checkpoint on disk. Written under ckMu, read atomically by Append.
	lease atomic.Uint64

	mu     sync.Mutex
	closed bool
	err    error     // sticky: set when a write or sync failed (wraps ErrFailed)
	segs   []segment // every segment with a file or pending writes, by number
	cache  []*page   // cached pages, at most cfg.CacheSegments plus dirty ones
	tail   *page     // the page appends go to, if cached
	// idleMark is the LRU clock at the last ReleaseIdle: pages not used
	// since are idle.
	idleMark uint64
	clock    uint64   // LRU clock for cache
	next     uint64   // next sequence id Append hands out
	live     uint64   // ready entries
	bytes    uint64   // sum of Entry.Size over ready entries
	settled  []uint64 // segments whose live count reached 0: deleted by the next Flush

	stats counters

	// Scratch space of the flusher, used only under flushMu.
	wbuf   []byte
	wruns  []writeRun
	wpages []*page
	wdoom  []uint64
	// unsynced lists the segments written by flushes without fdatasync
	// since the last synced flush, and dirUnsynced says whether files were
	// created or removed meanwhile: Sync makes them durable, reopening
	// files the cache closed. Under flushMu.
	unsynced    []uint64
	dirUnsynced bool
}

// counters are the cumulative Stats counters, atomic so that Stats and the
// unlocked phases of Flush need not take mu for them.
type counters struct {
	segmentReads atomic.Uint64
	writes       atomic.Uint64
	syncs        atomic.Uint64
	flushes      atomic.Uint64
}

// writeRun is one pwrite of a Flush: wbuf[from:to] goes to p's file at off.
type writeRun struct {
	p        *page
	off      int64
	from, to int
}

// Stats is a point-in-time view of an Index.
type Stats struct {
	// Segments is the number of segment files (or segments about to get one).
	Segments int
	// CachedSegments is the number of segment pages held in memory.
	CachedSegments int
	// Live is the number of ready (appended, not settled) entries.
	Live uint64
	// LiveBytes is the sum of Entry.Size over the ready entries.
	LiveBytes uint64
	// NextSeq is the sequence id the next Append returns.
	NextSeq uint64
	// DiskBytes is the size of the segment files as written so far.
	DiskBytes int64
	// SegmentReads counts whole-segment reads: recovery scans, cache misses,
	// ForEach and Purge. A clean Open adds nothing.
	SegmentReads uint64
	// Writes counts pwrite calls made by Flush (one per run of adjacent dirty
	// slots).
	Writes uint64
	// Syncs counts fdatasync/fsync calls on segment files, the directory and
	// the checkpoint.
	Syncs uint64
	// Flushes counts Flush and Sync calls that had something to write.
	Flushes uint64
}

// Open opens (creating if needed) the index in cfg.Dir, recovers its state and
// reports what it found. See Recovered for what recovery does.
//
// Open always replaces the checkpoint with a dirty one and syncs it before it
// returns, so a crash from now on is never mistaken for a clean shutdown.
func Open(cfg Config) (*Index, Recovered, error) {
	if err := cfg.Validate(); err != nil {
		return nil, Recovered{}, err
	}
	if err := makeDir(cfg.Dir); err != nil {
		return nil, Recovered{}, err
	}
	ix := &Index{cfg: cfg, files: cfg.Files, dirh: &handle{path: cfg.Dir, flag: os.O_RDONLY}}
	if ix.files == nil {
		ix.files, _ = NewFileCache(0, cfg.Logger) // 0 is always a valid limit
	}
	key, err := claimDir(cfg.Dir)
	if err != nil {
		return nil, Recovered{}, err
	}
	ix.dirKey = key
	if err := ix.lockDir(); err != nil {
		return nil, Recovered{}, errors.Join(err, ix.closeFiles())
	}
	rec, err := ix.recover()
	if err != nil {
		return nil, Recovered{}, errors.Join(err, ix.closeFiles())
	}
	return ix, rec, nil
}

// lockDir holds the directory open and flock'ed for the index's lifetime when
// it has a cache of its own; with a shared cache the owner keeps other
// processes out, and holding a descriptor per index is what the cache avoids.
func (ix *Index) lockDir() error {
	if ix.cfg.Files != nil {
		return nil
	}
	f, err := ix.files.acquire(ix.dirh)
	if err != nil {
		return fmt.Errorf("queueindex: open directory: %w", err)
	}
	ix.dirPinned = true
	if err := lockFile(f); err != nil {
		return fmt.Errorf("queueindex: open %s: %w", ix.cfg.Dir, err)
	}
	return nil
}

// makeDir creates dir if it does not exist and then syncs its parent, so the
// new queue directory survives a power cut.
func makeDir(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("queueindex: stat %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("queueindex: create %s: %w", dir, err)
	}
	parent, err := os.Open(filepath.Dir(filepath.Clean(dir)))
	if err != nil {
		return fmt.Errorf("queueindex: open parent of %s: %w", dir, err)
	}
	err = parent.Sync()
	if cerr := parent.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("queueindex: sync parent of %s: %w", dir, err)
	}
	return nil
}

// closeFiles closes the directory, which releases the directory lock, and
// lets another index of this process open it. Every page must be released.
func (ix *Index) closeFiles() error {
	if ix.dirPinned {
		ix.files.release(ix.dirh)
		ix.dirPinned = false
	}
	err := ix.files.forget(ix.dirh)
	releaseDir(ix.dirKey)
	if err != nil {
		return fmt.Errorf("queueindex: close directory: %w", err)
	}
	return nil
}

// syncDir fsyncs the directory, opening it if the cache closed it.
func (ix *Index) syncDir() error {
	f, err := ix.files.acquire(ix.dirh)
	if err != nil {
		return fmt.Errorf("queueindex: open directory: %w", err)
	}
	err = f.Sync()
	ix.files.release(ix.dirh)
	if err != nil {
		return fmt.Errorf("queueindex: sync directory: %w", err)
	}
	return nil
}

func (ix *Index) segPath(num uint64) string {
	return filepath.Join(ix.cfg.Dir, segName(num))
}

// segName is the file name of segment num: %08d.qi (more digits past 10^8).
func segName(num uint64) string { return fmt.Sprintf("%08d.qi", num) }

// usableLocked returns the error every operation returns once the index is
// closed or failed.
func (ix *Index) usableLocked() error {
	if ix.closed {
		return ErrClosed
	}
	return ix.err
}

// findLocked returns the position of segment num in segs and whether it is
// there.
func (ix *Index) findLocked(num uint64) (int, bool) {
	return slices.BinarySearchFunc(ix.segs, num, func(s segment, n uint64) int {
		switch {
		case s.num < n:
			return -1
		case s.num > n:
			return 1
		}
		return 0
	})
}

// keepNum is the segment that holds the highest sequence id handed out. It is
// never deleted for being settled, so the files alone always show how far the
// sequence got.
func (ix *Index) keepNumLocked() (uint64, bool) {
	if ix.next == 0 {
		return 0, false
	}
	return (ix.next - 1) / SlotsPerSegment, true
}

func (ix *Index) deletableLocked(s *segment) bool {
	keep, ok := ix.keepNumLocked()
	return s.live == 0 && (!ok || s.num != keep)
}

// Append adds e at the tail and returns its sequence id. Ids increase by one
// per Append and are never handed out again, also after a restart. The entry
// is in memory until the next Flush.
func (ix *Index) Append(e Entry) (uint64, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if err := ix.usableLocked(); err != nil {
		return 0, err
	}
	seq := ix.next
	if seq >= maxSeq-leaseAhead-SlotsPerSegment {
		return 0, ErrSeqExhausted
	}
	if seq >= ix.lease.Load() {
		// No Flush renewed the lease in time: extend it now, before handing
		// out an id a crash could reuse.
		if err := ix.writeLease(seq, leaseFor(seq), ix.cfg.Sync); err != nil {
			return 0, err
		}
	}
	num := seq / SlotsPerSegment
	p := ix.tail
	if p == nil || p.num != num {
		var err error
		if p, err = ix.startTailLocked(num); err != nil {
			return 0, err
		}
	} else {
		ix.clock++
		p.used = ix.clock // ReleaseIdle keeps a page appends use
	}
	slot := int(seq % SlotsPerSegment)
	encodeSlot(p.buf[slot*SlotSize:], e)
	p.markDirty(slot)
	s := &ix.segs[len(ix.segs)-1]
	s.live++
	s.bytes += uint64(e.Size)
	ix.live++
	ix.bytes += uint64(e.Size)
	ix.next++
	return seq, nil
}

// startTailLocked makes segment num the last segment and caches its page. The
// previous last segment becomes deletable if it is settled.
func (ix *Index) startTailLocked(num uint64) (*page, error) {
	p, err := ix.pageLocked(num)
	if err != nil {
		return nil, err
	}
	if n := len(ix.segs); n == 0 || ix.segs[n-1].num != num {
		if n > 0 && ix.segs[n-1].live == 0 {
			ix.settled = append(ix.settled, ix.segs[n-1].num)
		}
		ix.segs = append(ix.segs, segment{num: num})
	}
	ix.tail = p
	return p, nil
}

// liveSlotLocked finds the ready slot of seq: its segment's position in segs,
// its page, its slot number and the decoded entry.
func (ix *Index) liveSlotLocked(seq uint64) (int, *page, int, Entry, error) {
	if err := ix.usableLocked(); err != nil {
		return 0, nil, 0, Entry{}, err
	}
	if seq >= ix.next {
		return 0, nil, 0, Entry{}, fmt.Errorf("queueindex: seq %d not appended yet: %w", seq, ErrNotFound)
	}
	num := seq / SlotsPerSegment
	si, ok := ix.findLocked(num)
	if !ok || ix.segs[si].live == 0 {
		return 0, nil, 0, Entry{}, fmt.Errorf("queueindex: seq %d: segment %d settled: %w", seq, num, ErrNotFound)
	}
	p, err := ix.pageLocked(num)
	if err != nil {
		return 0, nil, 0, Entry{}, err
	}
	slot := int(seq % SlotsPerSegment)
	st, e, err := decodeSlot(p.buf[slot*SlotSize : (slot+1)*SlotSize])
	if err != nil || st != statusReady {
		return 0, nil, 0, Entry{}, fmt.Errorf("queueindex: seq %d: %w", seq, ErrNotFound)
	}
	return si, p, slot, e, nil
}

// MarkDelivered sets the delivered flag of seq's entry, so that after a
// restart it comes back with redelivered=true. Like every change it is written
// by the next Flush; a crash before that loses the flag.
func (ix *Index) MarkDelivered(seq uint64) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	_, p, slot, e, err := ix.liveSlotLocked(seq)
	if err != nil {
		return err
	}
	if e.Delivered {
		return nil
	}
	e.Delivered = true
	encodeSlot(p.buf[slot*SlotSize:], e)
	p.markDirty(slot)
	return nil
}

// Ack settles seq's entry (ack, reject or expiry: the index does not care
// which). The slot becomes a tombstone at the next Flush, and a segment whose
// entries are all settled is deleted by the Flush after that happened. Acking
// a sequence id that is not live returns ErrNotFound.
func (ix *Index) Ack(seq uint64) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	si, p, slot, e, err := ix.liveSlotLocked(seq)
	if err != nil {
		return err
	}
	encodeTombstone(p.buf[slot*SlotSize:])
	p.markDirty(slot)
	s := &ix.segs[si]
	s.live--
	s.bytes -= min(s.bytes, uint64(e.Size))
	ix.live--
	ix.bytes -= min(ix.bytes, uint64(e.Size))
	if ix.deletableLocked(s) {
		ix.settled = append(ix.settled, s.num)
	}
	return nil
}

// Stats returns counters and sizes.
func (ix *Index) Stats() Stats {
	ix.mu.Lock()
	st := Stats{
		Segments:       len(ix.segs),
		CachedSegments: len(ix.cache),
		Live:           ix.live,
		LiveBytes:      ix.bytes,
		NextSeq:        ix.next,
	}
	for _, s := range ix.segs {
		st.DiskBytes += int64(s.size)
	}
	ix.mu.Unlock()
	st.SegmentReads = ix.stats.segmentReads.Load()
	st.Writes = ix.stats.writes.Load()
	st.Syncs = ix.stats.syncs.Load()
	st.Flushes = ix.stats.flushes.Load()
	return st
}

// Close flushes and syncs everything, writes a clean checkpoint (so the next
// Open reads no slots) and releases the directory. After a failed write
// (ErrFailed) it writes no checkpoint and only releases resources, so the next
// Open recovers from the files.
func (ix *Index) Close() error {
	ix.flushMu.Lock()
	defer ix.flushMu.Unlock()
	ix.mu.Lock()
	if ix.closed {
		ix.mu.Unlock()
		return ErrClosed
	}
	// Closed first: from here on every other call fails, so the final flush
	// and the checkpoint see a state nobody changes.
	ix.closed = true
	failed := ix.err != nil
	ix.mu.Unlock()

	var errs []error
	if !failed {
		if err := ix.flushHeld(true); err != nil {
			errs = append(errs, err)
		} else if err := ix.writeCleanCheckpoint(); err != nil {
			errs = append(errs, err)
		}
	}
	ix.mu.Lock()
	errs = append(errs, ix.releasePagesLocked())
	ix.mu.Unlock()
	errs = append(errs, ix.closeFiles())
	return errors.Join(errs...)
}

// writeCleanCheckpoint writes and syncs the checkpoint Close leaves behind.
// Called with flushMu held, after a full flush.
func (ix *Index) writeCleanCheckpoint() error {
	ix.mu.Lock()
	ck := checkpoint{clean: true, next: ix.next, segs: slices.Clone(ix.segs)}
	ix.mu.Unlock()
	ix.ckMu.Lock()
	defer ix.ckMu.Unlock()
	ck.lease = max(ix.lease.Load(), ck.next)
	err := ix.writeCheckpoint(&ck, true)
	ix.stats.syncs.Add(2)
	return err
}

// leaseFor returns the lease to write when next is the next id: leaseAhead
// past the end of next's segment, so that a Flush every few thousand appends
// keeps the lease ahead and Append never has to write it.
func leaseFor(next uint64) uint64 {
	return (next/SlotsPerSegment+1)*SlotsPerSegment + leaseAhead
}

// writeLease moves the lease to lease (if that is further) by writing a dirty
// checkpoint. next is recorded with it as a floor.
func (ix *Index) writeLease(next, lease uint64, sync bool) error {
	ix.ckMu.Lock()
	defer ix.ckMu.Unlock()
	if lease <= ix.lease.Load() {
		return nil
	}
	ck := checkpoint{next: min(next, lease), lease: lease}
	if err := ix.writeCheckpoint(&ck, sync); err != nil {
		return err
	}
	if sync {
		ix.stats.syncs.Add(2)
	}
	ix.lease.Store(lease)
	return nil
}

// releasePagesLocked drops every cached page, dirty or not.
func (ix *Index) releasePagesLocked() error {
	var errs []error
	for _, p := range ix.cache {
		if err := p.release(ix.files, true); err != nil {
			errs = append(errs, fmt.Errorf("queueindex: close segment %d: %w", p.num, err))
		}
	}
	clear(ix.cache)
	ix.cache = ix.cache[:0]
	ix.tail = nil
	return errors.Join(errs...)
}

// Abandon closes the index without writing anything, as a crash would:
// changes since the last Flush are dropped and the next Open recovers from
// the files. An owner that finds it cannot use an index it just opened
// abandons it, so none of its half-done changes reach the disk.
func (ix *Index) Abandon() error {
	ix.flushMu.Lock()
	defer ix.flushMu.Unlock()
	ix.mu.Lock()
	if ix.closed {
		ix.mu.Unlock()
		return ErrClosed
	}
	ix.closed = true
	err := ix.releasePagesLocked()
	ix.mu.Unlock()
	return errors.Join(err, ix.closeFiles())
}

// Delete closes the index without flushing and removes its directory with
// everything in it.
func (ix *Index) Delete() error {
	ix.flushMu.Lock()
	defer ix.flushMu.Unlock()
	ix.mu.Lock()
	if ix.closed {
		ix.mu.Unlock()
		return ErrClosed
	}
	ix.closed = true
	err := ix.releasePagesLocked()
	ix.mu.Unlock()
	// Removed before the directory is let go, so a new index for the same
	// directory never sees it half removed.
	if rerr := os.RemoveAll(ix.cfg.Dir); rerr != nil {
		err = errors.Join(err, fmt.Errorf("queueindex: remove %s: %w", ix.cfg.Dir, rerr))
	}
	return errors.Join(err, ix.closeFiles())
}
