package queueindex

import (
	"cmp"
	"errors"
	"io/fs"
	"slices"
)

// readBatch is how many entries ReadRange decodes per hold of the lock. The
// batch lives on the caller's stack, so reading allocates nothing.
const readBatch = 64

type seqEntry struct {
	seq uint64
	e   Entry
}

// ReadRange calls fn for up to max live entries with sequence ids at or after
// from, in order. It returns the id to pass as from to continue: one past the
// last entry fn accepted, or, when fn returns false, the id of the entry it
// refused (so a caller with a byte budget can stop before an entry that does
// not fit and get it again next time). When the index has no more entries it
// returns at least NextSeq.
//
// Pages are read through the bounded cache. fn is called without the index
// lock held, so it may call the Index (Ack, MarkDelivered); entries are
// decoded a small batch at a time, so an entry settled after its batch was
// decoded may still be passed to fn.
func (ix *Index) ReadRange(from uint64, max int, fn func(seq uint64, e Entry) bool) (uint64, error) {
	var batch [readBatch]seqEntry
	next := from
	for max > 0 {
		ix.mu.Lock()
		n, nx, done, err := ix.fillLocked(next, batch[:min(max, readBatch)])
		ix.mu.Unlock()
		if err != nil {
			return next, err
		}
		for i := range batch[:n] {
			if !fn(batch[i].seq, batch[i].e) {
				return batch[i].seq, nil
			}
		}
		max -= n
		next = nx
		if done {
			break
		}
	}
	return next, nil
}

// fillLocked decodes live entries from seq on into out. It returns how many it
// found, where to continue, and whether it reached the end of the index.
func (ix *Index) fillLocked(seq uint64, out []seqEntry) (int, uint64, bool, error) {
	if err := ix.usableLocked(); err != nil {
		return 0, seq, false, err
	}
	n := 0
	si, _ := ix.findLocked(seq / SlotsPerSegment)
	for ; si < len(ix.segs); si++ {
		s := ix.segs[si]
		base := s.num * SlotsPerSegment
		seq = max(seq, base)
		if s.live == 0 {
			seq = base + SlotsPerSegment
			continue
		}
		p, err := ix.pageLocked(s.num)
		if err != nil {
			return n, seq, false, err
		}
		for end := min(base+SlotsPerSegment, ix.next); seq < end; seq++ {
			b := p.buf[(seq-base)*SlotSize:]
			if b[offStatus] != statusReady {
				continue
			}
			st, e, err := decodeSlot(b[:SlotSize])
			if err != nil || st != statusReady {
				continue // corrupt: reported by Open and not counted as live
			}
			out[n] = seqEntry{seq: seq, e: e}
			n++
			if n == len(out) {
				return n, seq + 1, false, nil
			}
		}
	}
	return n, max(seq, ix.next), true, nil
}

// visitLive calls fn for each ready slot in the segment image buf of segment
// num, with ids below limit, until fn returns false; it reports whether fn
// always returned true.
func visitLive(buf []byte, num, limit uint64, fn func(seq uint64, e Entry) bool) bool {
	base := num * SlotsPerSegment
	for off := 0; off+SlotSize <= len(buf); off += SlotSize {
		seq := base + uint64(off/SlotSize)
		if seq >= limit {
			return true
		}
		if buf[off+offStatus] != statusReady {
			continue
		}
		st, e, err := decodeSlot(buf[off : off+SlotSize])
		if err != nil || st != statusReady {
			continue
		}
		if !fn(seq, e) {
			return false
		}
	}
	return true
}

// ForEach calls fn for every live entry in sequence order until fn returns
// false. It is the iterator an owner uses after Open to rebuild its
// message-store reference counts and its in-memory head. Each segment is read
// once into a private buffer, bypassing the cache so a full pass does not
// evict the pages in use. fn is called without the index lock held.
//
// ForEach is not a snapshot: it reads each segment as it is when it gets
// there, so it is meant to run before the owner starts appending and acking.
func (ix *Index) ForEach(fn func(seq uint64, e Entry) bool) error {
	buf := pagePool.Get().(*[SegmentSize]byte)
	defer pagePool.Put(buf)
	var num uint64
	for {
		ix.mu.Lock()
		if err := ix.usableLocked(); err != nil {
			ix.mu.Unlock()
			return err
		}
		si, _ := ix.findLocked(num)
		for si < len(ix.segs) && ix.segs[si].live == 0 {
			si++
		}
		if si == len(ix.segs) {
			ix.mu.Unlock()
			return nil
		}
		num = ix.segs[si].num
		limit := ix.next
		n := -1
		if p := ix.cachedLocked(num); p != nil {
			// A cached page may hold changes not yet on disk: copy it.
			n = copy(buf[:], p.buf[:])
		}
		path := ix.segPath(num)
		ix.mu.Unlock()
		if n < 0 {
			var err error
			n, err = ix.readSegmentFile(path, buf)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				n = 0 // settled and removed since the lock was dropped
			case err != nil:
				return err
			default:
				ix.stats.segmentReads.Add(1)
			}
		}
		if !visitLive(buf[:n], num, limit, fn) {
			return nil
		}
		num++
	}
}

// visitAllLocked calls fn for every live entry in order, with mu held (for
// Purge). Uncached segments are read into a scratch buffer, not the cache.
func (ix *Index) visitAllLocked(fn func(seq uint64, e Entry)) error {
	var scratch *[SegmentSize]byte
	defer func() {
		if scratch != nil {
			pagePool.Put(scratch)
		}
	}()
	visit := func(seq uint64, e Entry) bool { fn(seq, e); return true }
	for _, s := range ix.segs {
		if s.live == 0 {
			continue
		}
		if p := ix.cachedLocked(s.num); p != nil {
			visitLive(p.buf[:], s.num, ix.next, visit)
			continue
		}
		if scratch == nil {
			scratch = pagePool.Get().(*[SegmentSize]byte)
		}
		n, err := ix.readSegmentFile(ix.segPath(s.num), scratch)
		if err != nil {
			return err
		}
		ix.stats.segmentReads.Add(1)
		visitLive(scratch[:n], s.num, ix.next, visit)
	}
	return nil
}

// Unflushed calls fn, in sequence order, for each live entry whose slot has
// changes that no successful Flush wrote: after a failed write or sync, the
// entries a reopened index may lack. It also works on a failed index (not on
// a closed one), so the owner can carry those entries over to the index it
// opens next. fn runs with the index locked and must not call it.
func (ix *Index) Unflushed(fn func(seq uint64, e Entry)) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return ErrClosed
	}
	pages := make([]*page, 0, len(ix.cache))
	for _, p := range ix.cache {
		if p.ndirty > 0 {
			pages = append(pages, p)
		}
	}
	slices.SortFunc(pages, func(a, b *page) int { return cmp.Compare(a.num, b.num) })
	for _, p := range pages {
		base := p.num * SlotsPerSegment
		for slot := 0; slot < SlotsPerSegment && base+uint64(slot) < ix.next; slot++ {
			if p.dirty[slot/64]&(1<<(slot%64)) == 0 {
				continue
			}
			st, e, err := decodeSlot(p.buf[slot*SlotSize : (slot+1)*SlotSize])
			if err == nil && st == statusReady {
				fn(base+uint64(slot), e)
			}
		}
	}
	return nil
}
