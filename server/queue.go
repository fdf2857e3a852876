package server

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/msgstore"
	"github.com/warrenmq/warren/queueindex"
)

// Queue is a message queue. Its state is guarded by mu; deliveries are written
// to consumers' connections while mu is held so a queue's order is the wire order
// (writing only appends to a memory buffer; no socket I/O happens under mu).
//
// Lock order: vhost.mu → Queue.mu → channel.umu → outbox.mu (see LOCKS.md).
// Dead letters are collected under mu and published after it is released.
type Queue struct {
	name       string
	vhost      *Vhost
	durable    bool
	exclusive  bool
	autoDelete bool
	args       amqp.Table
	// h is the queue's handle (queue_handle.go), chosen by its kind at
	// declare and never replaced, so it is read without a lock.
	h queueHandle
	// qa are the effective arguments: declared, merged with policies.
	// Replaced by reconfigure under mu, and read under mu.
	qa    queueArgs
	owner *conn // the declaring connection of an exclusive queue, when it is on this node
	// ownerRef names the owner of an exclusive queue (DeclareQueue.Owner).
	ownerRef *OwnerRef
	// instance tells this queue from an earlier or later one of the same
	// name (DeclareQueue.Instance); "" on a standalone node.
	instance string
	// home is the node holding the queue's data when it is not this one
	// (a cluster's queue declared on another node); "" is this node. Set
	// before the queue is installed, never changed.
	home    string
	created time.Time
	// quorum is set for a quorum queue (fixed at declare, read without a
	// lock by the channel's consume checks).
	quorum bool
	// replicated is set for a queue kept in a replicated log: a quorum
	// queue, or a classic queue mirrored by an ha-* policy (mirror.go).
	// Every cluster node holds its handle (a replica or a proxy).
	replicated bool
	// journal collects, under mu, what a quorum queue's log must record of
	// the changes the classic code makes (quorum_queue.go); nil otherwise.
	journal *quorumJournal

	mu      sync.Mutex
	ready   readySet
	nextSeq uint64
	// consumers are ordered by priority, highest first, then by arrival.
	consumers []*consumer
	rr        int // round-robin position within a priority group
	// exclusiveConsumer is set while a consumer holds exclusive access.
	exclusiveConsumer *consumer
	hadConsumer       bool
	// use is the consumers' capacity over time (consumer_use.go).
	use consumerUse
	// pending are the deliveries not yet settled, by delivery id, so a
	// channel settles by id and holds nothing of the entry.
	pending     unsettledSet
	unacked     tally // the messages of pending
	deleted     bool
	dead        []deadLetter // collected under mu, published after unlock
	dedup       *dedupCache
	ttlTimer    *time.Timer
	ttlAt       int64 // unix ms the TTL timer fires at; 0 = not armed
	expiryTimer *time.Timer
	lastUsed    time.Time

	// Disk state (see queue_disk.go). A durable queue's index is in the
	// vhost's store; a transient queue gets one in the transient store only
	// once it pages. index is nil without a data directory.
	store      *vhostStorage
	index      *queueindex.Index
	dirty      dirtyMark // in store's dirty list (persist.go)
	paged      int       // ready messages only on disk, all newer than the head
	pagedBytes int       // their stored size
	// pagedPersistent and pagedPersistentBytes are the persistent ones among
	// them; after a restart every recovered entry counts until it is read.
	pagedPersistent, pagedPersistentBytes int
	pageFrom                              uint64 // index sequence id to read back from
	recoveredNext                         uint64 // index ids below this predate the last start
	diskGone                              bool   // the index was closed or deleted
	// indexDown is set (under mu) while the index is failed or closed after
	// a write error; the committer reopens it (queue_reopen.go). Atomic
	// because the committer reads it without mu.
	indexDown atomic.Bool
	reopen    reopenState
	// expiring is set while the queue may hold messages with an expiry (it is
	// cleared when the queue empties), so plain queues skip the TTL checks.
	expiring bool
	// paging mirrors paged > 0 for publishers deciding, without the lock,
	// whether a transient message must be stored to keep the queue's order.
	paging atomic.Bool
	// bindings are the exchanges binding this queue, for removal on delete.
	// Guarded by vhost.mu, not mu.
	bindings map[bindingKey]struct{}

	stats queueStats

	// consumerTimeout mirrors qa.consumerTimeout (ns) for
	// conn.checkConsumerTimeouts, which holds channel.umu and so cannot take mu.
	consumerTimeout atomic.Int64
}

