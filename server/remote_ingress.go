package server

import (
	"context"
)

// The ingress side of remote consumers: this node's consumers of queues
// homed elsewhere, keyed by the number the home names them with, and the
// handler of the home's pushes.

func (r *remoteQueues) addConsumer(rc *remoteConsumer) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextKey++
	r.consumers[r.nextKey] = rc
	return r.nextKey
}

func (r *remoteQueues) removeConsumer(key uint64) {
	r.mu.Lock()
	rc := r.consumers[key]
	delete(r.consumers, key)
	r.mu.Unlock()
	if rc != nil {
		rc.retire()
	}
}

// takeConsumer removes c and returns its key; when it returns, no pushed
// delivery to c is in progress or follows.
func (r *remoteQueues) takeConsumer(c *consumer) (uint64, bool) {
	r.mu.Lock()
	var found *remoteConsumer
	var key uint64
	for k, rc := range r.consumers {
		if rc.c == c {
			found, key = rc, k
			delete(r.consumers, k)
			break
		}
	}
	r.mu.Unlock()
	if found == nil {
		return 0, false
	}
	found.retire()
	return key, true
}

// keyOf is c's key, or 0 for basic.get (c nil) and a consumer cancelled
// meanwhile: the home then settles without returning credit.
func (r *remoteQueues) keyOf(c *consumer) uint64 {
	if c == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, rc := range r.consumers {
		if rc.c == c {
			return key
		}
	}
	return 0
}

// takeConsumersOf removes and returns the consumers of h (its queue was
// deleted).
func (r *remoteQueues) takeConsumersOf(h *remoteQueue) []*consumer {
	r.mu.Lock()
	var gone []*remoteConsumer
	for key, rc := range r.consumers {
		if rc.h == h {
			gone = append(gone, rc)
			delete(r.consumers, key)
		}
	}
	r.mu.Unlock()
	cs := make([]*consumer, len(gone))
	for i, rc := range gone {
		rc.retire()
		cs[i] = rc.c
	}
	return cs
}

func (r *remoteQueues) lookupConsumer(key uint64) *remoteConsumer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.consumers[key]
}

func (r *remoteQueues) registerIngress(reg peerRegistrar) {
	reg.Handle(rpcDeliver, r.handleDeliver)
}

// Kinds of pushed items.
const (
	pushDeliver   = 0
	pushCancelled = 1
)

// handleDeliver takes a home's push: deliveries to this node's consumers
// and cancellations (the queue was deleted). It answers the deliveries it
// could not make (the consumer was cancelled here meanwhile), which the
// home requeues. It returns once the consumers' connections have buffer
// room, so a slow client slows its home's pushes.
func (r *remoteQueues) handleDeliver(ctx context.Context, from string, payload []byte) ([]byte, error) {
	rd := wireReader{b: payload}
	n := rd.count()
	var refused []uint64 // key, id pairs
	var wait []*remoteConsumer
	for range n {
		kind, key := rd.uint(), rd.uint()
		if kind == pushCancelled {
			if rc := r.lookupConsumer(key); rc != nil {
				r.removeConsumer(key)
				rc.c.sink.cancelled(rc.c)
			}
			continue
		}
		m := rd.outgoing()
		if rd.err != nil {
			return nil, rd.err
		}
		rc := r.lookupConsumer(key)
		if rc == nil || !r.deliverPushed(ctx, rc, m) {
			refused = append(refused, key, m.id)
			continue
		}
		if len(wait) == 0 || wait[len(wait)-1] != rc {
			wait = append(wait, rc)
		}
	}
	if rd.err != nil {
		return nil, rd.err
	}
	for _, rc := range wait {
		r.awaitRoom(ctx, rc)
	}
	w := okAnswer()
	w.uint(uint64(len(refused) / 2))
	for _, v := range refused {
		w.uint(v)
	}
	return w.b, nil
}

// deliverPushed hands m to rc's channel unless rc is gone or its channel
// dropped it; the check and the hand-over are one step under rc.mu.
func (r *remoteQueues) deliverPushed(ctx context.Context, rc *remoteConsumer, m outgoing) bool {
	if !r.awaitSubscribed(ctx, rc) {
		return false
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.gone || !rc.c.sink.subscribed(rc.c) {
		return false
	}
	if !rc.c.noAck {
		rc.c.sink.charge(rc.c) // the channel's prefetch count; settle releases it
	}
	rc.c.sink.deliver(rc.c, m)
	return true
}

// awaitSubscribed waits for consume-ok to have been sent to rc's client.
func (r *remoteQueues) awaitSubscribed(ctx context.Context, rc *remoteConsumer) bool {
	select {
	case <-rc.subscribed:
		return true
	case <-ctx.Done():
		return false
	case <-r.ctx.Done():
		return false
	}
}

// awaitRoom waits until rc's connection has write-buffer room (the outbox
// wakes the queue handle once it drained). Credit is the home's to count.
func (r *remoteQueues) awaitRoom(ctx context.Context, rc *remoteConsumer) {
	ch, ok := rc.c.sink.(*channel)
	if !ok {
		return
	}
	for !ch.conn.out.reserve(rc.h) {
		if !ch.subscribed(rc.c) {
			return
		}
		select {
		case <-rc.h.wake:
		case <-ctx.Done():
			return
		case <-r.ctx.Done():
			return
		}
	}
}
