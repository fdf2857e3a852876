package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/cluster/replica"
	"github.com/warrenmq/warren/msgstore"
)

// A quorum queue (x-queue-type: quorum) keeps its messages in a
// replicated log (package cluster/replica, records in quorum_records.go)
// and, on its leader, runs the classic queue code in memory over them: a
// *Queue without an index (consumers, prefetch, consumer priorities, TTL,
// dead-lettering, length limits, single active consumer, delivery limit).
//
//   - A publish appends an ENQ record; the message enters the in-memory
//     queue when the record is committed (Handler.Committed), in commit
//     order, and its confirm completes then. A publish never committed is
//     nacked after quorumConfirmTimeout.
//   - Whatever the classic code does to a message (deliver, settle,
//     requeue, expire, drop) it notes in the Queue's journal under
//     Queue.mu; the handle appends the journal as records after each
//     operation, outside the lock, without waiting for their commit.
//   - Opening the queue (start, or a new leader) replays the log.
//   - Records name messages by ENQ offset (the queue's seq); the delivery
//     ids channels get are the leader's, tagged with its epoch.
//   - The log is compacted below the first live offset every
//     quorumCompactEvery settlements.

// quorumConfirmTimeout is how long a publish waits for its commit before
// it is nacked (rabbit_fifo_client's command timeout).
var quorumConfirmTimeout = 30 * time.Second

// testHookQuorumHoldCommits, set by a test, keeps commit reports from
// reaching quorum queues, so their publishes stay uncommitted.
var testHookQuorumHoldCommits atomic.Bool

// testHookQuorumDropDelivered, set by a test, keeps DELIVERED, RETURN and
// SETTLE records out of the log: a leader that dies right after a
// delivery, before the record reached any mirror.
var testHookQuorumDropDelivered atomic.Bool

// quorumSegmentSize is the segment size of a quorum queue's log: the log
// reclaims whole segments below the first live message.
var quorumSegmentSize int64 = 64 << 20

// quorumEpochShift places a leader's epoch in its delivery ids.
const quorumEpochShift = 40

// quorumCompactEvery is how many settlements pass between compactions.
const quorumCompactEvery = 4096

// quorumKind is a quorum queue (x-queue-type: quorum).
type quorumKind struct{}

func (quorumKind) newHandle(q *Queue) queueHandle {
	q.journal = &quorumJournal{}
	return &quorumQueue{classicQueue: classicQueue{q}, rejected: make(map[uint64]bool)}
}

func (quorumKind) checkDeclare(vh *Vhost, name string, m *amqp.QueueDeclare, _ *queueArgs) *amqp.Error {
	return checkQuorumDeclare(vh, name, m)
}

// policyArgs: the policy keys that set arguments (policyKeys) are all ones
// a quorum queue takes, so the classic merge applies.
func (quorumKind) policyArgs(vh *Vhost, name string, declared amqp.Table, qa queueArgs, def map[string]any) queueArgs {
	return quorumPolicyArgs(name, vh.name, declared, def, qa)
}

// quorumPolicyArgs adds to the classic merge the policy's
// dead-letter-strategy, which the declared argument overrides
// (rabbit_quorum_queue:dead_letter_handler, queueArgHasPrecedence).
func quorumPolicyArgs(name, vhost string, declared amqp.Table, def map[string]any, qa queueArgs) queueArgs {
	qa = effectiveQueueArgs(name, vhost, declared, def, qa)
	s, ok := def["dead-letter-strategy"].(string)
	if _, own := declared["x-dead-letter-strategy"]; own || !ok || qa.quorum == nil {
		return qa
	}
	qq := *qa.quorum
	qq.atLeastOnceAsked = s == dlStrategyAtLeastOnce
	qa.quorum = &qq
	return qa
}

// quorumJournal is what the classic code did to a quorum queue's messages
// since the handle last wrote it to the log. Guarded by Queue.mu.
type quorumJournal struct {
	settle, ret, delivered []uint64
	settled                int // settlements since the last compaction
	// discard are the messages dead-lettered at least once since the last
	// flush; dlx holds them until their targets confirm (quorum_dlx.go),
	// nil unless that is the queue's effective strategy.
	discard []quorumDiscard
	dlx     *quorumDLX
}