// queueStats are counters read by the management API without locking the queue.
type queueStats struct {
	published   counter
	delivered   counter
	redelivered counter
	acked       counter
	got         counter
	deadLetterd counter
	expired     counter
	dropped     counter
}

// bindingKey identifies one binding of a queue or exchange, for cleanup.
type bindingKey struct {
	source *Exchange
	key    string
	args   string // canonical encoding of the arguments table
}

// consumer is one basic.consume subscription: what the subscriber asked
// for, and where its deliveries go.
type consumer struct {
	tag       string
	sink      consumerSink // the subscriber: a channel, or a test's fake
	q         queueHandle  // the queue it consumes from
	noAck     bool
	exclusive bool
	prefetch  uint16 // per-consumer limit, 0 = unlimited
	priority  int64  // x-priority
	args      amqp.Table
	unacked   int // guarded by q.mu
}

func newQueue(vh *Vhost, name string, durable, exclusive, autoDelete bool, args amqp.Table, qa queueArgs, owner *conn) *Queue {
	q := &Queue{
		name: name, vhost: vh, durable: durable, exclusive: exclusive, autoDelete: autoDelete,
		args: args, qa: qa, owner: owner, created: time.Now(), lastUsed: time.Now(),
		bindings: make(map[bindingKey]struct{}), ready: newReadySet(qa.maxPriority),
	}
	q.use = newConsumerUse(q.created)
	q.quorum = qa.quorum != nil
	q.replicated = q.quorum || qa.mirrored
	q.h = kindOf(&qa).newHandle(q)
	q.consumerTimeout.Store(int64(qa.consumerTimeout))
	if qa.dedup {
		q.dedup = newDedupCache(qa.dedupCacheSize, qa.dedupCacheTTL)
	}
	if qa.expires > 0 {
		q.expiryTimer = time.AfterFunc(time.Duration(qa.expires)*time.Millisecond, q.checkUnused)
	}
	return q
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// enqueueResult says what a queue did with a published message.
type enqueueResult int

const (
	enqueued enqueueResult = iota
	enqueueRejected
	enqueueDuplicate
	enqueueGone
)

func nowMillis() int64 { return time.Now().UnixMilli() }

// lazyClock reads the clock at most once, and only if asked: most messages
// have no expiry, so the hot path never pays for time.Now.
type lazyClock struct{ t int64 }

func (c *lazyClock) now() int64 {
	if c.t == 0 {
		c.t = nowMillis()
	}
	return c.t
}

// enqueue appends m, applies the length limit and delivers what consumers can
// take. ttl is the message's own expiration in ms, or -1. When stored is
// set, m is in the vhost's message store at loc with one reference held for
// this queue, which the queue records in its index (or releases).
func (q *Queue) enqueue(m *Message, ttl int64, stored bool, loc msgstore.Loc) enqueueResult {
	var clk lazyClock
	q.mu.Lock()
	res := q.enqueueLocked(m, ttl, stored, loc, &clk)
	dead := q.takeDeadLocked()
	q.mu.Unlock()
	q.publishDeadLetters(dead)
	return res
}

// enqueueLocked does enqueue's work; whenever it does not keep a stored
// message it releases the reference it was given.
func (q *Queue) enqueueLocked(m *Message, ttl int64, stored bool, loc msgstore.Loc, clk *lazyClock) enqueueResult {
	refuse := func(r enqueueResult) enqueueResult {
		if stored {
			q.store.release(loc)
		}
		return r
	}
	if q.deleted {
		return refuse(enqueueGone)
	}
	if !stored && ttl < 0 && q.ready.len() == 0 && len(q.consumers) > 0 && q.plainLocked() {
		// Fast path: nothing is waiting and a consumer can take it now, so
		// hand it over without queueing it.
		c := q.nextConsumerLocked()
		if c == nil {
			q.use.block(time.Now())
		} else {
			q.nextSeq++
			q.stats.published.inc()
			q.handOverLocked(c, queued{msg: m, seq: q.nextSeq, persistent: m.Persistent()})
			return enqueued
		}
	}
	if q.qa.overflow != overflowDropHead && q.atLimitLocked(m.size()) {
		if q.qa.overflow == overflowRejectPublishDLX {
			q.dead = append(q.dead, deadLetter{m: queued{msg: m}, reason: reasonMaxLen})
		}
		return refuse(enqueueRejected)
	}
	if q.dedup != nil && q.dedup.seenBefore(m, time.Now()) {
		return refuse(enqueueDuplicate)
	}
	q.nextSeq++
	qm := queued{msg: m, seq: q.nextSeq, priority: q.priorityOf(m), persistent: m.Persistent()}
	if exp := q.expiryFor(ttl, clk); exp > 0 {
		qm.expiresAt = exp
		q.expiring = true
	}
	if !stored && (q.paged > 0 || (!isDurable(q) && q.qa.maxPriority == 0 && q.headFullLocked() && q.startPagingLocked())) {
		// The queue pages to disk: a message that was not stored must be now,
		// or it would overtake the older messages waiting on disk.
		l, err := q.store.put(m, 1)
		if err != nil {
			q.vhost.log.Error("storing a message for a paging queue failed", "queue", q.name, "err", err)
			return enqueueRejected
		}
		stored, loc = true, l
	}
	if stored {
		if !q.storedEnqueueLocked(qm, loc) {
			return enqueueRejected
		}
	} else {
		q.ready.push(qm)
	}
	q.stats.published.inc()
	q.dispatchLocked(clk)
	q.enforceLimitLocked()
	q.expireLocked(clk)
	return enqueued
}

// length is the number of ready messages, in memory and on disk.
func (q *Queue) lengthLocked() int { return q.ready.len() + q.paged }

// priorityOf caps a message's priority at the queue's maximum.
func (q *Queue) priorityOf(m *Message) uint8 {
	if q.qa.maxPriority == 0 {
		return 0
	}
	p, _ := amqp.PeekPriority(m.RawProps)
	return min(p, q.qa.maxPriority)
}

// expiryFor returns the absolute expiry (unix ms) for a message with its own
// TTL ttl (or -1) entering now, or 0 when it never expires. A TTL of 0 expires
// at once unless a consumer takes the message immediately.
func (q *Queue) expiryFor(ttl int64, clk *lazyClock) int64 {
	t := q.qa.messageTTL
	if ttl >= 0 && (t < 0 || ttl < t) {
		t = ttl
	}
	if t < 0 {
		return 0
	}
	return clk.now() + t
}

// atLimitLocked reports whether one more message of size bytes would exceed
// the queue's length limits.
func (q *Queue) atLimitLocked(size int) bool {
	dn, db := q.dlxLenLocked() // a quorum queue's dead letters held at least once count
	return (q.qa.maxLength >= 0 && int64(q.lengthLocked()+dn) >= q.qa.maxLength) ||
		(q.qa.maxLengthBytes >= 0 && int64(q.ready.bytes+q.pagedBytes+db+size) > q.qa.maxLengthBytes)
}

// enforceLimitLocked drops the oldest messages (dead-lettered as maxlen)
// while the queue is over a length limit.
func (q *Queue) enforceLimitLocked() {
	if q.qa.maxLength < 0 && q.qa.maxLengthBytes < 0 {
		return
	}
	for q.lengthLocked() > 0 && ((q.qa.maxLength >= 0 && int64(q.lengthLocked()) > q.qa.maxLength) ||
		(q.qa.maxLengthBytes >= 0 && int64(q.ready.bytes+q.pagedBytes) > q.qa.maxLengthBytes)) {
		if q.ready.len() == 0 {
			q.pageInLocked()
			if q.ready.len() == 0 {
				return
			}
		}
		m := q.ready.popOldest()
		q.forgetLocked(&m)
		q.stats.dropped.inc()
		q.dead = append(q.dead, deadLetter{m: m, reason: reasonMaxLen})
	}
}

// expireLocked drops expired messages at the heads of the queue (RabbitMQ
// expires only from the head) and arms the timer for the next expiry.
func (q *Queue) expireLocked(clk *lazyClock) {
	if !q.expiring {
		return // no message in the queue has an expiry: nothing to look at
	}
	if q.ready.len() == 0 {
		q.expiring = false
	}
	for i := range q.ready.levels {
		l := &q.ready.levels[i]
		for l.len() > 0 && l.front().expiresAt != 0 && l.front().expiresAt <= clk.now() {
			m := l.pop()
			q.ready.remove(m)
			q.forgetLocked(&m)
			q.stats.expired.inc()
			q.dead = append(q.dead, deadLetter{m: m, reason: reasonExpired})
		}
	}
	q.armTTLTimerLocked()
}

// armTTLTimerLocked makes sure a timer fires at the earliest head expiry, so a
// queue of expired messages empties itself without consumers.
func (q *Queue) armTTLTimerLocked() {
	if q.deleted || (q.qa.messageTTL < 0 && !q.hasMessageTTLLocked()) {
		return
	}
	var next int64
	for i := range q.ready.levels {
		l := &q.ready.levels[i]
		if l.len() > 0 && l.front().expiresAt != 0 && (next == 0 || l.front().expiresAt < next) {
			next = l.front().expiresAt
		}
	}
	if next == 0 || (q.ttlAt != 0 && q.ttlAt <= next) {
		return
	}
	q.ttlAt = next
	d := time.Until(time.UnixMilli(next))
	if q.ttlTimer == nil {
		q.ttlTimer = time.AfterFunc(d, q.expireTick)
	} else {
		q.ttlTimer.Reset(d)
	}
}

// hasMessageTTLLocked reports whether any head carries a per-message expiry.
func (q *Queue) hasMessageTTLLocked() bool {
	for i := range q.ready.levels {
		l := &q.ready.levels[i]
		if l.len() > 0 && l.front().expiresAt != 0 {
			return true
		}
	}
	return false
}

func (q *Queue) expireTick() {
	q.mu.Lock()
	q.ttlAt = 0
	q.expireLocked(&lazyClock{})
	dead := q.takeDeadLocked()
	q.mu.Unlock()
	q.publishDeadLetters(dead)
}

// dispatch hands ready messages to consumers with credit.
func (q *Queue) dispatch() {
	q.mu.Lock()
	q.dispatchLocked(&lazyClock{})
	dead := q.takeDeadLocked()
	q.mu.Unlock()
	q.publishDeadLetters(dead)
}

func (q *Queue) dispatchLocked(clk *lazyClock) {
	for q.lengthLocked() > 0 && len(q.consumers) > 0 {
		c := q.nextConsumerLocked()
		if c == nil {
			q.use.block(time.Now())
			return
		}
		m, ok := q.takeLocked(clk)
		if !ok {
			c.sink.refund(c)
			return
		}
		q.handOverLocked(c, m)
	}
}

// handOverLocked delivers m, already taken from the queue, to c.
func (q *Queue) handOverLocked(c *consumer, m queued) {
	if q.use.inactive {
		q.use.unblock(time.Now())
	}
	id := m.seq // a no-ack delivery is never settled: any id will do
	if c.noAck {
		q.forgetLocked(&m)
	} else {
		c.unacked++
		q.markDeliveredLocked(&m)
		id = q.addPendingLocked(m)
	}
	q.stats.delivered.inc()
	if m.redelivered {
		q.stats.redelivered.inc()
	}
	c.sink.deliver(c, q.outgoingLocked(m, id))
}

// plainLocked reports whether the queue uses none of the features that
// need per-message work at enqueue (TTL, limits, deduplication, priorities,
// paging), so a message can go straight to a waiting consumer.
func (q *Queue) plainLocked() bool {
	return q.qa.messageTTL < 0 && q.qa.maxLength < 0 && q.qa.maxLengthBytes < 0 &&
		q.dedup == nil && q.qa.maxPriority == 0 && q.paged == 0
}

// takeLocked pops the next deliverable message, dead-lettering expired ones.
func (q *Queue) takeLocked(clk *lazyClock) (queued, bool) {
	for q.lengthLocked() > 0 {
		for q.paged > 0 && q.ready.len() < 64 {
			before := q.paged
			q.pageInLocked()
			if q.paged == before {
				break // nothing more could be read
			}
		}
		if q.ready.len() == 0 {
			return queued{}, false
		}
		m := q.ready.pop()
		// Strictly before now: a message with TTL 0 may still go to a consumer
		// in the instant it arrives (enqueue expires it right after if not).
		if m.expiresAt != 0 && m.expiresAt < clk.now() {
			q.forgetLocked(&m)
			q.stats.expired.inc()
			q.dead = append(q.dead, deadLetter{m: m, reason: reasonExpired})
			continue
		}
		return m, true
	}
	return queued{}, false
}

// nextConsumerLocked picks the consumer for the next message: with single
// active consumer only the first; otherwise the highest-priority group with
// credit, round robin within it. A consumer whose connection's write buffer
// is full is skipped and the queue asks that connection to wake it later.
func (q *Queue) nextConsumerLocked() *consumer {
	if len(q.consumers) == 1 || q.qa.singleActive {
		c := q.consumers[0]
		if q.canTakeLocked(c) {
			return c
		}
		return nil
	}
	for start := 0; start < len(q.consumers); {
		end := start + 1
		for end < len(q.consumers) && q.consumers[end].priority == q.consumers[start].priority {
			end++
		}
		n := end - start
		for i := 0; i < n; i++ {
			idx := start + (q.rr+i)%n
			if c := q.consumers[idx]; q.canTakeLocked(c) {
				q.rr = (idx - start) + 1
				return c
			}
		}
		start = end
	}
	return nil
}

func (q *Queue) canTakeLocked(c *consumer) bool {
	if !c.noAck && c.prefetch != 0 && c.unacked >= int(c.prefetch) {
		return false
	}
	return c.sink.reserve(c, q.h)
}

// outgoingLocked is m as a consumer or basic.get receives it, settled by id.
func (q *Queue) outgoingLocked(m queued, id uint64) outgoing {
	return outgoing{id: id, msg: m.msg, props: q.deliveryProps(m), redelivered: m.redelivered}
}

// addConsumer subscribes c; it fails with 403 when exclusivity is violated.
// accepted runs under the queue lock before the first delivery, so the
// consume-ok it sends precedes every message.
func (q *Queue) addConsumer(c *consumer, accepted func()) *amqp.Error {
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return amqp.NewError(amqp.NotFound, methodBasicConsume, "no %s", describeQueue(q.name, q.vhost.name))
	}
	if q.exclusiveConsumer != nil || (c.exclusive && len(q.consumers) > 0) {
		q.mu.Unlock()
		return amqp.NewError(amqp.AccessRefused, methodBasicConsume, "%s in exclusive use", describeQueue(q.name, q.vhost.name))
	}
	at := len(q.consumers)
	for i, x := range q.consumers {
		if c.priority > x.priority {
			at = i
			break
		}
	}
	q.consumers = append(q.consumers, nil)
	copy(q.consumers[at+1:], q.consumers[at:])
	q.consumers[at] = c
	if c.exclusive {
		q.exclusiveConsumer = c
	}
	q.hadConsumer = true
	q.lastUsed = time.Now()
	q.use.unblock(q.lastUsed)
	accepted()
	q.dispatchLocked(&lazyClock{})
	dead := q.takeDeadLocked()
	q.mu.Unlock()
	q.publishDeadLetters(dead)
	return nil
}

