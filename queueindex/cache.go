package queueindex

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/bits"
	"os"
	"sync"
)

// segment is the only per-segment state the index keeps for a segment whose
// page is not cached: 24 bytes per 4096 messages.
type segment struct {
	num   uint64 // segment number: first seq / SlotsPerSegment
	live  uint32 // ready slots
	size  uint32 // file size in bytes (what has been written so far)
	bytes uint64 // sum of Entry.Size over ready slots
}

// page is a cached, in-memory image of one segment file.
type page struct {
	num uint64
	buf *[SegmentSize]byte
	// h is the segment file in the index's FileCache, open or not. For a
	// segment without a file yet its flag creates it; the first Flush that
	// writes the page sets the flag back to plain O_RDWR. Only the loader
	// (under mu) and the flusher of an in-flight page (under flushMu) use it.
	h    *handle
	used uint64 // LRU clock value of the last access

	// dirty has one bit per slot changed since the last Flush. A page with
	// dirty bits or with a write in flight is never evicted: its bytes are the
	// only copy of the change.
	dirty    [SlotsPerSegment / 64]uint64
	ndirty   int
	inflight bool
}

// pagePool recycles page buffers across all indexes of the process, so queues
// that page through their segments do not allocate 128 KiB per page load.
var pagePool = sync.Pool{New: func() any { return new([SegmentSize]byte) }}

func (p *page) markDirty(slot int) {
	w, b := slot/64, uint64(1)<<(slot%64)
	if p.dirty[w]&b == 0 {
		p.dirty[w] |= b
		p.ndirty++
	}
}

// runs calls fn for each maximal run [from, to) of dirty slots. Runs separated
// by fewer than mergeGap clean slots are merged: rewriting a few unchanged slots
// is cheaper than another pwrite, and clean slots hold what is on disk already.
func (p *page) runs(fn func(from, to int)) {
	const mergeGap = 4
	start, end := -1, -1
	for w, word := range p.dirty {
		for word != 0 {
			i := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			switch {
			case start < 0:
				start, end = i, i+1
			case i-end < mergeGap:
				end = i + 1
			default:
				fn(start, end)
				start, end = i, i+1
			}
		}
	}
	if start >= 0 {
		fn(start, end)
	}
}

func (p *page) clearDirty() {
	p.dirty = [SlotsPerSegment / 64]uint64{}
	p.ndirty = 0
}

func (p *page) evictable() bool { return p.ndirty == 0 && !p.inflight }

// release closes the page's file, if the cache has it open, and returns its
// buffer to the pool, or leaves it to the garbage collector when pool is
// false.
func (p *page) release(files *FileCache, pool bool) error {
	if pool {
		pagePool.Put(p.buf)
	}
	p.buf = nil
	return files.forget(p.h)
}

// cachedLocked returns the cached page of segment num, or nil.
func (ix *Index) cachedLocked(num uint64) *page {
	if ix.tail != nil && ix.tail.num == num {
		return ix.tail
	}
	for _, p := range ix.cache {
		if p.num == num {
			return p
		}
	}
	return nil
}

// pageLocked returns the page of segment num, reading the segment file into a
// new page on a miss (one read of at most SegmentSize bytes). A missing file
// yields a zero page: a new segment, whose file Flush creates.
//
// The read happens under ix.mu. It is one read per SlotsPerSegment messages
// paged in, and doing it outside the lock would need a second protocol to stop
// a concurrent load, flush or delete of the same segment.
func (ix *Index) pageLocked(num uint64) (*page, error) {
	ix.clock++
	if p := ix.cachedLocked(num); p != nil {
		p.used = ix.clock
		return p, nil
	}
	p := &page{num: num, buf: pagePool.Get().(*[SegmentSize]byte), used: ix.clock,
		h: &handle{path: ix.segPath(num), flag: os.O_RDWR}}
	f, err := ix.files.acquire(p.h)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		clear(p.buf[:])
		p.h.flag = os.O_RDWR | os.O_CREATE
	case err != nil:
		pagePool.Put(p.buf)
		return nil, fmt.Errorf("queueindex: open segment %d: %w", num, err)
	default:
		n, err := f.ReadAt(p.buf[:], 0)
		// The file stays open in the cache: an ack or a delivered flag
		// usually follows a page load, and Flush writes it back.
		ix.files.release(p.h)
		if err != nil && !errors.Is(err, io.EOF) {
			_ = ix.files.forget(p.h) // the read error is the one to report
			pagePool.Put(p.buf)
			return nil, fmt.Errorf("queueindex: read segment %d: %w", num, err)
		}
		clear(p.buf[n:])
		ix.stats.segmentReads.Add(1)
	}
	// Make room before inserting, so the new page is not its own victim.
	ix.shrinkCacheLocked(ix.cfg.CacheSegments - 1)
	ix.cache = append(ix.cache, p)
	return p, nil
}

// evictLocked shrinks the cache to its bound as far as unevictable pages allow.
func (ix *Index) evictLocked() { ix.shrinkCacheLocked(ix.cfg.CacheSegments) }

// shrinkCacheLocked drops least recently used evictable pages until at most
// limit pages are cached or only unevictable ones are left.
func (ix *Index) shrinkCacheLocked(limit int) {
	for len(ix.cache) > limit {
		victim := -1
		for i, p := range ix.cache {
			if p.evictable() && (victim < 0 || p.used < ix.cache[victim].used) {
				victim = i
			}
		}
		if victim < 0 {
			return
		}
		ix.dropPageLocked(victim, true)
	}
}

// dropPageLocked removes cache[i] and releases it. A close error of an evicted
// page loses nothing (a clean page's bytes are on disk), and the caller that
// caused the eviction has nothing to do about it, so it is logged.
func (ix *Index) dropPageLocked(i int, pool bool) {
	p := ix.cache[i]
	if ix.tail == p {
		ix.tail = nil
	}
	last := len(ix.cache) - 1
	ix.cache[i] = ix.cache[last]
	ix.cache[last] = nil
	ix.cache = ix.cache[:last]
	if err := p.release(ix.files, pool); err != nil {
		ix.cfg.Logger.Warn("queueindex: close evicted segment", "dir", ix.cfg.Dir, "segment", p.num, "err", err)
	}
}

// ReleaseIdle frees the cached pages that no call has used since the previous
// ReleaseIdle and that hold no unflushed change, closing their segment files,
// closes the directory if the index shares a FileCache (Config.Files) and
// nothing is using it, and returns how many pages it freed. An owner with many
// queues calls it periodically for each: an idle queue then holds no page
// (SegmentSize bytes) and no open file, and its next access reads the segment
// back (one read of at most SegmentSize bytes). A closed index frees nothing.
func (ix *Index) ReleaseIdle() int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return 0
	}
	n := 0
	for i := 0; i < len(ix.cache); {
		if p := ix.cache[i]; p.evictable() && p.used <= ix.idleMark {
			// Not to the pool: idle memory should go back to the system.
			ix.dropPageLocked(i, false) // moves the last page to i
			n++
			continue
		}
		i++
	}
	ix.idleMark = ix.clock
	if !ix.dirPinned {
		ix.files.closeIdle(ix.dirh)
	}
	return n
}
