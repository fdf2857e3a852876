package server

import (
	"sync"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// Queue is a message queue. Its state is guarded by mu; deliveries are written
// to consumers' connections while mu is held so a queue's order is the wire order
// (writing only appends to a memory buffer; no socket I/O happens under mu).
//
// Lock order: vhost.mu → Queue.mu → channel.umu → outbox.mu (see LOCKS.md).
type Queue struct {
	name       string
	vhost      *Vhost
	durable    bool
	exclusive  bool
	autoDelete bool
	args       amqp.Table
	owner      *conn // the declaring connection of an exclusive queue
	created    time.Time

	mu        sync.Mutex
	ready     readyList
	nextSeq   uint64
	consumers []*consumer
	rr        int // round-robin position in consumers
	// exclusiveConsumer is set while a consumer holds exclusive access.
	exclusiveConsumer *consumer
	hadConsumer       bool
	unacked           int
	deleted           bool
	// bindings are the exchanges binding this queue, for removal on delete.
	// Guarded by vhost.mu, not mu.
	bindings map[bindingKey]struct{}

	stats queueStats
}

// queueStats are counters read by the management API without locking the queue.
type queueStats struct {
	published   counter
	delivered   counter
	redelivered counter
	acked       counter
	got         counter
}

// bindingKey identifies one binding of a queue or exchange, for cleanup.
type bindingKey struct {
	source *Exchange
	key    string
	args   string // canonical encoding of the arguments table
}

// consumer is one basic.consume subscription.
type consumer struct {
	tag       string
	ch        *channel
	q         *Queue
	noAck     bool
	exclusive bool
	prefetch  uint16 // per-consumer limit, 0 = unlimited
	args      amqp.Table
	unacked   int // guarded by q.mu
}

func newQueue(vh *Vhost, name string, durable, exclusive, autoDelete bool, args amqp.Table, owner *conn) *Queue {
	return &Queue{
		name: name, vhost: vh, durable: durable, exclusive: exclusive, autoDelete: autoDelete,
		args: args, owner: owner, created: time.Now(), bindings: make(map[bindingKey]struct{}),
	}
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// enqueue appends m and delivers what consumers can take. It returns false when
// the queue has been deleted meanwhile.
func (q *Queue) enqueue(m *Message) bool {
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return false
	}
	q.nextSeq++
	q.ready.push(queued{msg: m, seq: q.nextSeq})
	q.stats.published.inc()
	q.dispatchLocked()
	q.mu.Unlock()
	return true
}

// dispatch hands ready messages to consumers with credit.
func (q *Queue) dispatch() {
	q.mu.Lock()
	q.dispatchLocked()
	q.mu.Unlock()
}

func (q *Queue) dispatchLocked() {
	for q.ready.len() > 0 && len(q.consumers) > 0 {
		c := q.nextConsumerLocked()
		if c == nil {
			return
		}
		m := q.ready.pop()
		if !c.noAck {
			c.unacked++
			q.unacked++
		}
		q.stats.delivered.inc()
		if m.redelivered {
			q.stats.redelivered.inc()
		}
		c.ch.deliver(c, m)
	}
}

// nextConsumerLocked picks the next consumer in round-robin order that can take
// a message now, or nil. A consumer whose connection's write buffer is full is
// skipped and the queue asks that connection to wake it when it drains.
func (q *Queue) nextConsumerLocked() *consumer {
	n := len(q.consumers)
	for i := 0; i < n; i++ {
		idx := (q.rr + i) % n
		c := q.consumers[idx]
		if !c.hasCreditLocked() {
			continue
		}
		if !c.ch.conn.out.reserve(q) {
			continue
		}
		if !c.noAck && !c.ch.acquireGlobalCredit() {
			continue
		}
		q.rr = idx + 1
		return c
	}
	return nil
}

func (c *consumer) hasCreditLocked() bool {
	return c.noAck || c.prefetch == 0 || c.unacked < int(c.prefetch)
}

// addConsumer subscribes c; it fails with 403 when exclusivity is violated.
// accepted runs under the queue lock before the first delivery, so the
// consume-ok it sends precedes every message.
func (q *Queue) addConsumer(c *consumer, accepted func()) *amqp.Error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return amqp.NewError(amqp.NotFound, methodBasicConsume, "no queue '%s' in vhost '%s'", q.name, q.vhost.name)
	}
	if q.exclusiveConsumer != nil || (c.exclusive && len(q.consumers) > 0) {
		return amqp.NewError(amqp.AccessRefused, methodBasicConsume, "queue '%s' in vhost '%s' in exclusive use", q.name, q.vhost.name)
	}
	q.consumers = append(q.consumers, c)
	if c.exclusive {
		q.exclusiveConsumer = c
	}
	q.hadConsumer = true
	accepted()
	q.dispatchLocked()
	return nil
}

