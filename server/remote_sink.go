package server

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// remoteSink is, on a home node, the consumerSink of every consumer that a
// client of node holds on this node's queues. The queue decides as for a
// local consumer (priorities, single active consumer, the consumer's
// prefetch as its credit) and delivers into the sink, which buffers and
// pushes batches to node from one goroutine: in queue order per consumer,
// and cancellations after the deliveries before them.
type remoteSink struct {
	r    *remoteQueues
	node string

	// mu is a leaf below Queue.mu: deliver and reserve run under it.
	mu        sync.Mutex
	consumers map[uint64]*sinkConsumer // by the ingress node's key
	keys      map[*consumer]uint64
	buf       []pushItem
	wakes     []queueHandle // queues to redispatch once buf drained
	// gets are the node's basic.get deliveries not yet settled, by queue,
	// each with the token of its get, which return to their queues if the
	// node is lost or abandons the get.
	gets map[*Queue]map[uint64]uint64
	// abandoned are get tokens the node abandoned before their get ran
	// here (the request overtaken by the abandonment), oldest first.
	abandoned      map[uint64]struct{}
	abandonedOrder []uint64
	// cancels are the keys of consumers this home dropped when it lost the
	// node (a push it did not take): the node is told with basic.cancel
	// once it answers again, so its clients do not wait on consumers that
	// get nothing any more, as RabbitMQ cancels the consumers of a queue
	// whose node went away.
	cancels []uint64
	kick    chan struct{}
}

// sinkConsumer is one remote consumer: its queue and the deliveries it
// holds unsettled, which return to the queue if its node is lost.
type sinkConsumer struct {
	c   *consumer
	q   *Queue
	out map[uint64]struct{}
}

type pushItem struct {
	kind uint64
	key  uint64
	sc   *sinkConsumer // nil: the consumer was no longer known here (orphan)
	c    *consumer     // the consumer the queue delivered to
	m    outgoing
}

// sinkMaxBuffered bounds the deliveries waiting to be pushed to one node,
// for no-ack consumers, which have no credit.
const sinkMaxBuffered = 1024

// sinkFor is node's sink, started on first use.
func (r *remoteQueues) sinkFor(node string) *remoteSink {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sinks[node]
	if s == nil && !r.closed {
		s = &remoteSink{r: r, node: node, consumers: make(map[uint64]*sinkConsumer),
			keys: make(map[*consumer]uint64), gets: make(map[*Queue]map[uint64]uint64), abandoned: make(map[uint64]struct{}), kick: make(chan struct{}, 1)}
		r.sinks[node] = s
		r.wg.Add(1)
		go s.pushLoop()
	}
	return s
}

func (s *remoteSink) reserve(c *consumer, wake queueHandle) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.buf) < sinkMaxBuffered {
		return true
	}
	for _, w := range s.wakes {
		if w == wake {
			return false
		}
	}
	s.wakes = append(s.wakes, wake)
	return false
}

// refund and charge: the remote consumer's credit is its prefetch, which
// the queue counts; the ingress channel counts its own channel prefetch.
func (*remoteSink) refund(*consumer) {}

func (*remoteSink) charge(*consumer) {}

func (s *remoteSink) deliver(c *consumer, m outgoing) {
	s.mu.Lock()
	key := s.keys[c]
	sc := s.consumers[key]
	if sc != nil && !c.noAck {
		sc.out[m.id] = struct{}{}
	}
	// sc is nil when the queue delivered to a consumer the sink forgot an
	// instant ago (its cancel or its node's loss between taking it here and
	// unsubscribing it from the queue): the item still carries c, so a
	// refused or failed push returns the delivery to the queue.
	s.buf = append(s.buf, pushItem{kind: pushDeliver, key: key, sc: sc, c: c, m: m})
	s.mu.Unlock()
	s.signal()
}

func (s *remoteSink) cancelled(c *consumer) {
	s.mu.Lock()
	key, ok := s.keys[c]
	if ok {
		delete(s.keys, c)
		delete(s.consumers, key)
		s.buf = append(s.buf, pushItem{kind: pushCancelled, key: key})
	}
	s.mu.Unlock()
	s.signal()
}

