package server

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/msgstore"
	"github.com/warrenmq/warren/queueindex"
)

// delayHeadMax bounds the delayed messages of one exchange kept in memory:
// the earliest of them, 40 bytes each (due time, index sequence, store
// location), so at most 2.5 MiB per delaying exchange however many are
// pending. The others are only on disk (message store and the exchange's
// queue index, whose slot keeps the due time in Expiry); when the head runs
// low it is refilled with the next earliest by one pass over the index. With
// no data directory nothing can go to disk and the head is unbounded.
var delayHeadMax = 1 << 16 // a variable so tests can make the head small

// delayFireBatch is the most delayed messages of one exchange fired per
// round of the delayer, so one busy exchange does not starve the others.
const delayFireBatch = 4096

// delayItem is one delayed message: when it is due, its order among those
// due at the same millisecond (the index sequence, which follows publish
// order) and where it is.
type delayItem struct {
	due int64 // unix milliseconds
	seq uint64
	loc msgstore.Loc
	msg *Message // in memory only: the server has no data directory
}

// before orders delayed messages by due time, then publish order.
func (a *delayItem) before(b *delayItem) bool {
	if a.due != b.due {
		return a.due < b.due
	}
	return a.seq < b.seq
}

func compareDelayItems(a, b delayItem) int {
	switch {
	case a.before(&b):
		return -1
	case b.before(&a):
		return 1
	}
	return 0
}

// delayStore holds one delaying exchange's messages until they are due.
//
// Invariant: when spilled > 0, every message in head is before horizon and
// every message on disk only is not; spilled counts the latter.
type delayStore struct {
	ex *Exchange

	mu      sync.Mutex
	opened  bool
	dropped bool
	st      *vhostStorage // nil when the server has no data directory
	index   *queueindex.Index
	dirty   dirtyMark // in st's dirty list (persist.go)
	dir     string
	head    []delayItem // a min-heap by before
	horizon delayItem
	spilled int
	memSeq  uint64 // sequence of memory-only items
	// While the delayer refills head from the index (scanning), arrivedMin
	// is the earliest message put on disk only meanwhile, and shrunk records
	// that head spilled, which makes the refill's choice stale.
	scanning, arrived, shrunk bool
	arrivedMin                delayItem

	reopen delayReopen // a failed index's reopening (delay_reopen.go)

	pending atomic.Int64 // messages_delayed
}

func newDelayStore(ex *Exchange) *delayStore { return &delayStore{ex: ex} }

// MessagesDelayed is how many messages the exchange holds for later: the
// plugin's messages_delayed; -1 for an exchange that does not delay.
func (e *Exchange) MessagesDelayed() int64 {
	if e.delay == nil {
		return -1
	}
	return e.delay.pending.Load()
}

// IsDelayed reports whether the exchange delays messages with x-delay.
func (e *Exchange) IsDelayed() bool { return e.delay != nil }

// openLocked opens the exchange's index on the first delayed message: in the
// vhost's store for a durable exchange, in its transient store otherwise.
// Each store instance has a directory of its own (the exchange name and the
// time it was opened), so a deleted exchange's files, removed in the
// background, never meet those of a new one with the same name.
func (d *delayStore) openLocked() error {
	vh := d.ex.vhost
	st := vh.storage
	if !d.ex.durable {
		st = vh.transient
	}
	vh.delays.register(d)
	if st == nil {
		d.opened = true
		return nil
	}
	dir := filepath.Join(delayedDir(st), fmt.Sprintf("%s.%020d", nameDir(d.ex.name), time.Now().UnixNano()))
	ix, _, err := st.openIndexAt(dir, d.ex.name)
	if err != nil {
		return fmt.Errorf("opening the delayed messages of %s: %w", describeExchange(d.ex.name, vh.name), err)
	}
	d.opened, d.st, d.index, d.dir = true, st, ix, dir
	return nil
}

// delayedDir is where a store keeps its delaying exchanges' indexes.
func delayedDir(st *vhostStorage) string { return filepath.Join(st.dir, "delayed") }

