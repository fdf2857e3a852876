package server

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/warrenmq/warren/amqp"
)

// The home side of the remote-queue plane: the handlers that serve this
// node's queues to the other nodes, each through the queue's own handle, so
// a forwarded operation behaves as the same operation from a local client.

func (r *remoteQueues) registerHome(reg peerRegistrar) {
	reg.Handle(rpcPublish, r.handlePublish)
	reg.Handle(rpcGet, r.handleGet)
	reg.Handle(rpcPurge, r.handlePurge)
	reg.Handle(rpcDelete, r.handleDelete)
	reg.Handle(rpcCounts, r.handleCounts)
	reg.Handle(rpcInfo, r.handleInfo)
	reg.Handle(rpcConsume, r.handleConsume)
	reg.Handle(rpcCancel, r.handleCancel)
	reg.Handle(rpcSettle, r.handleSettle)
}

// forwardedQueue finds the queue of a forwarded request that a client of
// another node may use: not another connection's exclusive queue (405, as
// on this node).
func (r *remoteQueues) forwardedQueue(rd *wireReader, method uint32) (*Queue, *amqp.Error) {
	q, err := r.homeQueue(rd, method)
	if err != nil {
		return nil, err
	}
	if err := checkExclusive(nil, q, method); err != nil {
		return nil, err
	}
	return q, nil
}

// handlePublish enqueues a batch of forwarded publishes through the queues'
// handles, as the publish path does after routing (the ingress routed), and
// answers per publish once its copies are durable under this node's flush
// policy: false for a publish a queue refused or whose write failed, or one
// for a queue that exists here but is not served here (its home or leader
// is another node, or not yet this one). A queue deleted meanwhile takes
// nothing, which confirms (as for a local publish). Publishes that the
// store keeps are written as a local socket read's are (store_batch.go): a
// run of them with one store write, not one each.
func (r *remoteQueues) handlePublish(ctx context.Context, from string, payload []byte) ([]byte, error) {
	rd := wireReader{b: payload}
	rd.string() // the publisher ref: ingress node and first token, for
	rd.uint()   // duplicate detection when a replicated queue's leader changes
	n := rd.count()
	acks := newBatchAcks(n)
	var (
		queues []*Queue
		takes  []bool
		batch  storeBatch
		bvh    *Vhost // the vhost of what batch holds
		// the previous item's names, which the next usually repeats
		lastVhost, lastQueue, lastExchange, lastKey string
	)
	flush := func() {
		if bvh != nil {
			batch.flush(bvh.storage, func(it *deferredStore, res *routeResult) { acks.add(it.seq, bvh, res) })
		}
	}
	for i := range n {
		vh := r.s.Vhost(rd.stringAs(&lastVhost))
		queues = queues[:0]
		unserved := false
		for range rd.count() {
			name := rd.stringAs(&lastQueue)
			if q := r.localQueue(vh, name); q != nil {
				queues = append(queues, q)
			} else if vh != nil && vh.queue(name) != nil {
				unserved = true
			}
		}
		m := &Message{Exchange: rd.stringAs(&lastExchange), RoutingKey: rd.stringAs(&lastKey), RawProps: rd.bytes(), Body: rd.bytes()}
		m.ttl = rd.int()
		if rd.err != nil {
			flush() // what the home took is answered by the tracker; the call fails
			return nil, rd.err
		}
		seq := uint64(i + 1)
		if unserved {
			// The queue is not served here (a quorum queue's elected
			// leader that has not applied its election or rebuilt the
			// queue yet, or one led elsewhere now): the message is not
			// stored, so it is a nack, never the confirm of a deleted
			// queue (warren-chaos crash seed 1 lost 40 so).
			flush() // the tracker's entries go in seq order: those batched before first
			acks.t.settled(seq, false)
			continue
		}
		if vh == nil || len(queues) == 0 {
			flush()
			acks.t.settled(seq, true)
			continue
		}
		var refs int
		takes, refs = vh.storedCopies(m, queues, takes[:0])
		if refs > 0 {
			if vh != bvh || batch.full(m) {
				flush()
				bvh = vh
			}
			batch.add(nil, m, queues, seq)
			continue
		}
		flush() // a publish the store does not keep must not overtake those batched before it
		var res routeResult
		vh.deliverTo(m, queues, m.ttl, takes, refs, &res)
		acks.add(seq, vh, &res)
	}
	flush()
	acks.t.flush()
	ok, err := acks.wait(ctx)
	if err != nil {
		return nil, err
	}
	w := okAnswer()
	for _, v := range ok {
		w.bool(v)
	}
	return w.b, nil
}

// localQueue is vh's queue name if it is homed here.
func (r *remoteQueues) localQueue(vh *Vhost, name string) *Queue {
	if vh == nil {
		return nil
	}
	q := vh.queue(name)
	if q == nil {
		return nil
	}
	if _, remote := q.h.(*remoteQueue); remote || !q.homedHere() {
		return nil
	}
	return q
}

// batchAcks collects the outcomes of a forwarded batch through a confirm
// tracker, as a channel's confirms are: publish i+1 is the batch's i-th.
type batchAcks struct {
	t    confirmTracker
	mu   sync.Mutex
	ok   []bool
	left int
	done chan struct{}
}

func newBatchAcks(n int) *batchAcks {
	a := &batchAcks{ok: make([]bool, n), left: n, done: make(chan struct{})}
	a.t.notify = a.settled
	if n == 0 {
		close(a.done)
	}
	return a
}