func (s *remoteSink) subscribed(c *consumer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.keys[c]
	return ok
}

func (s *remoteSink) owner() consumerOwner {
	return consumerOwner{ConnName: "consumer on node " + s.node, Peer: s.node, DefaultTimeout: s.r.s.cfg.ConsumerTimeout}
}

func (s *remoteSink) signal() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// add records a new remote consumer under key.
func (s *remoteSink) add(key uint64, c *consumer, q *Queue) {
	s.mu.Lock()
	s.consumers[key] = &sinkConsumer{c: c, q: q, out: make(map[uint64]struct{})}
	s.keys[c] = key
	s.mu.Unlock()
}

// take removes the consumer under key. What it holds unsettled stays with
// the node's channel, which settles it without the key; until then it is
// kept with the node's gets (token 0), so the node's loss returns it: a
// channel closing after the cancel requeues through the settlement link,
// which drops its requeues when its node declares this one down, trusting
// it to return them.
func (s *remoteSink) take(key uint64) *sinkConsumer {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.consumers[key]
	if sc != nil {
		delete(s.consumers, key)
		delete(s.keys, sc.c)
		if len(sc.out) > 0 {
			set := s.gets[sc.q]
			if set == nil {
				set = make(map[uint64]uint64, len(sc.out))
				s.gets[sc.q] = set
			}
			for id := range sc.out {
				set[id] = 0
			}
			clear(sc.out)
		}
	}
	return sc
}

func (s *remoteSink) forgetGetLocked(q *Queue, id uint64) {
	if set := s.gets[q]; set != nil {
		delete(set, id)
		if len(set) == 0 {
			delete(s.gets, q)
		}
	}
}

// settleGetAbandoned is a settlement kind only the remote plane carries:
// its id is the token of a forwarded basic.get whose answer never reached
// the asking node.
const settleGetAbandoned settleKind = 16

// settleCancelConsumer, also carried only by the remote plane, is a
// basic.cancel of consumer key whose call the home did not answer.
const settleCancelConsumer settleKind = 17

// sinkMaxAbandoned bounds the get tokens remembered as abandoned before
// their get arrived: such a get is one whose request was overtaken, and a
// token not seen again (its request lost for good) is forgotten in time.
const sinkMaxAbandoned = 1024

// got records basic.get deliveries of q the node holds unsettled, under
// the get's token; a get the node abandoned meanwhile returns them.
func (s *remoteSink) got(q *Queue, token uint64, ids []uint64) {
	s.mu.Lock()
	if _, gone := s.abandoned[token]; gone {
		s.forgetAbandonedLocked(token)
		s.mu.Unlock()
		requeueGets(q, ids)
		return
	}
	set := s.gets[q]
	if set == nil {
		set = make(map[uint64]uint64, len(ids))
		s.gets[q] = set
	}
	for _, id := range ids {
		set[id] = token
	}
	s.mu.Unlock()
}

// abandonGet returns to q what the get named token took, which the node
// never delivered to its client; a get not run yet is refused when it comes.
func (s *remoteSink) abandonGet(q *Queue, token uint64) {
	s.mu.Lock()
	var ids []uint64
	for id, t := range s.gets[q] {
		if t == token {
			ids = append(ids, id)
			delete(s.gets[q], id)
		}
	}
	if len(s.gets[q]) == 0 {
		delete(s.gets, q)
	}
	if len(ids) == 0 {
		// Not run yet, or it took nothing; a retried abandonment also
		// finds nothing and is remembered once.
		if _, ok := s.abandoned[token]; !ok {
			s.abandoned[token] = struct{}{}
			s.abandonedOrder = append(s.abandonedOrder, token)
			if len(s.abandonedOrder) > sinkMaxAbandoned {
				s.forgetAbandonedLocked(s.abandonedOrder[0])
			}
		}
	}
	s.mu.Unlock()
	requeueGets(q, ids)
}

