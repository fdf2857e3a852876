package server

import (
	"errors"
	"runtime/debug"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/msgstore"
	"github.com/warrenmq/warren/queueindex"
)

// A durable queue keeps every message that is in the message store in its
// index as well. At most a bounded head of ready messages is in memory; the
// rest (q.paged of them, all newer than anything in memory) exist only on
// disk and are read back in batches as consumers drain the head.

// headFullLocked reports whether the in-memory head has reached its bounds.
func (q *Queue) headFullLocked() bool {
	st := q.vhost.storage
	if st == nil {
		return false // no data directory: everything stays in memory
	}
	return q.ready.len() >= st.cfg.QueueHeadMessages || q.ready.bytes >= st.cfg.QueueHeadBytes
}

// startPagingLocked opens the transient index of a non-durable queue whose
// head is full, so it can page like a durable queue; messages in it are lost
// with the broker, as transient messages are.
func (q *Queue) startPagingLocked() bool {
	if q.index != nil {
		return true
	}
	st := q.vhost.transient
	if st == nil || q.diskGone || q.qa.maxPriority > 0 {
		return false
	}
	ix, _, err := st.openIndex(q.name)
	if err != nil {
		st.log.Error("cannot page a transient queue to disk; it stays in memory", "queue", q.name, "err", err)
		return false
	}
	q.store, q.index = st, ix
	return true
}

// storedEnqueueLocked records a stored message in the index and keeps it in
// memory or on disk only. It returns false if the index refused it (the
// store reference is then released).
func (q *Queue) storedEnqueueLocked(qm queued, loc msgstore.Loc) bool {
	persistent := qm.persistent
	if q.indexDown.Load() {
		q.store.release(loc) // nacked; the failure was logged when it started
		return false
	}
	seq, err := q.index.Append(queueindex.Entry{
		Offset: loc.Offset, Pos: loc.Pos, Size: loc.Size, Expiry: qm.expiresAt,
		Priority: qm.priority, Persistent: persistent,
	})
	if err != nil {
		q.store.release(loc)
		if isIndexFailure(err) {
			q.indexFailedLocked(err)
			return false
		}
		q.vhost.log.Error("queue index append failed", "queue", q.name, "err", err)
		return false
	}
	qm.disk = &diskRef{seq: seq, loc: loc}
	q.store.markDirty(q)
	if q.paged > 0 || (q.qa.maxPriority == 0 && q.headFullLocked()) {
		if q.paged == 0 {
			q.pageFrom = seq // everything before it is in memory
		}
		q.paged++
		q.pagedBytes += int(loc.Size)
		if persistent {
			q.pagedPersistent++
			q.pagedPersistentBytes += int(loc.Size)
		}
		q.paging.Store(true)
		return true
	}
	q.ready.push(qm)
	return true
}

// forgetLocked removes a message that left the queue for good (acked,
// dropped, expired, dead-lettered, purged) from the index and the store.
func (q *Queue) forgetLocked(m *queued) {
	if q.journal != nil {
		q.journal.note(qrSettle, m.seq)
	}
	if m.disk == nil || q.index == nil || q.diskGone {
		return
	}
	if q.reopen.inHead != nil {
		delete(q.reopen.inHead, m.disk.seq)
	}
	q.store.release(m.disk.loc)
	if !q.indexDown.Load() {
		// While the index is down the ack is made at its reopen.
		q.indexCallLocked("ack", q.index.Ack(m.disk.seq))
	}
	m.disk = nil
}

// indexCallLocked handles the outcome of an index call that changed the
// index: the committer flushes it, or, if the index failed, the queue goes
// down until its reopen.
func (q *Queue) indexCallLocked(op string, err error) {
	switch {
	case err == nil:
		q.store.markDirty(q)
	case isIndexFailure(err):
		q.indexFailedLocked(err)
	case !errors.Is(err, queueindex.ErrClosed):
		q.vhost.log.Error("queue index "+op+" failed", "queue", q.name, "err", err)
	}
}