func (j *quorumJournal) note(op byte, id uint64) {
	switch op {
	case qrSettle:
		j.settle = append(j.settle, id)
		j.settled++
	case qrReturn:
		j.ret = append(j.ret, id)
	case qrDelivered:
		j.delivered = append(j.delivered, id)
	}
}

// quorumQueue is a quorum queue's handle on a node holding a replica of it.
// Its embedded classicQueue serves what a quorum queue does as a classic
// one does; the methods below add the log.
type quorumQueue struct {
	classicQueue

	mu    sync.Mutex // guards the fields below; never held with Queue.mu
	place replica.Placement
	log   replica.Log
	r     replica.Replica // nil before openFiles and after close
	dir   string          // the log's directory, "" for a memory log
	// committed is the highest offset reported committed.
	committed uint64
	// pend are the ENQ records appended and not yet committed, by offset.
	pend []quorumPending
	// waits are the confirms waiting for a commit, by arrival.
	waits []quorumWait
	timer *time.Timer // nacks waits past quorumConfirmTimeout
	// rejected are committed ENQ offsets the queue refused at commit
	// (length limit, duplicate, deleted), whose confirm is a nack.
	rejected map[uint64]bool
	closed   bool
	// fwd is the proxy to the leader while another node leads the queue
	// (quorum_roles.go); its operations go there.
	fwd *remoteQueue
	// appended is the offset of the last record this node appended.
	appended uint64
	// starting is set while a cluster node that started as this queue's
	// leader waits to learn whether it still is (quorum_roles.go).
	starting bool
	// deposed is set when this node's leadership ended, until it leads
	// again; deposedAt is what it had committed as leader then. Its
	// appends above that were truncated or may have been: the commits its
	// replica reports from then on are the new leader's records at those
	// offsets, never a confirm for its own (quorum_roles.go).
	deposed   bool
	deposedAt uint64
	// mirrored: a classic queue mirrored by an ha policy (mirror.go), with
	// the classic type's name and delete rules. Fixed at creation.
	mirrored bool
}

type quorumPending struct {
	off uint64
	m   *Message
	ttl int64
}

type quorumWait struct {
	off uint64
	c   completion
	at  time.Time
}

// replicaKey names a queue to the replica manager, the same on every node.
func replicaKey(vhost, name string) string { return vhost + "\x00" + name }

// standalonePlacement is the placement of a queue with one replica, on node.
func standalonePlacement(node string) replica.Placement {
	return replica.Placement{Replicas: []string{node}, Leader: node, Epoch: 1, ISR: []string{node}, MinISR: 1, Version: 1}
}

// takesStoredCopy is false: the message's copy is the log's ENQ record.
func (*quorumQueue) takesStoredCopy(*Message) bool { return false }

func (h *quorumQueue) typeName() string {
	if h.mirrored {
		return "classic"
	}
	return "quorum"
}

// hasFiles: a quorum queue always has its log (in memory without a data
// directory).
func (*quorumQueue) hasFiles() bool { return true }

// enqueue appends m's ENQ record; the message enters the queue, and the
// confirm completes, at its commit.
func (h *quorumQueue) enqueue(m *Message, ttl int64, stored bool, loc msgstore.Loc) accepted {
	if f := h.forward(); f != nil {
		return f.enqueue(m, ttl, stored, loc)
	}
	q := h.q
	if h.atLimit(m) {
		return accepted{res: enqueueRejected}
	}
	rec := encodeQuorumEnq(m, nowMillis(), ttl)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fwd != nil || h.starting {
		// The leader moved while the record was encoded, or is not known
		// yet: unconfirmed.
		return accepted{res: enqueued, failed: true}
	}
	if h.r == nil {
		return accepted{res: enqueueGone}
	}
	off, err := h.r.Append(rec)
	h.appended = max(h.appended, off)
	if err != nil {
		q.vhost.log.Warn("quorum queue append refused", "queue", q.name, "err", err)
		return accepted{res: enqueued, failed: true}
	}
	h.pend = append(h.pend, quorumPending{off: off, m: m, ttl: ttl})
	return accepted{res: enqueued, wait: h, token: off}
}