// removeConsumer unsubscribes c and reports whether an auto-delete queue has
// just lost its last consumer and must be deleted by the caller. With single
// active consumer the next consumer in line takes over.
func (q *Queue) removeConsumer(c *consumer) (autoDelete bool) {
	q.mu.Lock()
	for i, x := range q.consumers {
		if x == c {
			q.consumers = append(q.consumers[:i], q.consumers[i+1:]...)
			q.rr = 0
			break
		}
	}
	if q.exclusiveConsumer == c {
		q.exclusiveConsumer = nil
	}
	q.lastUsed = time.Now()
	q.dispatchLocked(&lazyClock{})
	dead := q.takeDeadLocked()
	gone := q.autoDelete && q.hadConsumer && len(q.consumers) == 0 && !q.deleted
	q.mu.Unlock()
	q.publishDeadLetters(dead)
	return gone
}

// settle finishes deliveries that were acked (drop=false) or rejected without
// requeue (drop=true, dead-lettered as rejected).
func (q *Queue) settle(ds []delivery, drop bool) {
	q.mu.Lock()
	for i := range ds {
		m, ok := q.takePendingLocked(&ds[i])
		if !ok {
			continue
		}
		q.forgetLocked(&m)
		if drop {
			q.dead = append(q.dead, deadLetter{m: m, reason: reasonRejected})
		}
	}
	if !drop {
		q.stats.acked.add(len(ds))
	}
	q.dispatchLocked(&lazyClock{})
	dead := q.takeDeadLocked()
	q.mu.Unlock()
	q.publishDeadLetters(dead)
}