// markDeliveredLocked persists the delivered flag so redelivered is right
// after a restart.
func (q *Queue) markDeliveredLocked(m *queued) {
	if q.journal != nil {
		q.journal.note(qrDelivered, m.seq)
	}
	if m.disk == nil || q.index == nil || q.diskGone || q.indexDown.Load() {
		return // while the index is down the flag is set at its reopen
	}
	q.indexCallLocked("mark-delivered", q.index.MarkDelivered(m.disk.seq))
}

// pageInLocked reads disk-only messages back into the head.
func (q *Queue) pageInLocked() {
	if q.paged == 0 || q.index == nil || q.diskGone || q.indexDown.Load() {
		return // a down index is read again once reopened
	}
	want := max(q.store.cfg.QueueHeadMessages-q.ready.len(), 64)
	got, skipped := 0, 0
	next, err := q.index.ReadRange(q.pageFrom, want, func(seq uint64, e queueindex.Entry) bool {
		if _, ok := q.reopen.inHead[seq]; ok {
			skipped++ // in memory already: appended again at a reopen
			delete(q.reopen.inHead, seq)
			return true
		}
		got++
		return q.pageInEntryLocked(seq, e)
	})
	q.pageFrom = next
	if err != nil {
		if isIndexFailure(err) {
			q.indexFailedLocked(err)
		} else {
			q.vhost.log.Error("reading the queue index failed", "queue", q.name, "err", err)
		}
		return // not a reason to think the messages are gone
	}
	if got == 0 && skipped > 0 && q.paged > 0 {
		q.pageInLocked() // the batch held only messages in memory: read on
		return
	}
	if got == 0 && q.paged > 0 {
		// The index has no more live entries than we counted: trust the index.
		q.vhost.log.Warn("queue index holds fewer messages than counted", "queue", q.name, "missing", q.paged)
		q.paged, q.pagedBytes, q.pagedPersistent, q.pagedPersistentBytes = 0, 0, 0, 0
	}
	if q.paged == 0 {
		q.paging.Store(false)
		q.reopen.inHead = nil
	}
}

// countsPersistent says whether a disk-only index entry is counted in
// pagedPersistent: the index marks it persistent, or it predates the last
// start (openStorage counts every recovered entry, the transient ones
// included until they are read back and dropped).
func countsPersistent(seq, recoveredNext uint64, e queueindex.Entry) bool {
	return e.Persistent || seq < recoveredNext
}

// pageInEntryLocked moves one disk-only message into the head.
func (q *Queue) pageInEntryLocked(seq uint64, e queueindex.Entry) bool {
	store := q.store
	q.paged--
	q.pagedBytes -= int(e.Size)
	if countsPersistent(seq, q.recoveredNext, e) {
		q.pagedPersistent--
		q.pagedPersistentBytes -= int(e.Size)
	}
	loc := msgstore.Loc{Offset: e.Offset, Pos: e.Pos, Size: e.Size}
	if !e.Persistent && seq < q.recoveredNext {
		// A transient message paged to disk before the restart: gone, as in RabbitMQ.
		q.dropIndexEntry(seq, loc)
		return true
	}
	rec, err := store.store.Get(loc)
	if err != nil {
		q.vhost.log.Error("message lost: its record is missing from the store", "queue", q.name, "offset", e.Offset, "err", err)
		if errors.Is(err, msgstore.ErrNotFound) {
			// Recovery cut the record: the store holds no reference to drop.
			q.dropIndexEntryOnly(seq)
			return true
		}
		q.dropIndexEntry(seq, loc)
		return true
	}
	m := messageFromRecord(rec)
	q.nextSeq++
	if e.Expiry != 0 {
		q.expiring = true
	}
	q.ready.push(queued{msg: m, seq: q.nextSeq, redelivered: e.Delivered, expiresAt: e.Expiry, persistent: m.Persistent(),
		priority: min(e.Priority, q.qa.maxPriority), disk: &diskRef{seq: seq, loc: loc}})
	return true
}