// removeConsumer unsubscribes c and reports whether an auto-delete queue has
// just lost its last consumer and must be deleted by the caller.
func (q *Queue) removeConsumer(c *consumer) (autoDelete bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, x := range q.consumers {
		if x == c {
			q.consumers = append(q.consumers[:i], q.consumers[i+1:]...)
			if q.rr > i {
				q.rr--
			}
			break
		}
	}
	if q.exclusiveConsumer == c {
		q.exclusiveConsumer = nil
	}
	return q.autoDelete && q.hadConsumer && len(q.consumers) == 0 && !q.deleted
}

// get takes the next ready message for basic.get. ok is false when the queue is
// empty. remaining is the ready count after the take.
func (q *Queue) get(noAck bool) (m queued, remaining int, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ready.len() == 0 || q.deleted {
		return queued{}, 0, false
	}
	m = q.ready.pop()
	if !noAck {
		q.unacked++
	}
	q.stats.got.inc()
	if m.redelivered {
		q.stats.redelivered.inc()
	}
	return m, q.ready.len(), true
}

// settle finishes deliveries that were acked, or rejected without requeue.
func (q *Queue) settle(ds []delivery) {
	q.mu.Lock()
	for i := range ds {
		q.releaseCreditLocked(&ds[i])
	}
	q.stats.acked.add(len(ds))
	q.dispatchLocked()
	q.mu.Unlock()
}

// requeue puts deliveries back in their original places, marked redelivered.
func (q *Queue) requeue(ds []delivery) {
	q.mu.Lock()
	for i := range ds {
		q.releaseCreditLocked(&ds[i])
		if !q.deleted {
			m := ds[i].m
			m.redelivered = true
			q.ready.requeue(m)
		}
	}
	q.dispatchLocked()
	q.mu.Unlock()
}

func (q *Queue) releaseCreditLocked(d *delivery) {
	if d.c != nil {
		d.c.unacked--
	}
	q.unacked--
}

// purge drops every ready message and returns how many there were.
func (q *Queue) purge() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.ready.len()
	q.ready.drain()
	return n
}

// counts returns ready messages and consumers.
func (q *Queue) counts() (ready, consumers int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ready.len(), len(q.consumers)
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
	cs := q.consumers
	q.consumers = nil
	q.exclusiveConsumer = nil
	n := q.ready.len()
	q.ready.drain()
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
}

// Info returns a snapshot of the queue.
func (q *Queue) Info() QueueInfo {
	q.mu.Lock()
	info := QueueInfo{
		Name: q.name, Vhost: q.vhost.name, Durable: q.durable, Exclusive: q.exclusive,
		AutoDelete: q.autoDelete, Arguments: q.args,
		Ready: q.ready.len(), Unacked: q.unacked, Consumers: len(q.consumers), ReadyBytes: q.ready.bytes,
	}
	q.mu.Unlock()
	info.Published = q.stats.published.value()
	info.Delivered = q.stats.delivered.value()
	info.Acked = q.stats.acked.value()
	info.Redelivered = q.stats.redelivered.value()
	info.Got = q.stats.got.value()
	return info
}