// atLimit reports whether the queue, counting the publishes not yet
// committed, is at its length limit (reject-publish refuses m then).
func (h *quorumQueue) atLimit(m *Message) bool {
	// q.qa is replaced by a policy change under q.mu: read it there.
	q := h.q
	q.mu.Lock()
	o := q.qa.overflow
	limited := q.qa.maxLength >= 0 || q.qa.maxLengthBytes >= 0
	q.mu.Unlock()
	if !limited || (o != overflowRejectPublish && o != overflowRejectPublishDLX) {
		return false
	}
	h.mu.Lock()
	n, bytes := len(h.pend), 0
	for _, p := range h.pend {
		bytes += p.m.size()
	}
	h.mu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	dn, db := q.dlxLenLocked()
	return (q.qa.maxLength >= 0 && int64(q.lengthLocked()+dn+n) >= q.qa.maxLength) ||
		(q.qa.maxLengthBytes >= 0 && int64(q.ready.bytes+db+bytes+m.size()) > q.qa.maxLengthBytes)
}

// whenDurable completes c once the ENQ at off is committed: at once if it
// is, else from Committed, or as a nack after quorumConfirmTimeout.
func (h *quorumQueue) whenDurable(off uint64, c completion) {
	h.mu.Lock()
	if h.deposed && off > h.deposedAt {
		// Appended by a leadership that ended before its commit.
		h.mu.Unlock()
		c.done(false)
		return
	}
	if off <= h.committed {
		nack := h.rejected[off]
		delete(h.rejected, off)
		h.mu.Unlock()
		c.done(!nack)
		return
	}
	if h.closed {
		h.mu.Unlock()
		c.done(false)
		return
	}
	h.waits = append(h.waits, quorumWait{off: off, c: c, at: time.Now()})
	if h.timer == nil {
		h.timer = time.AfterFunc(quorumConfirmTimeout, h.expireWaits)
	}
	h.mu.Unlock()
}

// expireWaits nacks the confirms that waited longer than
// quorumConfirmTimeout and re-arms the timer for the next.
func (h *quorumQueue) expireWaits() {
	now := time.Now()
	var late []completion
	h.mu.Lock()
	keep := h.waits[:0]
	for _, w := range h.waits {
		if now.Sub(w.at) >= quorumConfirmTimeout {
			late = append(late, w.c)
		} else {
			keep = append(keep, w)
		}
	}
	clear(h.waits[len(keep):])
	h.waits = keep
	h.timer = nil
	if len(keep) > 0 && !h.closed {
		h.timer = time.AfterFunc(quorumConfirmTimeout-now.Sub(keep[0].at), h.expireWaits)
	}
	h.mu.Unlock()
	if len(late) > 0 {
		h.q.vhost.log.Warn("quorum queue publishes not committed in time, nacked", "queue", h.q.name, "count", len(late))
		completeAll(late, false)
	}
}

// Committed is replica.Handler: the records up to hw are committed. The
// ENQs among them enter the queue in offset order, then their confirms
// complete. It runs on the replica's goroutine.
func (h *quorumQueue) Committed(hw uint64) {
	if testHookQuorumHoldCommits.Load() {
		return
	}
	h.mu.Lock()
	if hw <= h.committed {
		h.mu.Unlock()
		return
	}
	h.committed = hw
	n := 0
	for n < len(h.pend) && h.pend[n].off <= hw {
		n++
	}
	msgs := slices.Clone(h.pend[:n])
	h.pend = slices.Delete(h.pend, 0, n)
	h.mu.Unlock()
	if hook := testHookQuorumCommitted.Load(); hook != nil && len(msgs) > 0 {
		(*hook)(h.q.vhost.srv.cfg.NodeName, h.q.name)
	}

	var refused []uint64
	for _, p := range msgs {
		if res := h.q.enqueueAt(p.m, p.ttl, p.off); res != enqueued && res != enqueueDuplicate {
			refused = append(refused, p.off)
		} else if res == enqueueDuplicate {
			h.q.noteSettled(p.off) // confirmed, but not kept
		}
	}
	for _, off := range refused {
		h.q.noteSettled(off)
	}

	var ok, nack []completion
	h.mu.Lock()
	for _, off := range refused {
		h.rejected[off] = true
	}
	keep := h.waits[:0]
	now := time.Now()
	for _, w := range h.waits {
		switch {
		case w.off > hw:
			keep = append(keep, w)
		case h.rejected[w.off]:
			delete(h.rejected, w.off)
			nack = append(nack, w.c)
		default:
			ok = append(ok, w.c)
			h.q.vhost.srv.commitLatency.observe(now.Sub(w.at))
		}
	}
	clear(h.waits[len(keep):])
	h.waits = keep
	if len(h.rejected) > 4096 {
		// A publisher without confirms never asks: bound what is kept.
		clear(h.rejected)
	}
	h.mu.Unlock()
	completeAll(ok, true)
	completeAll(nack, false)
	h.flush()
}

