package server

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/warrenmq/warren/msgstore"
	"github.com/warrenmq/warren/queueindex"
)

// A queue index that fails a write (a full disk) refuses every later call
// (queueindex.ErrFailed) until it is closed and opened again. The queue then
// is "down": publishes that need the index are nacked at once, index calls
// are skipped (acks and deliveries are settled in memory only), and the
// vhost's committer reopens the index with back-off. The reopened index
// holds what reached the disk; the queue reconciles it with its memory:
//
//   - an entry of a message in memory (ready or unacked) is kept; one the
//     disk lacks is appended again, so the message is never delivered twice
//     and a confirm given after the reopen is true;
//   - an entry at or past pageFrom while the queue pages is a disk-only
//     message; those the failed index had not written are appended again;
//   - any other entry belongs to a message settled while the index was down:
//     it is acked (its store reference was released then).
//
// Publishes whose round failed were nacked; they may survive (if their
// entry reached the disk or was carried over) but never twice.

// Back-off between attempts to reopen a failed index.
const (
	reopenFirst = 50 * time.Millisecond
	reopenMax   = 2 * time.Second
)

// reopenState is a down queue's progress towards a usable index; under
// Queue.mu.
type reopenState struct {
	at      time.Time // next attempt
	backoff time.Duration
	// up is when the index was last reopened, and prev the back-off then.
	up   time.Time
	prev time.Duration
	// carry are the live entries the failed index had not written (taken
	// before it was closed): they exist nowhere else.
	carry map[uint64]queueindex.Entry
	// dropFrom is set when disk-only messages were purged while the index
	// was down: their entries from this id on are acked and released at the
	// reopen.
	dropFrom uint64
	dropping bool
	// inHead are index ids at or past pageFrom whose messages are in memory
	// (appended again at a reopen while the queue paged): paging skips them.
	// Emptied when the queue stops paging.
	inHead map[uint64]struct{}
}

// indexFailedLocked marks the queue down after its index returned err; the
// first failure is logged, the rest are not (a full disk fails every call).
func (q *Queue) indexFailedLocked(err error) {
	if q.indexDown.Load() || q.diskGone {
		return
	}
	q.indexDown.Store(true)
	q.reopen.backoff = reopenFirst
	if time.Since(q.reopen.up) < reopenMax {
		// Failed again soon after a reopen: the disk is still short, so
		// keep backing off rather than reopening every round.
		q.reopen.backoff = min(2*q.reopen.prev, reopenMax)
	}
	q.reopen.at = time.Now().Add(q.reopen.backoff)
	q.vhost.log.Error("queue index write failed; publishes to the queue are nacked until it is reopened",
		"queue", q.name, "err", err)
	q.store.scheduleReopen(q)
}

// indexFailed is indexFailedLocked for the committer, which holds no lock.
func (q *Queue) indexFailed(err error) {
	q.mu.Lock()
	q.indexFailedLocked(err)
	q.mu.Unlock()
}

// isIndexFailure reports whether err means the index must be reopened.
func isIndexFailure(err error) bool { return errors.Is(err, queueindex.ErrFailed) }

// tryReopen reopens the index if the back-off allows. It reports whether
// the queue needs no more attempts, or else how long until the next. Called
// only by the committer of q.store, the only goroutine that uses q.index
// without mu. Opening reads the index files under mu: a recovery path, the
// queue serves nothing that needs its index meanwhile.
func (q *Queue) tryReopen(now time.Time) (done bool, wait time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.diskGone || !q.indexDown.Load() {
		return true, 0
	}
	if now.Before(q.reopen.at) {
		return false, q.reopen.at.Sub(now)
	}
	n, err := q.reopenIndexLocked()
	if err != nil {
		q.reopen.backoff = min(2*q.reopen.backoff, reopenMax)
		q.reopen.at = now.Add(q.reopen.backoff)
		q.vhost.log.Debug("reopening a queue index failed; will retry", "queue", q.name, "err", err,
			"retry_in", q.reopen.backoff)
		return false, q.reopen.backoff
	}
	q.indexDown.Store(false)
	q.reopen.carry, q.reopen.dropping = nil, false
	q.reopen.up, q.reopen.prev = now, q.reopen.backoff
	q.vhost.log.Info("queue index reopened; publishes to the queue are confirmed again", "queue", q.name,
		"kept", n.kept, "appended_again", n.appended, "settled_while_down", n.acked,
		"purged_while_down", n.dropped, "on_disk", q.paged)
	q.store.markDirty(q)
	return true, 0
}

// reopenCounts says what a reopen did, for the log.
type reopenCounts struct{ kept, appended, acked, dropped int }