// requeue puts deliveries back in their original places, marked redelivered.
// A message past its delivery limit is dead-lettered instead.
func (q *Queue) requeue(ds []delivery) {
	var clk lazyClock
	q.mu.Lock()
	for i := range ds {
		m, ok := q.takePendingLocked(&ds[i])
		if !ok {
			continue
		}
		m.redelivered = true
		m.deliveries++
		if q.journal != nil {
			q.journal.note(qrReturn, m.seq)
		}
		if q.qa.deliveryLimit >= 0 && int64(m.deliveries) > q.qa.deliveryLimit {
			q.forgetLocked(&m)
			q.dead = append(q.dead, deadLetter{m: m, reason: reasonDeliveryLimit})
			continue
		}
		if m.expiresAt != 0 {
			q.expiring = true
		}
		q.ready.requeue(m)
	}
	q.expireLocked(&clk)
	q.dispatchLocked(&clk)
	dead := q.takeDeadLocked()
	q.mu.Unlock()
	q.publishDeadLetters(dead)
}

// takePendingLocked returns d's consumer credit and takes its entry off the
// unsettled deliveries; ok is false when the queue no longer has it (it was
// deleted meanwhile).
func (q *Queue) takePendingLocked(d *delivery) (queued, bool) {
	if d.c != nil {
		d.c.unacked--
	}
	m, ok := q.pending.take(d.id)
	if ok {
		q.unacked.remove(m)
	}
	return m, ok
}