// Failed is replica.FailureHandler: the log failed, so nothing appended
// since the last commit will be committed here; their confirms are nacks.
func (h *quorumQueue) Failed(err error) {
	h.q.vhost.log.Error("quorum queue log failed; publishes are nacked", "queue", h.q.name, "err", err)
	h.mu.Lock()
	waits := h.waits
	h.waits, h.pend = nil, nil
	h.mu.Unlock()
	cs := make([]completion, len(waits))
	for i, w := range waits {
		cs[i] = w.c
	}
	completeAll(cs, false)
}

// flush appends what the journal collected. With enough settlements
// since the last time it also lets the log reclaim what lies below the
// first live message.
func (h *quorumQueue) flush() {
	q := h.q
	q.mu.Lock()
	j := q.journal
	settle, ret, delivered, discard := j.settle, j.ret, j.delivered, j.discard
	j.settle, j.ret, j.delivered, j.discard = nil, nil, nil, nil
	if testHookQuorumDropDelivered.Load() {
		// As if the node died before these records left it (its
		// shutdown's returns included).
		settle, ret, delivered, discard = nil, nil, nil, nil
	}
	compact := uint64(0)
	if j.settled >= quorumCompactEvery {
		j.settled = 0
		compact = q.firstLiveLocked()
	}
	q.mu.Unlock()
	var recs [][]byte
	if len(delivered) > 0 {
		recs = append(recs, encodeQuorumIDs(qrDelivered, delivered))
	}
	if len(ret) > 0 {
		recs = append(recs, encodeQuorumIDs(qrReturn, ret))
	}
	if len(discard) > 0 {
		recs = append(recs, encodeQuorumDiscard(discard))
	}
	if len(settle) > 0 {
		recs = append(recs, encodeQuorumIDs(qrSettle, settle))
	}
	if len(recs) == 0 && compact == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.r == nil {
		return
	}
	if len(recs) > 0 {
		if last, err := h.r.Append(recs...); err == nil {
			h.appended = max(h.appended, last)
		} else if !errors.Is(err, replica.ErrClosed) {
			q.vhost.log.Error("quorum queue: recording settlements failed", "queue", q.name, "err", err)
		}
	}
	if compact != 0 {
		if len(h.pend) > 0 {
			compact = min(compact, h.pend[0].off)
		}
		compact = min(compact, h.committed+1)
		h.r.Compact(compact)
	}
}

// firstLiveLocked is the lowest offset the queue still needs: its oldest
// ready or unacknowledged message, or the one after the last it took.
func (q *Queue) firstLiveLocked() uint64 {
	first := q.nextSeq + 1
	if l := q.ready.front(); l != nil {
		first = min(first, l.front().seq)
	}
	q.pending.each(func(m *queued) { first = min(first, m.seq) })
	if x := q.journal.dlx; x != nil {
		for id := range x.held {
			first = min(first, id)
		}
	}
	return first
}

// enqueueAt is enqueue for a quorum queue's committed message: its seq
// is its ENQ offset, which the log's records name it by.
func (q *Queue) enqueueAt(m *Message, ttl int64, off uint64) enqueueResult {
	var clk lazyClock
	q.mu.Lock()
	if off > q.nextSeq {
		q.nextSeq = off - 1
	}
	res := q.enqueueLocked(m, ttl, false, msgstore.Loc{}, &clk)
	dead := q.takeDeadLocked()
	q.mu.Unlock()
	q.publishDeadLetters(dead)
	return res
}

