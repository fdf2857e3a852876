package queueindex

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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
	if plan.lease == 0 && len(ix.wruns) == 0 && len(ix.wdoom) == 0 {
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

// writePlan does the I/O of a flush without holding mu: lease (if due), new
// segment files, the slots, fdatasync, then removal of settled segments.
//
// It sets p.f of new pages without mu. That is safe because only holders of
// flushMu use p.f of a page in flight, and eviction skips such pages; the
// update is published to other lock holders when mu clears p.inflight.
func (ix *Index) writePlan(plan flushPlan, sync bool) error {
	if plan.lease != 0 {
		if err := ix.writeLease(plan.next, plan.lease, sync); err != nil {
			return err
		}
	}
	created := false
	for _, p := range ix.wpages {
		if p.f != nil {
			continue
		}
		// Creating a file is slow on some filesystems (hundreds of µs); it
		// happens here, outside mu, once per segment.
		f, err := os.OpenFile(ix.segPath(p.num), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("queueindex: create segment %d: %w", p.num, err)
		}
		p.f = f
		created = true
	}
	for _, r := range ix.wruns {
		if _, err := r.p.f.WriteAt(ix.wbuf[r.from:r.to], r.off); err != nil {
			return fmt.Errorf("queueindex: write segment %d: %w", r.p.num, err)
		}
		ix.stats.writes.Add(1)
	}
	if sync {
		for _, p := range ix.wpages {
			if err := fdatasync(p.f); err != nil {
				return fmt.Errorf("queueindex: sync segment %d: %w", p.num, err)
			}
			ix.stats.syncs.Add(1)
		}
	}
	for _, num := range ix.wdoom {
		if err := os.Remove(ix.segPath(num)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			// The file still holds the entries the acks settled; keeping the
			// index usable would let it report success for acks a restart
			// undoes.
			return fmt.Errorf("queueindex: remove settled segment %d: %w", num, err)
		}
	}
	if sync && (created || len(ix.wdoom) > 0) {
		if err := ix.dirf.Sync(); err != nil {
			return fmt.Errorf("queueindex: sync directory: %w", err)
		}
		ix.stats.syncs.Add(1)
	}
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
	if ix.cfg.Sync {
		if err := ix.dirf.Sync(); err != nil {
			ix.err = fmt.Errorf("%w: purge: sync directory: %w", ErrFailed, err)
			return 0, ix.err
		}
		ix.stats.syncs.Add(1)
	}
	return n, nil
}