// put holds m for delay milliseconds. stored reports that the publish's
// confirm waits for the vhost's commit round (the message is in the durable
// store); an error refuses the message (the publisher gets a nack).
func (d *delayStore) put(m *Message, delay int64) (stored bool, err error) {
	due := nowMillis() + delay
	d.mu.Lock()
	if !d.opened && !d.dropped {
		if err := d.openLocked(); err != nil {
			d.mu.Unlock()
			return false, err
		}
	}
	if d.reopen.down {
		d.mu.Unlock()
		return false, errDelayIndexDown
	}
	st, dropped := d.st, d.dropped
	m = withBCC(m)
	if st == nil && !dropped {
		d.memSeq++
		d.insertLocked(delayItem{due: due, seq: d.memSeq, msg: m})
	}
	d.mu.Unlock()
	if st == nil || dropped {
		return false, nil // an exchange deleted meanwhile drops it, as its queues would
	}
	loc, err := st.put(m, 1) // outside mu: the write may wait for the disk
	st.noteWrite(err)
	if err != nil {
		return false, fmt.Errorf("%w: %w", errDelayStoreRefused, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dropped || d.reopen.down {
		st.release(loc)
		if d.reopen.down {
			return false, errDelayIndexDown
		}
		return false, nil
	}
	seq, err := d.index.Append(queueindex.Entry{
		Offset: loc.Offset, Pos: loc.Pos, Size: loc.Size, Expiry: due, Persistent: m.Persistent(),
	})
	if err != nil {
		st.release(loc)
		d.noteIndexErr(err)
		return false, fmt.Errorf("delayed message index: %w", err)
	}
	st.markDirty(d)
	d.insertLocked(delayItem{due: due, seq: seq, loc: loc})
	return st == d.ex.vhost.storage, nil
}

// insertLocked adds a new delayed message to head, or counts it on disk
// only when it is not before the horizon, and wakes the delayer when it is
// the new earliest.
func (d *delayStore) insertLocked(it delayItem) {
	d.pending.Add(1)
	if d.spilled > 0 && !it.before(&d.horizon) {
		d.spilled++
		if d.scanning && (!d.arrived || it.before(&d.arrivedMin)) {
			d.arrived, d.arrivedMin = true, it
		}
		return
	}
	d.head = heapPush(d.head, it)
	if d.st != nil && len(d.head) > delayHeadMax {
		d.shrinkLocked()
	}
	if d.head[0].seq == it.seq && d.head[0].due == it.due {
		d.ex.vhost.delays.wake()
	}
}

// shrinkLocked keeps the earliest half of head in memory and leaves the
// rest on disk only, moving the horizon down to the first of those.
func (d *delayStore) shrinkLocked() {
	slices.SortFunc(d.head, compareDelayItems) // a sorted slice is a heap
	keep := delayHeadMax / 2
	d.horizon = d.head[keep]
	d.spilled += len(d.head) - keep
	clear(d.head[keep:])
	d.head = d.head[:keep]
	if d.scanning {
		d.shrunk = true
	}
}

// popDue moves up to max messages due at now from head to out.
func (d *delayStore) popDue(now int64, max int, out []delayItem) []delayItem {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.reopen.down {
		return out // fires late once reopened, never in flight at the reopen
	}
	for len(d.head) > 0 && d.head[0].due <= now && max > 0 {
		var it delayItem
		d.head, it = heapPop(d.head)
		out = append(out, it)
		d.reopen.inflight++
		max--
	}
	return out
}

// retry puts back a fired message the store refused, due again later. It
// stays in head whatever the horizon: its index entry keeps the first due
// time, which is before the horizon too.
func (d *delayStore) retry(it delayItem) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reopen.inflight--
	if !d.dropped {
		d.head = heapPush(d.head, it)
	}
}

// next returns the earliest due time in head; ok is false when head is empty.
func (d *delayStore) next() (due int64, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.head) == 0 {
		return 0, false
	}
	return d.head[0].due, true
}

// settle forgets fired messages: their index entries are acked and their
// stored copies released. Under mu, so a drop that is cleaning up the same
// index (releasing every entry still live) sees them settled or not at all.
func (d *delayStore) settle(items []delayItem) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reopen.inflight -= len(items)
	if d.dropped {
		return // drop has taken the index: its cleanup releases them
	}
	for i := range items {
		d.pending.Add(-1)
		if d.index == nil {
			continue
		}
		// A down index is not acked: the reopen acks what is neither in
		// head nor on disk only.
		if !d.reopen.down {
			if err := d.index.Ack(items[i].seq); err != nil {
				d.noteIndexErr(err)
				if !d.reopen.down {
					d.ex.vhost.log.Error("delayed message index ack failed", "exchange", d.ex.name, "err", err)
				}
			}
		}
		d.st.release(items[i].loc)
	}
	if d.index != nil && !d.reopen.down {
		d.st.markDirty(d)
	}
}

// beginRefill starts a refill when head is low while messages wait on disk
// only: it returns the horizon to read from and the index, and marks the
// store scanning until finishRefill.
func (d *delayStore) beginRefill() (delayItem, *queueindex.Index, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dropped || d.reopen.down || d.scanning || d.spilled == 0 || len(d.head) >= delayHeadMax/4 {
		return delayItem{}, nil, false
	}
	d.scanning, d.arrived, d.shrunk = true, false, false
	return d.horizon, d.index, true
}

// scanRefill reads the index once, with no lock held, for the earliest
// messages not before from: those on disk only. Firing goes on meanwhile
// (what it takes from head is before from) and so does publishing.
func scanRefill(from delayItem, ix *queueindex.Index) (*delaySelection, error) {
	sel := newDelaySelection(delayHeadMax / 2)
	err := ix.ForEach(func(seq uint64, e queueindex.Entry) bool {
		it := delayItem{due: e.Expiry, seq: seq, loc: msgstore.Loc{Offset: e.Offset, Pos: e.Pos, Size: e.Size}}
		if !it.before(&from) {
			sel.offer(it)
		}
		return true
	})
	return sel, err
}