// noteSettled journals an ENQ the queue did not keep.
func (q *Queue) noteSettled(off uint64) {
	q.mu.Lock()
	q.journal.note(qrSettle, off)
	q.mu.Unlock()
}

// The operations that change messages append the journal afterwards;
// while another node leads, they go to it.

func (h *quorumQueue) consume(c *consumer, ok func()) *amqp.Error {
	if f := h.forward(); f != nil {
		return f.consume(c, ok)
	}
	if err := h.startingRefusal(methodBasicConsume); err != nil {
		return err
	}
	err := h.q.addConsumer(c, ok)
	h.flush()
	return err
}

func (h *quorumQueue) cancel(c *consumer) bool {
	if f := h.forward(); f != nil {
		return f.cancel(c)
	}
	gone := h.q.removeConsumer(c)
	h.flush()
	return gone
}

func (h *quorumQueue) redispatch() {
	if f := h.forward(); f != nil {
		f.redispatch()
		return
	}
	h.q.dispatch()
	h.flush()
}

func (h *quorumQueue) get(max int, noAck bool, each func(outgoing, int)) (int, *amqp.Error) {
	if f := h.forward(); f != nil {
		return f.get(max, noAck, each)
	}
	if err := h.startingRefusal(methodBasicGet); err != nil {
		return 0, err
	}
	n := h.q.get(max, noAck, each)
	h.flush()
	return n, nil
}

// settle goes to the leader. A delivery of an earlier leadership (its id
// carries that epoch) settles nothing on a new leader: the message comes
// back, redelivered, as the new leader rebuilt it.
func (h *quorumQueue) settle(ds []delivery, kind settleKind) {
	if f := h.forward(); f != nil {
		f.settle(ds, kind)
		return
	}
	h.classicQueue.settle(ds, kind)
	h.flush()
}

func (h *quorumQueue) purge(method uint32) (int, *amqp.Error) {
	if f := h.forward(); f != nil {
		return f.purge(method)
	}
	if err := h.startingRefusal(method); err != nil {
		return 0, err
	}
	n := h.q.purge()
	h.flush()
	return n, nil
}

func (h *quorumQueue) deletable(ifUnused, ifEmpty bool) *amqp.Error {
	if h.mirrored {
		ready, consumers := h.counts() // the leader's, through the proxy elsewhere
		return classicDeletable(h.q, ready, consumers, ifUnused, ifEmpty)
	}
	return quorumDeletable(h.q, ifUnused, ifEmpty)
}

func (h *quorumQueue) counts() (int, int) {
	if f := h.forward(); f != nil {
		return f.counts()
	}
	return h.q.counts()
}

func (h *quorumQueue) consumerInfos() []ConsumerInfo {
	if f := h.forward(); f != nil {
		return f.consumerInfos()
	}
	return h.q.localConsumers()
}

func (h *quorumQueue) applyPolicy(def map[string]any) {
	q := h.q
	q.mu.Lock()
	current := q.qa
	q.mu.Unlock()
	q.reconfigure(quorumPolicyArgs(q.name, q.vhost.name, q.declaredArgs(), def, current))
	h.setDLStrategy()
}

// delete stops the queue, its replica and its log, and removes the log.
func (h *quorumQueue) delete() ([]*consumer, int) {
	cs, n := h.q.markDeleted()
	if f := h.forward(); f != nil {
		fcs, fn := f.delete() // this node's consumers, served by the leader
		cs, n = append(cs, fcs...), n+fn
	}
	dir := h.dir
	if err := h.close(); err != nil {
		h.q.vhost.log.Error("closing a deleted quorum queue's log", "queue", h.q.name, "err", err)
	}
	if dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			h.q.vhost.log.Error("removing a deleted quorum queue's log", "queue", h.q.name, "err", err)
		}
	}
	return cs, n
}

// drain appends what the journal holds and waits, up to d, until every
// record this node appended is durable in its log: a graceful stop then
// keeps the settlements clients made (the replica drops what it has not
// written when it closes).
func (h *quorumQueue) drain(d time.Duration) {
	h.flush()
	deadline := time.Now().Add(d)
	for {
		h.mu.Lock()
		r, want := h.r, h.appended
		h.mu.Unlock()
		if r == nil || r.Status().DurableOffset >= want || time.Now().After(deadline) {
			return
		}
		time.Sleep(2 * time.Millisecond) // bounded by d; shutdown only
	}
}