func (q *Queue) dropIndexEntry(seq uint64, loc msgstore.Loc) {
	if q.dropIndexEntryOnly(seq) {
		q.store.release(loc)
	}
}

// dropIndexEntryOnly settles index entry seq without touching the store. It
// returns false if the index failed: the entry stays, and so must its store
// reference, for the reopen to settle.
func (q *Queue) dropIndexEntryOnly(seq uint64) bool {
	if q.indexDown.Load() {
		return false
	}
	err := q.index.Ack(seq)
	q.indexCallLocked("ack", err)
	return !isIndexFailure(err)
}

// messageFromRecord rebuilds a message read from the store. Its properties
// are decoded here, before it is shared, like a published one.
func messageFromRecord(rec msgstore.Record) *Message {
	buf := make([]byte, 0, len(rec.Properties)+len(rec.Body))
	buf = append(buf, rec.Properties...)
	buf = append(buf, rec.Body...)
	m := &Message{
		Exchange: string(rec.Exchange), RoutingKey: string(rec.RoutingKey),
		RawProps: buf[:len(rec.Properties):len(rec.Properties)], Body: buf[len(rec.Properties):], ttl: -1,
	}
	if amqp.PeekFlags(m.RawProps)&amqp.FlagHeaders == 0 {
		return m
	}
	if p, err := m.Properties(); err == nil {
		if cc, ok := p.Headers["CC"].([]any); ok {
			m.ccKeys = appendKeys(m.ccKeys, cc)
		}
	}
	return m
}

// flushIndex writes the index's pending changes (the committer calls it).
func (q *Queue) flushIndex() error {
	if q.index == nil {
		return nil
	}
	if q.indexDown.Load() {
		// Appends made before the failure may be lost with the failed
		// index: the confirms waiting on them are nacked.
		return errIndexDown
	}
	err := q.index.Flush()
	if errors.Is(err, queueindex.ErrClosed) {
		return nil // the queue was deleted meanwhile
	}
	if isIndexFailure(err) {
		q.indexFailed(err)
	}
	return err
}

// syncIndex fsyncs the index's flushed changes (indexOwner).
func (q *Queue) syncIndex() error {
	if q.index == nil || q.indexDown.Load() {
		return nil
	}
	err := q.index.Sync()
	if isIndexFailure(err) {
		q.indexFailed(err) // logged there, once
		return nil
	}
	return err
}

// indexName is the queue's name (indexOwner).
func (q *Queue) indexName() string { return q.name }

// dirtyMark is the queue's mark in its store's dirty list (indexOwner).
func (q *Queue) dirtyMark() *dirtyMark { return &q.dirty }

// errIndexDown fails a commit round that includes a queue whose index is down.
var errIndexDown = errors.New("the queue index failed and is not reopened yet")

// purgeDiskLocked settles every disk-only message.
func (q *Queue) purgeDiskLocked() {
	if q.index == nil || q.paged == 0 {
		return
	}
	store := q.store
	for q.paged > 0 && !q.indexDown.Load() {
		before := q.paged
		next, err := q.index.ReadRange(q.pageFrom, 4096, func(seq uint64, e queueindex.Entry) bool {
			if _, ok := q.reopen.inHead[seq]; ok {
				return true // in memory: purged with the head
			}
			q.paged--
			q.dropIndexEntry(seq, msgstore.Loc{Offset: e.Offset, Pos: e.Pos, Size: e.Size})
			if q.indexDown.Load() && !q.reopen.dropping {
				q.reopen.dropping, q.reopen.dropFrom = true, seq // this one on: settled at the reopen
			}
			return true
		})
		q.pageFrom = next
		if isIndexFailure(err) {
			q.indexFailedLocked(err)
		} else if err != nil {
			store.log.Error("purging the queue index failed", "queue", q.name, "err", err)
			break
		}
		if q.paged == before {
			break
		}
	}
	if q.indexDown.Load() && !q.reopen.dropping {
		q.reopen.dropping, q.reopen.dropFrom = true, q.pageFrom
	}
	q.paged, q.pagedBytes, q.pagedPersistent, q.pagedPersistentBytes = 0, 0, 0, 0
	q.paging.Store(false)
	q.reopen.inHead = nil
}

