package queueindex

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
)

// maxKeptWriteBuf bounds the flush buffer kept between flushes; a flush of
// more dirty slots than this allocates and then drops its buffer.
const maxKeptWriteBuf = 4 * SegmentSize

// Flush writes every change made since the last Flush: appended slots, the
// delivered flag, tombstones. Adjacent dirty slots of a segment go out in one
// pwrite. With Config.Sync it then fdatasyncs each file it wrote, so a nil
// return means the changes are on stable storage. Segments that became fully
// settled are deleted after the writes.
//
// Order: the caller must make the message store's data durable before it
// flushes index entries pointing at it. Appends and acks of one Flush are
// written together, with no order between them. After a crash an ack that was
// not flushed is lost, so its message comes back (with redelivered set if
// MarkDelivered was flushed); a flushed append never disappears unless acked
// and flushed.
//
// A failed write or sync makes the index fail every later call with ErrFailed
// (after a failed fdatasync the kernel may have dropped the dirty pages, so
// retrying could report success for data that is not on disk).
func (ix *Index) Flush() error {
	ix.flushMu.Lock()
	defer ix.flushMu.Unlock()
	if err := ix.checkUsable(); err != nil {
		return err
	}
	return ix.flushHeld(ix.cfg.Sync)
}

// checkUsable is usableLocked taking mu.
func (ix *Index) checkUsable() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.usableLocked()
}

// Sync is Flush with fdatasync whatever Config.Sync says. A broker with an
// interval or message-count flush policy calls Flush per batch and Sync on its
// timer.
func (ix *Index) Sync() error {
	ix.flushMu.Lock()
	defer ix.flushMu.Unlock()
	if err := ix.checkUsable(); err != nil {
		return err
	}
	return ix.flushHeld(true)
}

// flushPlan is what the locked phase of a flush hands to the unlocked one.
type flushPlan struct {
	lease uint64 // new lease to write first, 0 for none
	next  uint64
}

// flushHeld runs a flush; flushMu must be held and the caller has checked that
// the index is not closed (Close calls it after marking the index closed). The
// slots to write are copied under mu, written and synced without it, so
// appends and acks go on while the disk works.
func (ix *Index) flushHeld(sync bool) error {
	ix.mu.Lock()
	plan, err := ix.planFlushLocked()
	ix.mu.Unlock()
	if err != nil {
		return err
	}
	owed := sync && (len(ix.unsynced) > 0 || ix.dirUnsynced)
	if plan.lease == 0 && len(ix.wruns) == 0 && len(ix.wdoom) == 0 && !owed {
		return nil
	}
	ix.stats.flushes.Add(1)
	err = ix.writePlan(plan, sync)

	ix.mu.Lock()
	for _, p := range ix.wpages {
		p.inflight = false
	}
	if err != nil {
		ix.err = fmt.Errorf("%w: %w", ErrFailed, err)
		err = ix.err
		// The planned slots may not be on disk: mark them dirty again, so
		// their pages stay cached and Unflushed can hand them to the owner.
		for _, r := range ix.wruns {
			first := int(r.off / SlotSize)
			for slot := first; slot < first+(r.to-r.from)/SlotSize; slot++ {
				r.p.markDirty(slot)
			}
		}
	}
	ix.evictLocked()
	ix.mu.Unlock()

	clear(ix.wpages)
	ix.wpages = ix.wpages[:0]
	clear(ix.wruns)
	ix.wruns = ix.wruns[:0]
	ix.wdoom = ix.wdoom[:0]
	ix.wbuf = ix.wbuf[:0]
	if cap(ix.wbuf) > maxKeptWriteBuf {
		ix.wbuf = nil
	}
	return err
}

// planFlushLocked removes settled segments from memory (their files go in
// wdoom), copies the dirty runs into wbuf and marks their pages in flight.
func (ix *Index) planFlushLocked() (flushPlan, error) {
	var plan flushPlan
	if ix.err != nil {
		return plan, ix.err
	}
	for _, num := range ix.settled {
		if si, ok := ix.findLocked(num); ok && ix.deletableLocked(&ix.segs[si]) {
			ix.segs = append(ix.segs[:si], ix.segs[si+1:]...)
			for i, p := range ix.cache {
				if p.num == num {
					ix.dropPageLocked(i, true)
					break
				}
			}
			ix.wdoom = append(ix.wdoom, num)
		}
	}
	ix.settled = ix.settled[:0]

	if ix.lease.Load()-ix.next < leaseAhead/2 {
		// Keep the lease well ahead, so Append does not have to write it.
		// This costs one checkpoint write per leaseAhead/2 ids.
		plan.lease = leaseFor(ix.next)
		plan.next = ix.next
	}
	for _, p := range ix.cache {
		if p.ndirty == 0 {
			continue
		}
		si, ok := ix.findLocked(p.num)
		if !ok {
			// Cannot happen: pages of removed segments are dropped with them.
			p.clearDirty()
			continue
		}
		s := &ix.segs[si]
		p.runs(func(from, to int) {
			start := len(ix.wbuf)
			ix.wbuf = append(ix.wbuf, p.buf[from*SlotSize:to*SlotSize]...)
			ix.wruns = append(ix.wruns, writeRun{p: p, off: int64(from * SlotSize), from: start, to: len(ix.wbuf)})
			s.size = max(s.size, uint32(to*SlotSize))
		})
		p.clearDirty()
		p.inflight = true
		ix.wpages = append(ix.wpages, p)
	}
	return plan, nil
}