// reopenIndexLocked closes the failed index (keeping what it had not
// written), opens it again and reconciles it with the queue's memory.
func (q *Queue) reopenIndexLocked() (reopenCounts, error) {
	old := q.index
	if q.reopen.carry == nil {
		carry := make(map[uint64]queueindex.Entry)
		err := old.Unflushed(func(seq uint64, e queueindex.Entry) { carry[seq] = e })
		if err != nil && !errors.Is(err, queueindex.ErrClosed) {
			return reopenCounts{}, err
		}
		q.reopen.carry = carry
	}
	if err := old.Close(); err != nil && !errors.Is(err, queueindex.ErrClosed) {
		q.vhost.log.Warn("closing a failed queue index", "queue", q.name, "err", err)
	}
	ix, _, err := q.store.openIndex(q.name)
	if err != nil {
		return reopenCounts{}, err
	}
	n, err := q.adoptIndexLocked(ix)
	if err != nil {
		return reopenCounts{}, errors.Join(err, ix.Abandon())
	}
	return n, nil
}

// held is a message in memory with an index entry, during a reopen.
type held struct {
	ref       *diskRef
	e         queueindex.Entry // what to append if the disk lacks it
	delivered bool
	found     bool
}

// reappend is an entry to append to the reopened index: a message in
// memory (h) or a disk-only one.
type reappend struct {
	old uint64
	e   queueindex.Entry
	h   *held
}

// adoptIndexLocked reconciles ix with the queue's memory and makes it the
// queue's index. It changes nothing in the queue unless it succeeds.
func (q *Queue) adoptIndexLocked(ix *queueindex.Index) (reopenCounts, error) {
	p := reconcile{mem: q.heldLocked(), paging: q.paged > 0, from: q.pageFrom,
		drop: q.reopen.dropping, dropFrom: q.reopen.dropFrom, recoveredNext: q.recoveredNext}
	if err := ix.ForEach(func(seq uint64, e queueindex.Entry) bool {
		delete(q.reopen.carry, seq) // on disk: nothing to carry over
		p.onDisk(seq, e)
		return true
	}); err != nil {
		return p.n, fmt.Errorf("reading the reopened index: %w", err)
	}
	p.missing(q.reopen.carry)
	seqs := make([]uint64, len(p.again))
	for i, r := range p.again {
		var err error
		if seqs[i], err = ix.Append(r.e); err != nil {
			return p.n, fmt.Errorf("appending to the reopened index: %w", err)
		}
	}
	// From here on nothing fails: apply.
	for _, seq := range p.marks {
		q.logIndexErr("mark-delivered", ix.MarkDelivered(seq))
	}
	for _, seq := range p.acks {
		q.logIndexErr("ack", ix.Ack(seq))
	}
	for _, e := range p.drops {
		q.store.release(msgstore.Loc{Offset: e.Offset, Pos: e.Pos, Size: e.Size})
	}
	q.reopen.inHead = nil
	for i, r := range p.again {
		if r.h == nil {
			continue
		}
		r.h.ref.seq = seqs[i]
		if p.paged > 0 {
			if q.reopen.inHead == nil {
				q.reopen.inHead = make(map[uint64]struct{})
			}
			q.reopen.inHead[seqs[i]] = struct{}{}
		}
	}
	p.n.appended, p.n.dropped = len(p.again), len(p.drops)
	q.index = ix
	q.paged, q.pagedBytes = p.paged, p.pagedBytes
	q.pagedPersistent, q.pagedPersistentBytes = p.pagedPersistent, p.pagedPersistentBytes
	q.paging.Store(p.paged > 0)
	return p.n, nil
}

// reconcile is what a reopen does to the reopened index, worked out before
// any of it is done.
type reconcile struct {
	mem         map[uint64]*held
	paging      bool   // the queue has disk-only messages...
	from        uint64 // ...with ids from this one on
	drop        bool   // disk-only messages were purged while down...
	dropFrom    uint64 // ...from this id on
	marks, acks []uint64
	drops       []queueindex.Entry // settle in the store
	again       []reappend         // in old id order
	paged       int                // disk-only messages after the reopen
	pagedBytes  int
	// pagedPersistent(Bytes) are the persistent ones among them, counted
	// as countsPersistent does; recoveredNext is the queue's.
	pagedPersistent, pagedPersistentBytes int
	recoveredNext                         uint64
	n                                     reopenCounts
}

// onDisk classifies a live entry of the reopened index.
func (p *reconcile) onDisk(seq uint64, e queueindex.Entry) {
	if h := p.mem[seq]; h != nil {
		h.found = true
		p.n.kept++
		if h.delivered && !e.Delivered {
			p.marks = append(p.marks, seq)
		}
		return
	}
	switch {
	case p.drop && seq >= p.dropFrom:
		p.acks = append(p.acks, seq)
		p.drops = append(p.drops, e)
	case p.paging && seq >= p.from:
		p.addPaged(countsPersistent(seq, p.recoveredNext, e), e)
	default:
		p.acks = append(p.acks, seq) // settled while the index was down
		p.n.acked++
	}
}

// addPaged counts a disk-only message of the reopened index.
func (p *reconcile) addPaged(persistent bool, e queueindex.Entry) {
	p.paged++
	p.pagedBytes += int(e.Size)
	if persistent {
		p.pagedPersistent++
		p.pagedPersistentBytes += int(e.Size)
	}
}