// closeIndexLocked closes the index on shutdown (delete=false) or removes it
// with its directory after releasing every message (delete=true).
func (q *Queue) closeIndexLocked(delete bool) {
	if q.index == nil || q.diskGone {
		return
	}
	q.diskGone = true
	if q.indexDown.Load() {
		q.closeDownIndexLocked(delete)
		return
	}
	if delete {
		store := q.store
		_, err := q.index.Purge(func(seq uint64, e queueindex.Entry) {
			store.release(msgstore.Loc{Offset: e.Offset, Pos: e.Pos, Size: e.Size})
		})
		if err != nil {
			store.log.Error("purging a deleted queue's index", "queue", q.name, "err", err)
		}
		if err := q.index.Delete(); err != nil {
			store.log.Error("deleting a queue's index", "queue", q.name, "err", err)
		}
	} else if err := q.index.Close(); err != nil {
		q.vhost.log.Error("closing a queue's index", "queue", q.name, "err", err)
	}
}

// openStorage opens the index of a durable queue in a vhost with storage and
// counts what it holds as on disk. Nothing is read into memory until a
// consumer needs it.
func (q *Queue) openStorage() error {
	st := q.vhost.storage
	if st == nil || !isDurable(q) {
		return nil
	}
	ix, rec, err := st.openIndex(q.name)
	if err != nil {
		return err
	}
	q.store, q.index = st, ix
	q.recoveredNext = rec.NextSeq
	q.paged = int(rec.Live)
	q.pagedBytes = int(rec.Bytes)
	q.pagedPersistent, q.pagedPersistentBytes = q.paged, q.pagedBytes
	q.paging.Store(q.paged > 0)
	if rec.Torn > 0 || rec.Corrupt > 0 || rec.CheckpointErr != nil {
		st.log.Warn("queue index recovered with damage", "queue", q.name, "torn_slots", rec.Torn,
			"cut_bytes", rec.CutBytes, "corrupt_slots", rec.Corrupt, "checkpoint_error", rec.CheckpointErr)
	}
	return nil
}

// indexIdleEvery is how often the server frees the index pages of queues that
// did not touch them since the previous round, and closes their files: a page
// is 128 KiB, so 10,000 idle queues would otherwise hold 1.25 GiB. (The
// node's index file cache bounds the open files at any time; this sweep
// makes an idle broker hold none.)
const indexIdleEvery = 5 * time.Second

// releaseIdleIndexPages frees idle queues' index pages every indexIdleEvery
// until the server closes. A page idle for one to two rounds is freed; an
// active queue keeps its pages.
func (s *Server) releaseIdleIndexPages() {
	every := indexIdleEvery
	if s.cfg.indexIdleEvery > 0 {
		every = s.cfg.indexIdleEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		freed := 0
		for _, vh := range s.Vhosts() {
			freed += vh.releaseIdleIndexPages()
		}
		if freed*queueindex.SegmentSize >= returnMemoryAbove {
			// An idle broker allocates nothing, so no GC would run to free
			// the pages and the RSS would stay; a forced one is a few
			// milliseconds at this rate (at most once a round).
			debug.FreeOSMemory()
		}
	}
}

// returnMemoryAbove is how many bytes of freed index pages make
// releaseIdleIndexPages hand memory back to the system at once.
const returnMemoryAbove = 16 << 20

// releaseIdleIndexPages calls ReleaseIdle on the index of every queue of vh.
// No lock is held across the calls; an index closed meanwhile frees nothing.
// It returns the number of pages freed.
func (vh *Vhost) releaseIdleIndexPages() int {
	freed := 0
	for _, q := range vh.Queues() {
		q.mu.Lock()
		ix := q.index
		q.mu.Unlock()
		if ix != nil {
			freed += ix.ReleaseIdle()
		}
	}
	return freed
}
