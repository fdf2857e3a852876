package server

import (
	"sync/atomic"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/msgstore"
)

// A socket read often carries many persistent publishes. Writing each to the
// message store on its own costs a system call per message (28% of the
// broker's CPU in the persistent benchmark), so the reader defers the store
// write and the enqueue of such messages to the end of the read and writes
// them with one msgstore.PutBatch: storeBatch.
//
// Order is kept: the batch is flushed before any other message is routed on
// the connection and before any method other than basic.publish is handled,
// so a channel's publishes reach their queues in order and everything the
// client sent before (say) a basic.get or a confirm.select is in the queues
// when it is handled. Confirms are registered at the flush, in channel order.
//
// Only the reader goroutine touches a connection's storeBatch.
//
// Caveat: a deferred message counts as routed when it is deferred, so if its
// only queue is deleted before the flush (by another connection, within one
// socket read) a mandatory publish is dropped rather than returned; RabbitMQ
// gives no stronger guarantee for a queue deleted while messages are in flight
// to it.

// storeBatchMaxMessages and storeBatchMaxBytes bound a batch.
const (
	storeBatchMaxMessages = 256
	storeBatchMaxBytes    = 1 << 20
)

// deferredStore is one routed message waiting in a storeBatch: its queues
// are batch.queues[from:to].
type deferredStore struct {
	ch       *channel // nil for a forwarded publish (remote_home.go)
	m        *Message
	from, to int
	seq      uint64 // confirm sequence number, 0 without confirms; a forwarded publish's place in its rpc batch
	refs     int    // durable queues taking the stored copy (set by flush)
}

// storeBatch collects the deferred messages of one socket read, or of one
// batch of forwarded publishes at their home (remote_home.go).
type storeBatch struct {
	items  []deferredStore
	queues []*Queue // every item's target queues, back to back
	store  []bool   // per entry of queues: takes the stored copy
	bytes  int
	recs   []msgstore.Record
	refs   []int
	locs   []msgstore.Loc
	// res is the outcome of the item being flushed, handed to the flush's
	// callback by pointer: a local would escape through the function value
	// and cost an allocation per publish.
	res routeResult
}

// holdForStore is the channel's storeDeferrer: the publish path offers it a
// message that some of its queues will store, and it defers the routing to
// the end of the read unless the channel is transactional.
func (ch *channel) holdForStore(m *Message, queues []*Queue) bool {
	if ch.tx != nil {
		return false
	}
	var seq uint64
	if ch.confirm {
		seq = ch.publishSeq
	}
	ch.conn.deferStore(ch, m, queues, seq)
	return true
}

// flushStores is the channel's storeDeferrer: the connection's batch is
// flushed, since it holds the publishes of every channel of the connection.
func (ch *channel) flushStores() { ch.conn.flushStores() }

// deferStore queues m (routed to queues, confirm sequence seq) in the
// connection's batch, flushing first when the batch is full.
func (c *conn) deferStore(ch *channel, m *Message, queues []*Queue, seq uint64) {
	if c.stores.full(m) {
		c.flushStores()
	}
	c.stores.add(ch, m, queues, seq)
}

// full reports whether m does not fit in b any more.
func (b *storeBatch) full(m *Message) bool {
	return len(b.items) >= storeBatchMaxMessages || b.bytes+len(m.Body) > storeBatchMaxBytes
}

// add appends m, routed to queues, to b.
func (b *storeBatch) add(ch *channel, m *Message, queues []*Queue, seq uint64) {
	from := len(b.queues)
	b.queues = append(b.queues, queues...)
	b.items = append(b.items, deferredStore{ch: ch, m: m, from: from, to: len(b.queues), seq: seq})
	b.bytes += len(m.Body)
}

// flushBeforeFrame flushes the batch before a frame that may observe the
// queues or the channel's state: any method but basic.publish.
func (c *conn) flushBeforeFrame(f amqp.Frame) {
	if len(c.stores.items) == 0 || f.Type != amqp.TypeMethod {
		return
	}
	if id, err := amqp.MethodID(f.Payload); err == nil && id == (&amqp.BasicPublish{}).ID() {
		return
	}
	c.flushStores()
}

// flushStores writes the batch's messages to the store with one PutBatch,
// enqueues them and registers their confirms.
func (c *conn) flushStores() {
	if len(c.stores.items) > 0 {
		c.stores.flush(c.vhost.storage, confirmDeferred)
	}
}

// confirmDeferred registers the confirm of a flushed channel publish.
func confirmDeferred(it *deferredStore, res *routeResult) { it.ch.confirmRouted(it.seq, res) }

// flush writes b's messages to st with one PutBatch, enqueues them in their
// queues in order, hands each item's outcome to routed (valid during the
// call only) and empties b.
func (b *storeBatch) flush(st *vhostStorage, routed func(*deferredStore, *routeResult)) {
	if len(b.items) == 0 {
		return
	}
	b.recs, b.refs, b.store = b.recs[:0], b.refs[:0], b.store[:0]
	for i := range b.items {
		it := &b.items[i]
		it.refs = 0
		for _, q := range b.queues[it.from:it.to] {
			// Decided once per queue, so the reference count given to the
			// store matches the queues that hold the copy (as deliverTo).
			s := q.h.takesStoredCopy(it.m)
			b.store = append(b.store, s)
			if s {
				it.refs++
			}
		}
		if it.refs > 0 {
			b.recs = append(b.recs, storeRecord(it.m))
			b.refs = append(b.refs, it.refs)
		}
	}
	if cap(b.locs) < len(b.recs) {
		b.locs = make([]msgstore.Loc, len(b.recs))
	}
	if h := testHookStoreWrite.Load(); h != nil && len(b.recs) > 0 {
		(*h)(st, len(b.recs))
	}
	stored, err := st.store.PutBatch(b.recs, b.refs, b.locs[:len(b.recs)])
	st.noteWrite(err)
	k := 0
	for i := range b.items {
		it := &b.items[i]
		var loc msgstore.Loc
		b.res = routeResult{}
		res := &b.res
		ok := false
		if it.refs > 0 {
			if k < stored {
				loc, ok = b.locs[k], true
			} else {
				res.rejected = true // the write failed: nack, and no memory-only copy in durable queues
			}
			k++
		}
		for j, q := range b.queues[it.from:it.to] {
			s := b.store[it.from+j]
			if s && !ok {
				continue
			}
			res.add(q.h.enqueue(it.m, it.m.ttl, s && ok, loc))
		}
		routed(it, res) // it must not keep res
	}
	clear(b.items)
	clear(b.queues)
	clear(b.recs)
	b.items, b.queues, b.bytes = b.items[:0], b.queues[:0], 0
}

// testHookStoreWrite, when set by a test, sees every call that writes
// messages to a vhost's store (one record for put, a batch's for flush),
// so a test can count the writes a run of publishes took.
var testHookStoreWrite atomic.Pointer[func(st *vhostStorage, records int)]

// storeRecord is m as the message store keeps it.
func storeRecord(m *Message) msgstore.Record {
	var flags uint8
	if m.Persistent() {
		flags = 1
	}
	return msgstore.Record{
		Flags: flags, Exchange: []byte(m.Exchange), RoutingKey: []byte(m.RoutingKey),
		Properties: m.RawProps, Body: m.Body,
	}
}