// settled is the tracker's notify: it runs under the tracker's lock.
func (a *batchAcks) settled(seq uint64, ack bool) {
	a.mu.Lock()
	a.ok[seq-1] = ack
	a.left--
	last := a.left == 0
	a.mu.Unlock()
	if last {
		close(a.done)
	}
}

// add records what the queues did with publish seq, as confirmRouted does.
func (a *batchAcks) add(seq uint64, vh *Vhost, res *routeResult) {
	waits := res.pending.count()
	if res.stored {
		waits++
	}
	switch {
	case res.rejected, res.pending.failed:
		a.t.settled(seq, false)
	case waits == 0:
		a.t.settled(seq, true)
	default:
		c := a.t.expect(seq, waits)
		res.pending.completeWhenDurable(c)
		if res.stored {
			vh.storage.await(c)
		}
	}
}

func (a *batchAcks) wait(ctx context.Context) ([]bool, error) {
	select {
	case <-a.done:
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.ok, nil
	case <-ctx.Done():
		a.t.close()
		return nil, ctx.Err()
	}
}

func (r *remoteQueues) handleGet(_ context.Context, from string, payload []byte) ([]byte, error) {
	rd := wireReader{b: payload}
	q, aerr := r.forwardedQueue(&rd, methodBasicGet)
	max, noAck := int(rd.uint()), rd.bool()
	token := rd.uint()
	if aerr != nil {
		return refusedAnswer(aerr), nil
	}
	if rd.err != nil {
		return nil, rd.err
	}
	s := r.sinkFor(from)
	if !noAck && s != nil && s.abandonedBefore(token) {
		// The asking node gave up on this get before it arrived here.
		w := okAnswer()
		w.uint(0)
		return w.b, nil
	}
	q.h.touch()
	body := wireWriter{}
	var ids []uint64
	n, aerr := q.h.get(max, noAck, func(m outgoing, remaining int) {
		body.outgoing(m)
		body.uint(uint64(remaining))
		ids = append(ids, m.id)
	})
	if aerr != nil {
		return refusedAnswer(aerr), nil
	}
	if s != nil && !noAck && n > 0 {
		s.got(q, token, ids) // returned to the queue if from is lost or abandons the get
	}
	w := okAnswer()
	w.uint(uint64(n))
	w.b = append(w.b, body.b...)
	return w.b, nil
}

func (r *remoteQueues) handlePurge(_ context.Context, _ string, payload []byte) ([]byte, error) {
	rd := wireReader{b: payload}
	q, aerr := r.forwardedQueue(&rd, methodQueuePurge)
	method := uint32(rd.uint())
	if aerr != nil {
		return refusedAnswer(aerr), nil
	}
	n, aerr := q.h.purge(method)
	if aerr != nil {
		return refusedAnswer(aerr), nil
	}
	w := okAnswer()
	w.uint(uint64(n))
	return w.b, nil
}

// handleDelete deletes the queue here with queue.delete's flags, as a local
// queue.delete does (its definition, bindings and files). A queue that is
// not here answers 0, as RabbitMQ's delete of a missing queue does.
func (r *remoteQueues) handleDelete(_ context.Context, _ string, payload []byte) ([]byte, error) {
	rd := wireReader{b: payload}
	vhost, name := rd.string(), rd.string()
	ifUnused, ifEmpty := rd.bool(), rd.bool()
	if rd.err != nil {
		return nil, rd.err
	}
	n := 0
	vh := r.s.Vhost(vhost)
	q := r.localQueue(vh, name)
	switch {
	case q == nil:
	case r.s.cluster != nil:
		// In a cluster the asking node proposes the one definition delete,
		// which removes the queue here too when it applies; the home only
		// checks the flags against its own counts. Deleting it here as well
		// would be a second entry that deletes by name whatever queue has
		// the name when it commits: one declared again meanwhile.
		if aerr := q.h.deletable(ifUnused, ifEmpty); aerr != nil {
			return refusedAnswer(aerr), nil
		}
		n, _ = q.h.counts()
	default:
		var aerr *amqp.Error
		if n, aerr = vh.deleteQueue(nil, name, ifUnused, ifEmpty); aerr != nil {
			return refusedAnswer(aerr), nil
		}
	}
	w := okAnswer()
	w.uint(uint64(n))
	return w.b, nil
}

func (r *remoteQueues) handleCounts(_ context.Context, _ string, payload []byte) ([]byte, error) {
	rd := wireReader{b: payload}
	q, aerr := r.homeQueue(&rd, methodQueueDeclare)
	if aerr != nil {
		return refusedAnswer(aerr), nil
	}
	q.h.touch()
	ready, consumers := q.h.counts()
	w := okAnswer()
	w.uint(uint64(ready))
	w.uint(uint64(consumers))
	return w.b, nil
}

func (r *remoteQueues) handleInfo(_ context.Context, _ string, payload []byte) ([]byte, error) {
	rd := wireReader{b: payload}
	q, aerr := r.homeQueue(&rd, 0)
	if aerr != nil {
		return refusedAnswer(aerr), nil
	}
	b, err := json.Marshal(remoteStatus{Status: q.h.status(), Consumers: q.h.consumerInfos()})
	if err != nil {
		return nil, err
	}
	w := okAnswer()
	w.bytes(b)
	return w.b, nil
}