// abandonedBefore reports (once) whether the node abandoned the get named
// token before it arrived.
func (s *remoteSink) abandonedBefore(token uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, gone := s.abandoned[token]
	if gone {
		s.forgetAbandonedLocked(token)
	}
	return gone
}

func (s *remoteSink) forgetAbandonedLocked(token uint64) {
	delete(s.abandoned, token)
	if i := slices.Index(s.abandonedOrder, token); i >= 0 {
		s.abandonedOrder = slices.Delete(s.abandonedOrder, i, i+1)
	}
}

// requeueGets returns basic.get deliveries of q, marked redelivered.
func requeueGets(q *Queue, ids []uint64) {
	if len(ids) == 0 {
		return
	}
	ds := make([]delivery, len(ids))
	for i, id := range ids {
		ds[i] = delivery{q: q.h, id: id}
	}
	q.h.settle(ds, settleRequeue)
}

// settled forgets id among key's unsettled deliveries of q (key 0: a
// basic.get's) and returns the consumer whose credit it returns (nil for
// basic.get or one cancelled).
func (s *remoteSink) settled(q *Queue, key, id uint64) *consumer {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetGetLocked(q, id) // a get's, or a cancelled consumer's
	if key == 0 {
		return nil
	}
	sc := s.consumers[key]
	if sc == nil {
		return nil
	}
	delete(sc.out, id)
	return sc.c
}

// pushLoop pushes buffered items to the node until this node stops.
func (s *remoteSink) pushLoop() {
	defer s.r.wg.Done()
	backoff := settleRetryMin
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		select {
		case <-s.kick:
		case <-retry.C:
		case <-s.r.ctx.Done():
			return
		}
		for s.push() {
		}
		retry.Stop()
		switch sent, pending := s.pushCancels(); {
		case !pending:
			backoff = settleRetryMin
		case sent:
			backoff = settleRetryMin
			retry.Reset(0)
		default:
			retry.Reset(backoff)
			backoff = min(2*backoff, settleRetryMax)
		}
	}
}

// pushCancels tells the node of the consumers this home dropped when it
// lost the node; pending reports whether some are still to be told, sent
// whether this attempt reached the node.
func (s *remoteSink) pushCancels() (sent, pending bool) {
	s.mu.Lock()
	keys := s.cancels
	s.cancels = nil
	s.mu.Unlock()
	if len(keys) == 0 {
		return false, false
	}
	w := wireWriter{}
	w.uint(uint64(len(keys)))
	for _, key := range keys {
		w.uint(pushCancelled)
		w.uint(key)
	}
	if _, err := s.r.call(s.node, rpcDeliver, w.b, remoteCallTimeout); err != nil {
		s.mu.Lock()
		s.cancels = append(keys, s.cancels...)
		s.mu.Unlock()
		return false, s.r.ctx.Err() == nil
	}
	s.mu.Lock()
	pending = len(s.cancels) > 0
	s.mu.Unlock()
	return true, pending
}

// push sends what is buffered and reports whether there was anything. A
// node that does not take it is lost to this queue: its consumers are
// cancelled here and their deliveries requeued, as RabbitMQ does for a
// channel whose node went down.
func (s *remoteSink) push() bool {
	s.mu.Lock()
	items, wakes := s.takeBatchLocked(), s.wakes
	s.wakes = nil
	s.mu.Unlock()
	for _, q := range wakes {
		q.redispatch()
	}
	if len(items) == 0 {
		return false
	}
	w := wireWriter{}
	w.uint(uint64(len(items)))
	for _, it := range items {
		w.uint(it.kind)
		w.uint(it.key)
		if it.kind == pushDeliver {
			w.outgoing(it.m)
		}
	}
	ans, err := s.r.call(s.node, rpcDeliver, w.b, remoteConfirmTimeout)
	if err != nil {
		if s.r.ctx.Err() == nil {
			s.r.s.log.Warn("consumers' node lost: cancelling its consumers and requeueing their deliveries", "node", s.node, "err", err)
			s.lose(items)
		}
		return true
	}
	rd, aerr := readAnswer(ans, 0)
	if aerr != nil {
		return true
	}
	type ref struct{ key, id uint64 }
	refused := make(map[ref]bool)
	for range rd.count() {
		key, id := rd.uint(), rd.uint()
		if rd.err == nil {
			refused[ref{key, id}] = true
		}
	}
	for _, it := range items {
		if it.kind == pushDeliver && refused[ref{it.key, it.m.id}] {
			s.requeue(it)
		}
	}
	return true
}