// addPendingLocked keeps a delivered message until it is settled and
// returns the id that settles it.
func (q *Queue) addPendingLocked(m queued) uint64 {
	q.unacked.add(m)
	return q.pending.add(m)
}

// purge drops every ready message and returns how many there were.
func (q *Queue) purge() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.lengthLocked()
	for _, m := range q.ready.drain() {
		q.forgetLocked(&m)
	}
	q.purgeDiskLocked()
	return n
}

// counts returns ready messages and consumers.
func (q *Queue) counts() (ready, consumers int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lengthLocked(), len(q.consumers)
}

// touch records use of the queue for x-expires.
func (q *Queue) touch() {
	q.mu.Lock()
	q.lastUsed = time.Now()
	q.mu.Unlock()
}

// checkUnused deletes a queue with x-expires that had no consumers and no
// basic.get for that long, or re-arms its timer.
func (q *Queue) checkUnused() {
	q.mu.Lock()
	ttl := time.Duration(q.qa.expires) * time.Millisecond
	if q.deleted {
		q.mu.Unlock()
		return
	}
	idle := time.Since(q.lastUsed)
	if len(q.consumers) > 0 || idle < ttl {
		wait := ttl - idle
		if len(q.consumers) > 0 {
			wait = ttl
		}
		q.expiryTimer.Reset(wait)
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	q.vhost.removeQueue(q, "x-expires")
}

// restartExpiry re-arms the x-expires timer for a full period, if the queue
// has one.
func (q *Queue) restartExpiry() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.expiryTimer != nil && !q.deleted {
		q.expiryTimer.Reset(time.Duration(q.qa.expires) * time.Millisecond)
	}
}