// missing plans what the reopened index lacks: the messages in memory it
// has no entry for, and the disk-only ones the failed index had not written
// (carry).
func (p *reconcile) missing(carry map[uint64]queueindex.Entry) {
	for _, h := range p.mem {
		if !h.found {
			e := h.e
			if c, ok := carry[h.ref.seq]; ok {
				e = c
			}
			e.Delivered = h.delivered
			p.again = append(p.again, reappend{old: h.ref.seq, e: e, h: h})
		}
	}
	for seq, e := range carry {
		switch {
		case p.mem[seq] != nil:
		case p.drop && seq >= p.dropFrom:
			p.drops = append(p.drops, e)
		case p.paging && seq >= p.from:
			p.again = append(p.again, reappend{old: seq, e: e})
			p.addPaged(e.Persistent, e) // appended again with a new id
		}
	}
	slices.SortFunc(p.again, func(a, b reappend) int { return cmp.Compare(a.old, b.old) })
}

// heldLocked maps the index id of every message in memory with an entry
// (ready or unacked) to it.
func (q *Queue) heldLocked() map[uint64]*held {
	mem := make(map[uint64]*held)
	add := func(m *queued, delivered bool) {
		if m.disk == nil {
			return
		}
		loc := m.disk.loc
		mem[m.disk.seq] = &held{ref: m.disk, delivered: delivered, e: queueindex.Entry{
			Offset: loc.Offset, Pos: loc.Pos, Size: loc.Size, Expiry: m.expiresAt,
			Priority: m.priority, Persistent: m.msg.Persistent(),
		}}
	}
	for i := range q.ready.levels {
		l := &q.ready.levels[i]
		for j := l.head; j < len(l.items); j++ {
			add(&l.items[j], l.items[j].redelivered)
		}
	}
	q.pending.each(func(m *queued) { add(m, true) })
	return mem
}

// logIndexErr logs a failed index call that has no caller to return to.
func (q *Queue) logIndexErr(op string, err error) {
	if err != nil {
		q.vhost.log.Error("queue index "+op+" failed", "queue", q.name, "err", err)
	}
}

// scheduleReopen hands q to the committer, which reopens its index.
func (v *vhostStorage) scheduleReopen(q reopener) {
	v.mu.Lock()
	if v.reopen == nil {
		v.reopen = make(map[reopener]struct{})
	}
	v.reopen[q] = struct{}{}
	v.mu.Unlock()
	v.signal()
}

// reopenIndexes tries to reopen the failed indexes that are due and returns
// how long until the next attempt (0 if none is left). Committer only.
func (v *vhostStorage) reopenIndexes() time.Duration {
	v.mu.Lock()
	if len(v.reopen) == 0 {
		v.mu.Unlock()
		return 0
	}
	qs := make([]reopener, 0, len(v.reopen))
	for q := range v.reopen {
		qs = append(qs, q)
	}
	v.mu.Unlock()
	now := time.Now()
	var next time.Duration
	for _, q := range qs {
		done, wait := q.tryReopen(now)
		if done {
			v.mu.Lock()
			delete(v.reopen, q)
			v.mu.Unlock()
			continue
		}
		if next == 0 || wait < next {
			next = wait
		}
	}
	return next
}

// closeDownIndexLocked closes the index of a queue that is down, at shutdown
// (what the failed index had not written was nacked and is dropped) or at
// delete: the index is opened once more so every message it holds releases
// its store reference. The local index never becomes q.index, which the
// committer may be reading.
func (q *Queue) closeDownIndexLocked(remove bool) {
	defer q.indexDown.Store(false)
	old := q.index
	carry := q.reopen.carry
	if carry == nil && remove {
		carry = make(map[uint64]queueindex.Entry)
		if err := old.Unflushed(func(seq uint64, e queueindex.Entry) { carry[seq] = e }); err != nil {
			carry = nil // closed by a failed reopen, which took them: none left
		}
	}
	q.reopen = reopenState{}
	if err := old.Close(); err != nil && !errors.Is(err, queueindex.ErrClosed) {
		q.vhost.log.Warn("closing a failed queue index", "queue", q.name, "err", err)
	}
	if !remove {
		return
	}
	store := q.store
	release := func(e queueindex.Entry) {
		store.release(msgstore.Loc{Offset: e.Offset, Pos: e.Pos, Size: e.Size})
	}
	ix, _, err := store.openIndex(q.name)
	if err != nil {
		store.log.Error("deleting a queue whose index failed: its messages stay in the message store",
			"queue", q.name, "err", err)
		if err := os.RemoveAll(store.queueDir(q.name)); err != nil {
			store.log.Error("deleting a queue's index", "queue", q.name, "err", err)
		}
		return
	}
	_, err = ix.Purge(func(seq uint64, e queueindex.Entry) {
		delete(carry, seq)
		release(e)
	})
	if err != nil {
		store.log.Error("purging a deleted queue's index", "queue", q.name, "err", err)
	}
	for _, e := range carry {
		release(e)
	}
	if err := ix.Delete(); err != nil {
		store.log.Error("deleting a queue's index", "queue", q.name, "err", err)
	}
}