// finishRefill moves what scanRefill chose to head: all of it but what is
// not before the earliest message published on disk only meanwhile
// (arrivedMin), which bounds the choice. A drop or a spill of head during
// the scan makes the choice stale: it is discarded.
func (d *delayStore) finishRefill(sel *delaySelection, err error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.scanning = false
	if err != nil || d.dropped || d.shrunk {
		if errors.Is(err, queueindex.ErrClosed) {
			err = nil
		}
		return err
	}
	limit, limited := sel.excludedMin, sel.excluded
	if d.arrived && (!limited || d.arrivedMin.before(&limit)) {
		limit, limited = d.arrivedMin, true
	}
	for _, it := range sel.items {
		if limited && !it.before(&limit) {
			continue
		}
		d.head = heapPush(d.head, it)
		d.spilled--
	}
	if !limited || d.spilled <= 0 {
		if d.spilled != 0 {
			d.ex.vhost.log.Error("delayed messages miscounted on refill", "exchange", d.ex.name, "spilled", d.spilled)
		}
		d.spilled = 0
		return nil
	}
	d.horizon = limit
	return nil
}

// recoverLocked loads the earliest messages of an index found at start and
// counts the rest as on disk only.
func (d *delayStore) recoverLocked(st *vhostStorage, ix *queueindex.Index, dir string) error {
	d.opened, d.st, d.index, d.dir = true, st, ix, dir
	d.ex.vhost.delays.register(d)
	sel := newDelaySelection(delayHeadMax / 2)
	n := 0
	err := ix.ForEach(func(seq uint64, e queueindex.Entry) bool {
		n++
		sel.offer(delayItem{due: e.Expiry, seq: seq, loc: msgstore.Loc{Offset: e.Offset, Pos: e.Pos, Size: e.Size}})
		return true
	})
	if err != nil {
		return err
	}
	slices.SortFunc(sel.items, compareDelayItems)
	d.head = sel.items
	d.spilled = n - len(sel.items)
	d.horizon = sel.excludedMin
	d.pending.Store(int64(n))
	return nil
}

// drop forgets the exchange's delayed messages when it is deleted; the
// delayer releases their stored copies and removes the index.
func (d *delayStore) drop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dropped {
		return
	}
	d.dropped = true
	ix, st := d.index, d.st
	clear(d.head)
	d.head, d.index, d.spilled = nil, nil, 0
	d.pending.Store(0)
	d.ex.vhost.delays.unregister(d)
	if ix != nil {
		d.ex.vhost.delays.cleanup(ix, st)
	}
}

// flushIndex writes the index's pending changes (indexOwner).
func (d *delayStore) flushIndex() error {
	d.mu.Lock()
	ix, down := d.index, d.reopen.down
	d.mu.Unlock()
	if ix == nil {
		return nil
	}
	if down {
		return errDelayIndexDown // appends before the failure may be lost with it: their confirms are nacked
	}
	err := ix.Flush()
	if errors.Is(err, queueindex.ErrClosed) {
		return nil // dropped meanwhile
	}
	d.noteFailed(err)
	return err
}

// noteFailed marks the store down when the committer's flush or sync of
// its index failed.
func (d *delayStore) noteFailed(err error) {
	if !isIndexFailure(err) {
		return
	}
	d.mu.Lock()
	d.indexFailedLocked(err)
	d.mu.Unlock()
}

// syncIndex fsyncs the index (indexOwner).
func (d *delayStore) syncIndex() error {
	d.mu.Lock()
	ix, down := d.index, d.reopen.down
	d.mu.Unlock()
	if ix == nil || down {
		return nil
	}
	err := ix.Sync()
	d.noteFailed(err)
	return err
}

// indexName names the store in logs (indexOwner).
func (d *delayStore) indexName() string { return "delayed messages of exchange " + d.ex.name }

// dirtyMark is the store's mark in st's dirty list (indexOwner).
func (d *delayStore) dirtyMark() *dirtyMark { return &d.dirty }

// delaySelection keeps the n earliest delayed messages offered to it (a
// max-heap of them) and the earliest of those it left out.
type delaySelection struct {
	n           int
	items       []delayItem // max-heap by before
	excluded    bool
	excludedMin delayItem
}

func newDelaySelection(n int) *delaySelection { return &delaySelection{n: n} }

func (s *delaySelection) offer(it delayItem) {
	if len(s.items) < s.n {
		s.items = maxHeapPush(s.items, it)
		return
	}
	if it.before(&s.items[0]) {
		out := s.items[0]
		s.items[0] = it
		maxHeapDown(s.items, 0)
		it = out
	}
	if !s.excluded || it.before(&s.excludedMin) {
		s.excluded, s.excludedMin = true, it
	}
}