// stopTimers stops the queue's TTL and x-expires timers (server shutdown).
func (q *Queue) stopTimers() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ttlTimer != nil {
		q.ttlTimer.Stop()
	}
	if q.expiryTimer != nil {
		q.expiryTimer.Stop()
	}
}

// markDeleted stops the queue and returns its consumers (for cancel
// notifications) and the number of ready messages it held.
func (q *Queue) markDeleted() ([]*consumer, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return nil, 0
	}
	q.deleted = true
	if q.ttlTimer != nil {
		q.ttlTimer.Stop()
	}
	if q.expiryTimer != nil {
		q.expiryTimer.Stop()
	}
	cs := q.consumers
	q.consumers = nil
	q.exclusiveConsumer = nil
	n := q.lengthLocked()
	q.ready.drain()
	q.paged, q.pagedBytes, q.pagedPersistent, q.pagedPersistentBytes = 0, 0, 0, 0
	q.closeIndexLocked(true)
	q.pending.drop() // their index entries went with the index
	q.unacked = tally{}
	q.dead = nil
	return cs, n
}

// QueueInfo is a snapshot of a queue for the management API.
type QueueInfo struct {
	Name, Vhost                    string
	Durable, Exclusive, AutoDelete bool
	Arguments                      amqp.Table
	Ready, Unacked, Consumers      int
	ReadyBytes                     int
	Published, Delivered, Acked    uint64
	Redelivered, Got               uint64
	Expired, Dropped, DeadLettered uint64
	// InMemory and OnDisk split Ready between the in-memory head and the
	// messages only on disk.
	InMemory, OnDisk int
	// UnackedBytes is the body size of the unacknowledged messages;
	// InMemoryBytes that of the messages in memory (the head and the
	// unacknowledged). Persistent and PersistentBytes count the messages
	// published persistent, ready or unacknowledged.
	UnackedBytes, InMemoryBytes int
	Persistent, PersistentBytes int
	// HeadTimestamp is the timestamp property (seconds) of the next message
	// to deliver, when it is in memory and has one.
	HeadTimestamp    uint64
	HasHeadTimestamp bool
	// Memory estimates the bytes the queue holds in memory (queueMemory).
	Memory int
	// Leader, Members and Online are a quorum queue's replicas: the node
	// leading it, the nodes holding a replica, and those of them that are
	// up (RabbitMQ's leader, members and online).
	Leader          string
	Members, Online []string
	// Mirrored is set for a classic queue an ha policy mirrors in a
	// cluster: Leader is its node, Members less Leader its mirrors
	// (RabbitMQ's slave_nodes), SyncedMirrors those in the in-sync set
	// (synchronised_slave_nodes).
	Mirrored      bool
	SyncedMirrors []string
	// DeadLetterStrategy is a quorum queue's effective strategy
	// (at-most-once, at-least-once, "" without a dead-letter exchange);
	// DLXMessages and DLXBytes count what it holds at least once until its
	// targets confirm (RabbitMQ's messages_dlx and message_bytes_dlx).
	DeadLetterStrategy    string
	DLXMessages, DLXBytes int
}