// close stops the replica and closes the log (shutdown, delete); pending
// confirms are nacked.
func (h *quorumQueue) close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.q.mu.Lock()
	if x := h.q.journal.dlx; x != nil {
		x.stopLocked()
	}
	h.q.mu.Unlock()
	r, l, waits := h.r, h.log, h.waits
	h.r, h.log, h.waits, h.pend = nil, nil, nil, nil
	if h.timer != nil {
		h.timer.Stop()
	}
	h.mu.Unlock()
	var err error
	if r != nil {
		err = r.Close()
	}
	if l != nil {
		err = errors.Join(err, l.Close())
	}
	cs := make([]completion, len(waits))
	for i, w := range waits {
		cs[i] = w.c
	}
	completeAll(cs, false)
	return err
}

// openFiles opens the queue's log, rebuilds the queue from it and starts
// its replica. srv is nil for a declaration through the management API.
func (h *quorumQueue) openFiles(srv *Server) error {
	q := h.q
	vh := q.vhost
	if srv == nil {
		srv = vh.srv
	}
	if srv == nil || srv.replicas == nil {
		return errors.New("quorum queue: the server has no replica manager")
	}
	self := srv.cfg.NodeName
	h.mu.Lock()
	if len(h.place.Replicas) == 0 {
		h.place = standalonePlacement(self)
	}
	p := h.place
	h.mu.Unlock()
	if !isMember(p, self) {
		h.setForward(srv, p.Leader)
		if vh.storage != nil {
			// A mirror removed while this node was down: its log is void.
			if err := os.RemoveAll(vh.storage.quorumDir(q.name)); err != nil {
				vh.log.Error("removing a replica's log this node no longer holds", "queue", q.name, "err", err)
			}
		}
		return nil
	}
	l, dir, err := openQuorumLog(vh, q.name)
	if err != nil {
		return err
	}
	h.mu.Lock()
	starting := h.starting
	h.mu.Unlock()
	switch {
	case p.Leader == self && starting:
		// Recovered on a cluster node: rebuilt once it knows it still
		// leads (quorum_roles.go).
	case p.Leader == self:
		// Only a leader applies the log; a mirror's queue stays empty.
		ms, err := replayQuorum(l)
		if err != nil {
			l.Close()
			return fmt.Errorf("quorum queue %q: %w", q.name, err)
		}
		q.publishDeadLetters(q.restoreQuorum(ms, p.Epoch, false))
	default:
		h.setForward(srv, p.Leader)
	}
	h.mu.Lock()
	h.log, h.dir, h.committed = l, dir, l.LastOffset()
	h.mu.Unlock()
	r, err := srv.replicas.Open(replicaKey(vh.name, q.name), p, l, h)
	if err != nil {
		h.mu.Lock()
		h.log = nil
		h.mu.Unlock()
		l.Close()
		return fmt.Errorf("quorum queue %q: %w", q.name, err)
	}
	h.mu.Lock()
	h.r = r
	h.mu.Unlock()
	h.setDLStrategy()
	return nil
}

// openQuorumLog opens (or creates) a quorum queue's log: a file log in the
// vhost's storage, or a memory log without a data directory.
func openQuorumLog(vh *Vhost, name string) (replica.Log, string, error) {
	if vh.storage == nil {
		return replica.NewMemLog(), "", nil
	}
	dir := vh.storage.quorumDir(name)
	if err := makeNamedDir(dir, name); err != nil {
		return nil, "", fmt.Errorf("quorum queue %q: %w", name, err)
	}
	cfg := msgstore.DefaultConfig(filepath.Join(dir, "replica"))
	cfg.Logger = vh.log
	cfg.SegmentSize = quorumSegmentSize
	fl, err := replica.OpenFileLog(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("quorum queue %q: %w", name, err)
	}
	return fl, dir, nil
}