// takeBatchLocked takes the buffered items that fit one rpc frame (at least
// one; a body is at most maxForwardedBody, as the publish that brought it).
func (s *remoteSink) takeBatchLocked() []pushItem {
	size, n := 0, 0
	for n < len(s.buf) {
		size += len(s.buf[n].m.props) + 64
		if s.buf[n].m.msg != nil {
			size += len(s.buf[n].m.msg.Body)
		}
		if n > 0 && size > linkMaxBytes {
			break
		}
		n++
	}
	items := s.buf[:n:n]
	if n == len(s.buf) {
		s.buf = nil
	} else {
		s.buf = append([]pushItem(nil), s.buf[n:]...)
	}
	return items
}

// requeue returns one delivery the node refused (its consumer was
// cancelled there meanwhile) or did not take.
func (s *remoteSink) requeue(it pushItem) {
	if it.sc != nil {
		s.mu.Lock()
		delete(it.sc.out, it.m.id)
		s.forgetGetLocked(it.sc.q, it.m.id) // its consumer cancelled meanwhile
		s.mu.Unlock()
	}
	if it.c.noAck {
		return // settled when it was delivered
	}
	it.c.q.settle([]delivery{{q: it.c.q, c: it.c, id: it.m.id}}, settleRequeue)
}

// lose cancels every consumer of the node and requeues what they held;
// failed is the push the node did not take. Deliveries of consumers the
// sink no longer knew (orphans, or cancelled while their push was on its
// way) are in no lost consumer's set: they are requeued from the failed
// push and the buffer.
func (s *remoteSink) lose(failed []pushItem) {
	s.mu.Lock()
	lost, gets := s.consumers, s.gets
	s.consumers = make(map[uint64]*sinkConsumer)
	s.keys = make(map[*consumer]uint64)
	s.gets = make(map[*Queue]map[uint64]uint64)
	orphans := failed[:len(failed):len(failed)]
	orphans = append(orphans, s.buf...)
	s.buf = nil
	for key := range lost {
		s.cancels = append(s.cancels, key)
	}
	s.mu.Unlock()
	if len(lost) > 0 {
		s.signal() // the cancel notifications, once the node answers
	}
	held := make(map[*sinkConsumer]bool, len(lost))
	for _, sc := range lost {
		held[sc] = true
	}
	for _, it := range orphans {
		if it.kind == pushDeliver && !held[it.sc] {
			s.requeue(it) // its consumer's set, if any, left with its cancel
		}
	}
	for q, set := range gets {
		ids := make([]uint64, 0, len(set))
		for id := range set {
			ids = append(ids, id)
		}
		requeueGets(q, ids)
	}
	for _, sc := range lost {
		if sc.q.h.cancel(sc.c) {
			sc.q.vhost.removeQueue(sc.q, "auto-delete: its consumers' node was lost")
		}
		ds := make([]delivery, 0, len(sc.out))
		for id := range sc.out {
			ds = append(ds, delivery{q: sc.q.h, c: sc.c, id: id})
		}
		if len(ds) > 0 {
			sc.q.h.settle(ds, settleRequeue)
		}
	}
}