// Per-message bookkeeping a queue holds besides the body: the entry, the
// Message and, for an unacknowledged message, its pending map slot.
const (
	readyEntrySize   = int(unsafe.Sizeof(queued{}) + unsafe.Sizeof(Message{}))
	pendingEntrySize = readyEntrySize + int(unsafe.Sizeof(unsettledEntry{}))
	queueStructSize  = int(unsafe.Sizeof(Queue{}))
)

// queueMemory estimates what a queue holds in memory from its tallies: its
// own structure, each message's bookkeeping and the bodies of the messages
// in memory. A body routed to several queues is counted in each, as each
// holds it; properties and Go's allocator rounding are left out.
func queueMemory(ready, unacked, bodyBytes int) int {
	return queueStructSize + ready*readyEntrySize + unacked*pendingEntrySize + bodyBytes
}

// Info returns a snapshot of the queue, from its handle.
func (q *Queue) Info() QueueInfo { return q.h.info() }

// localInfo is the snapshot of a queue whose messages are the Queue's.
func (q *Queue) localInfo() QueueInfo {
	q.mu.Lock()
	info := QueueInfo{
		Name: q.name, Vhost: q.vhost.name, Durable: q.durable, Exclusive: q.exclusive,
		AutoDelete: q.autoDelete, Arguments: q.args,
		Ready: q.lengthLocked(), Unacked: q.pending.len(), Consumers: len(q.consumers), ReadyBytes: q.ready.bytes + q.pagedBytes,
		InMemory: q.ready.len(), OnDisk: q.paged,
		UnackedBytes: q.unacked.bytes, InMemoryBytes: q.ready.bytes + q.unacked.bytes,
		Persistent:      q.ready.persistent + q.unacked.persistent + q.pagedPersistent,
		PersistentBytes: q.ready.persistentBytes + q.unacked.persistentBytes + q.pagedPersistentBytes,
	}
	info.HeadTimestamp, info.HasHeadTimestamp = q.headTimestampLocked()
	info.Memory = queueMemory(info.InMemory, info.Unacked, info.InMemoryBytes)
	q.mu.Unlock()
	info.Published = q.stats.published.value()
	info.Delivered = q.stats.delivered.value()
	info.Acked = q.stats.acked.value()
	info.Redelivered = q.stats.redelivered.value()
	info.Got = q.stats.got.value()
	info.Expired = q.stats.expired.value()
	info.Dropped = q.stats.dropped.value()
	info.DeadLettered = q.stats.deadLetterd.value()
	return info
}