// restoreQuorum puts the live messages of a replayed log into the queue
// and returns those that expired meanwhile, for the caller to dead-letter
// once it holds no lock:
// redelivered when they were delivered or returned, a consumer's
// delivery that was still outstanding counted as a return (the consumer
// was lost with the node, as RabbitMQ counts a lost consumer's messages).
//
// elected (a leader taking over, from its own log or a mirror's) marks
// every message redelivered: deliveries are sent before their DELIVERED
// record is committed, so the log may not show one the last leader made,
// and AMQP's redelivered means "may have been delivered before". Their
// x-delivery-count stays as the log says.
func (q *Queue) restoreQuorum(ms []*replayed, epoch uint64, elected bool) []deadLetter {
	var clk lazyClock
	q.mu.Lock()
	// Delivery ids carry the leader's epoch in their high bits: a
	// settlement of another leadership's delivery (a client acking after
	// a failover) finds nothing here instead of another message.
	q.pending.next = max(q.pending.next, epoch<<quorumEpochShift)
	j := q.journal
	if s, _ := quorumDLStrategy(&q.qa); s == dlStrategyAtLeastOnce && j.dlx == nil {
		j.dlx = newQuorumDLX()
	}
	for _, r := range ms {
		m := &Message{Exchange: r.enq.exchange, RoutingKey: r.enq.key,
			RawProps: slices.Clone(r.enq.props), Body: slices.Clone(r.enq.body), ttl: r.enq.ttl}
		qm := queued{msg: m, seq: r.off, deliveries: r.returns, redelivered: elected || r.returns > 0 || r.seen}
		if r.out {
			qm.deliveries++
			qm.redelivered = true
		}
		q.nextSeq = max(q.nextSeq, r.off)
		if r.discarded != "" {
			// Dead-lettered at least once and not confirmed: the new
			// leader publishes it again, or at most once if the strategy
			// changed meanwhile.
			d := deadLetter{m: qm, reason: r.discarded}
			if j.dlx != nil {
				j.dlx.addLocked(d, true)
			} else {
				j.note(qrSettle, r.off)
				q.dead = append(q.dead, d)
			}
			continue
		}
		t := q.qa.messageTTL
		if r.enq.ttl >= 0 && (t < 0 || r.enq.ttl < t) {
			t = r.enq.ttl
		}
		if t >= 0 {
			qm.expiresAt = r.enq.ts + t
			q.expiring = true
		}
		q.ready.push(qm)
		q.nextSeq = max(q.nextSeq, r.off)
	}
	q.expireLocked(&clk)
	dead := q.takeDeadLocked()
	q.mu.Unlock()
	return dead
}

// quorumDir is the directory of a quorum queue's log.
func (v *vhostStorage) quorumDir(queue string) string {
	return filepath.Join(v.dir, "quorum", nameDir(queue))
}

// info adds the replicas to the queue's snapshot, in RabbitMQ's terms:
// its leader, its members and those of them online.
func (h *quorumQueue) info() QueueInfo { return h.status().QueueInfo }

func (h *quorumQueue) status() QueueStatus {
	var st QueueStatus
	if f := h.forward(); f != nil {
		st = f.status()
	} else {
		st = h.q.localStatus()
	}
	h.addReplicas(&st.QueueInfo)
	return st
}

func (h *quorumQueue) addReplicas(info *QueueInfo) {
	h.mu.Lock()
	p := h.place
	h.mu.Unlock()
	info.Leader = p.Leader
	info.Members = slices.Clone(p.Replicas)
	info.Online = h.q.vhost.srv.onlineNodes(p.Replicas)
	if h.mirrored {
		info.Mirrored = true
		info.SyncedMirrors = []string{}
		for _, n := range p.ISR {
			if n != p.Leader {
				info.SyncedMirrors = append(info.SyncedMirrors, n)
			}
		}
	}
	if h.mirrored {
		return // a classic queue has no dead-letter strategy
	}
	q := h.q
	q.mu.Lock()
	info.DeadLetterStrategy, _ = quorumDLStrategy(&q.qa)
	if info.DLXMessages == 0 {
		// A forwarded status carries the leader's figures.
		info.DLXMessages, info.DLXBytes = q.dlxLenLocked()
	}
	q.mu.Unlock()
}