func (r *remoteQueues) handleConsume(_ context.Context, from string, payload []byte) ([]byte, error) {
	rd := wireReader{b: payload}
	q, aerr := r.forwardedQueue(&rd, methodBasicConsume)
	key, tag := rd.uint(), rd.string()
	noAck, exclusive := rd.bool(), rd.bool()
	prefetch, priority, args := rd.uint(), rd.int(), rd.table()
	if aerr != nil {
		return refusedAnswer(aerr), nil
	}
	if rd.err != nil {
		return nil, rd.err
	}
	s := r.sinkFor(from)
	if s == nil {
		return refusedAnswer(amqp.NewError(amqp.ConnectionForced, methodBasicConsume, "node '%s' is stopping", r.node)), nil
	}
	c := &consumer{tag: tag, sink: s, q: q.h, noAck: noAck, exclusive: exclusive, prefetch: uint16(prefetch), priority: priority, args: args}
	s.add(key, c, q)
	if aerr := q.h.consume(c, func() {}); aerr != nil {
		s.take(key)
		return refusedAnswer(aerr), nil
	}
	return okAnswer().b, nil
}

// handleCancel unsubscribes a remote consumer; its unsettled deliveries
// stay with the client's channel, which may still settle them. An
// auto-delete queue that lost its last consumer is deleted, as locally.
func (r *remoteQueues) handleCancel(_ context.Context, from string, payload []byte) ([]byte, error) {
	rd := wireReader{b: payload}
	q, aerr := r.homeQueue(&rd, methodBasicConsume)
	key := rd.uint()
	if aerr != nil {
		return refusedAnswer(aerr), nil
	}
	auto := false
	if s := r.sinkFor(from); s != nil {
		auto = r.cancelRemote(s, q, key)
	}
	w := okAnswer()
	w.bool(auto)
	return w.b, nil
}

// cancelRemote unsubscribes the node's consumer key from q, if still
// there, and deletes an auto-delete queue that lost its last consumer.
func (r *remoteQueues) cancelRemote(s *remoteSink, q *Queue, key uint64) bool {
	sc := s.take(key)
	if sc == nil || !q.h.cancel(sc.c) {
		return false
	}
	q.vhost.removeQueue(q, "auto-delete")
	return true
}

// handleSettle settles deliveries of this node's queues for their node's
// channels, one call per run of the same queue and kind, as a channel does.
// When the batch names vhosts (a tx.commit waits for its acks), it answers
// after a commit round of each has stored them.
func (r *remoteQueues) handleSettle(_ context.Context, from string, payload []byte) ([]byte, error) {
	s := r.sinkFor(from)
	rd := wireReader{b: payload}
	n := rd.count()
	var run []delivery
	var runQ *Queue
	var runKind settleKind
	flush := func() {
		if len(run) > 0 {
			runQ.h.settle(run, runKind)
		}
		run = run[:0]
	}
	for range n {
		q, aerr := r.homeQueue(&rd, 0)
		kind, key, id := settleKind(rd.uint()), rd.uint(), rd.uint()
		if rd.err != nil {
			return nil, rd.err
		}
		if aerr != nil {
			continue // deleted meanwhile: nothing to settle
		}
		switch kind {
		case settleGetAbandoned:
			if s != nil {
				s.abandonGet(q, id)
			}
			continue
		case settleCancelConsumer:
			flush()
			if s != nil {
				r.cancelRemote(s, q, key)
			}
			continue
		}
		if q != runQ || kind != runKind {
			flush()
			runQ, runKind = q, kind
		}
		var c *consumer
		if s != nil {
			c = s.settled(q, key, id)
		}
		run = append(run, delivery{q: q.h, c: c, id: id})
	}
	flush()
	for range rd.count() {
		name := rd.string()
		if rd.err != nil {
			return nil, rd.err
		}
		vh := r.s.Vhost(name)
		if vh != nil && vh.storage != nil {
			if err := vh.storage.waitRound(); err != nil {
				return refusedAnswer(amqp.NewError(amqp.InternalError, 0, "settlements not stored: %v", err)), nil
			}
		}
		if vh != nil {
			if err := syncQuorumSettled(vh); err != nil {
				return refusedAnswer(amqp.NewError(amqp.InternalError, 0, "settlements not stored: %v", err)), nil
			}
		}
	}
	return okAnswer().b, nil
}