// headTimestampLocked returns the timestamp property of the next message to
// deliver, decoding that one message's properties.
func (q *Queue) headTimestampLocked() (uint64, bool) {
	l := q.ready.front()
	if l == nil {
		return 0, false
	}
	var p amqp.Properties
	if err := p.Decode(l.front().msg.RawProps); err != nil || p.Flags&amqp.FlagTimestamp == 0 {
		return 0, false
	}
	return p.Timestamp, true
}

// reconfigure replaces the queue's effective arguments, e.g. when a policy
// that matches it changes, and applies them at once: length limits drop or
// dead-letter what is over, timers follow the new TTLs. The priority levels
// are fixed at declare (as in RabbitMQ, x-max-priority is not a policy key).
func (q *Queue) reconfigure(qa queueArgs) {
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return
	}
	qa.maxPriority = q.qa.maxPriority
	q.qa = qa
	q.consumerTimeout.Store(int64(qa.consumerTimeout))
	switch {
	case qa.dedup && q.dedup == nil:
		q.dedup = newDedupCache(qa.dedupCacheSize, qa.dedupCacheTTL)
	case !qa.dedup:
		q.dedup = nil
	}
	if qa.expires > 0 {
		d := time.Duration(qa.expires) * time.Millisecond
		if q.expiryTimer == nil {
			q.expiryTimer = time.AfterFunc(d, q.checkUnused)
		} else {
			q.expiryTimer.Reset(d)
		}
	} else if q.expiryTimer != nil {
		q.expiryTimer.Stop()
	}
	var clk lazyClock
	q.enforceLimitLocked()
	q.expireLocked(&clk)
	q.dispatchLocked(&clk)
	dead := q.takeDeadLocked()
	q.mu.Unlock()
	q.publishDeadLetters(dead)
}

// declaredArgs returns the arguments the queue was declared with.
func (q *Queue) declaredArgs() amqp.Table { return q.args }