// writePlan does the I/O of a flush without holding mu: lease (if due), the
// slots of each page (creating new segment files), fdatasync, then removal of
// settled segments.
//
// It uses the handles of pages in flight without mu. That is safe because only
// holders of flushMu use a page's handle while it is in flight, and eviction
// from the index's cache skips such pages; the FileCache may close the file
// once it is released, never while it is in use.
func (ix *Index) writePlan(plan flushPlan, sync bool) error {
	if plan.lease != 0 {
		if err := ix.writeLease(plan.next, plan.lease, sync); err != nil {
			return err
		}
	}
	created := false
	for i := 0; i < len(ix.wruns); {
		p := ix.wruns[i].p
		j := i + 1
		for j < len(ix.wruns) && ix.wruns[j].p == p {
			j++ // a page's runs are adjacent in wruns
		}
		c, err := ix.writePage(p, ix.wruns[i:j], sync)
		created = created || c
		if err != nil {
			return err
		}
		i = j
	}
	for _, num := range ix.wdoom {
		if err := os.Remove(ix.segPath(num)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			// The file still holds the entries the acks settled; keeping the
			// index usable would let it report success for acks a restart
			// undoes.
			return fmt.Errorf("queueindex: remove settled segment %d: %w", num, err)
		}
	}
	return ix.finishSync(sync, created || len(ix.wdoom) > 0)
}

// writePage writes runs, all of page p, to p's file, opening it through the
// cache (creating it for a new segment, which is slow on some filesystems and
// so happens here, outside mu). With sync it fdatasyncs the file before
// handing it back, so the cache never closes a file with writes a Flush
// promised to be durable; without sync it notes the segment for Sync.
func (ix *Index) writePage(p *page, runs []writeRun, sync bool) (created bool, err error) {
	created = p.h.flag&os.O_CREATE != 0
	f, err := ix.files.acquire(p.h)
	if err != nil {
		return false, fmt.Errorf("queueindex: open segment %d: %w", p.num, err)
	}
	defer ix.files.release(p.h)
	p.h.flag = os.O_RDWR // the file exists from now on
	for _, r := range runs {
		if _, err := f.WriteAt(ix.wbuf[r.from:r.to], r.off); err != nil {
			return created, fmt.Errorf("queueindex: write segment %d: %w", p.num, err)
		}
		ix.stats.writes.Add(1)
	}
	if !sync {
		if !slices.Contains(ix.unsynced, p.num) {
			ix.unsynced = append(ix.unsynced, p.num)
		}
		return created, nil
	}
	if err := fdatasync(f); err != nil {
		return created, fmt.Errorf("queueindex: sync segment %d: %w", p.num, err)
	}
	ix.stats.syncs.Add(1)
	return created, nil
}

// finishSync completes a synced flush: it fdatasyncs the segments earlier
// flushes wrote without syncing (reopening them if the cache closed them) and
// the directory if files were created or removed since its last sync. Without
// sync it only remembers that the directory changed.
func (ix *Index) finishSync(sync, dirChanged bool) error {
	if !sync {
		ix.dirUnsynced = ix.dirUnsynced || dirChanged
		return nil
	}
	for _, num := range ix.unsynced {
		if slices.ContainsFunc(ix.wpages, func(p *page) bool { return p.num == num }) {
			continue // written and synced by this flush
		}
		err := ix.files.withFile(ix.segPath(num), os.O_RDWR, fdatasync)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Settled and removed since: nothing left to make durable.
		case err != nil:
			return fmt.Errorf("queueindex: sync segment %d: %w", num, err)
		default:
			ix.stats.syncs.Add(1)
		}
	}
	ix.unsynced = ix.unsynced[:0]
	if dirChanged || ix.dirUnsynced {
		if err := ix.syncDir(); err != nil {
			return err
		}
		ix.stats.syncs.Add(1)
	}
	ix.dirUnsynced = false
	return nil
}

// Purge settles every live entry at once by removing all segment files. If fn
// is not nil it is first called for each live entry in sequence order (the
// owner drops its message-store references there); fn runs with the index
// locked and must not call it. Purge returns the number of entries it settled.
// Sequence ids go on from where they were. With Config.Sync the removal is
// durable when Purge returns.
func (ix *Index) Purge(fn func(seq uint64, e Entry)) (uint64, error) {
	ix.flushMu.Lock()
	defer ix.flushMu.Unlock()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if err := ix.usableLocked(); err != nil {
		return 0, err
	}
	if fn != nil {
		if err := ix.visitAllLocked(fn); err != nil {
			return 0, err
		}
	}
	// No lease write is needed: every id handed out is below the lease
	// already, so the files going away lose nothing about where ids got.
	n := ix.live
	if err := ix.releasePagesLocked(); err != nil {
		ix.cfg.Logger.Warn("queueindex: purge: close segment files", "dir", ix.cfg.Dir, "err", err)
	}
	for _, s := range ix.segs {
		if err := os.Remove(ix.segPath(s.num)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			ix.err = fmt.Errorf("%w: purge: remove segment %d: %w", ErrFailed, s.num, err)
			return 0, ix.err
		}
	}
	ix.segs = ix.segs[:0]
	ix.settled = ix.settled[:0]
	ix.live, ix.bytes = 0, 0
	ix.unsynced = ix.unsynced[:0] // their files are gone
	if !ix.cfg.Sync {
		ix.dirUnsynced = true
		return n, nil
	}
	if err := ix.syncDir(); err != nil {
		ix.err = fmt.Errorf("%w: purge: %w", ErrFailed, err)
		return 0, ix.err
	}
	ix.stats.syncs.Add(1)
	ix.dirUnsynced = false
	return n, nil
}
