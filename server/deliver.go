package server

import (
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/msgstore"
)

// publishing is one message on the one publish path, Vhost.publish, and what
// its caller wants of it: AMQP's basic.publish, the management API's publish
// and dead-lettering fill in what applies to them.
type publishing struct {
	r   *router // the caller's router: its buffers are reused
	ex  *Exchange
	m   *Message
	ttl int64 // the message's own expiration in ms, or -1
	// srv, when set, lets a direct reply-to consumer take a message published
	// to the default exchange (AMQP and the API; a dead letter never is).
	srv *Server
	// keep, when set, drops the routed queues it refuses (dead-letter cycles).
	keep func(*Queue) bool
	// batch, when set, may hold a message whose store write can wait for the
	// end of the socket read (the AMQP connection's, store_batch.go).
	batch storeDeferrer
}

// storeDeferrer holds publishes whose store write can wait (store_batch.go).
type storeDeferrer interface {
	// holdForStore takes m, routed to queues of which some will store it,
	// when its store write can wait, and reports whether it did; its queues
	// get it when the batch flushes.
	holdForStore(m *Message, queues []*Queue) bool
	// flushStores hands what it holds to its queues, before a message it
	// does not hold reaches them, so a publisher's order is kept.
	flushStores()
}

// routeResult sums up what the queues did with a message.
type routeResult struct {
	routed, rejected, stored bool
	// duplicate: the exchange's deduplication dropped the message.
	duplicate bool
	// deferred: the store batch holds the message; its confirm is registered
	// when the batch flushes.
	deferred bool
	// pending are the destinations still to make it durable (a stream's
	// append), which a confirm waits for.
	pending pendingDurables
	// storeFailed: the store refused the durable copy (a full disk), so the
	// queues that would have kept one did not get the message.
	storeFailed bool
	// fault is an error the publish closes the connection with: an x-delay
	// the delayed-message plugin crashes on (delayed.go).
	fault *amqp.Error
}

// add counts what one queue did with the message.
func (r *routeResult) add(a accepted) {
	switch a.res {
	case enqueued:
		r.routed = true
		r.stored = r.stored || a.stored
	case enqueueDuplicate:
		r.routed = true
	case enqueueRejected:
		r.routed, r.rejected = true, true
	}
	switch {
	case a.failed:
		r.pending.failed = true
	case a.wait != nil:
		r.pending.add(a.wait, a.token)
	}
}

// publish routes p's message from its exchange and hands it to every queue
// it reaches, each through its handle (a classic queue enqueues, a stream
// appends). It is the one way a message enters queues.
func (vh *Vhost) publish(p *publishing) routeResult {
	var res routeResult
	if p.ex.isDuplicate(p.m) {
		res.duplicate = true
		if p.batch != nil {
			p.batch.flushStores() // earlier held publishes are confirmed first
		}
		return res
	}
	if p.srv != nil && p.ex.name == "" && p.srv.deliverReply(p.m) {
		res.routed = true
	}
	queues := p.r.route(p.ex, p.m)
	if p.r.delayErr != nil {
		res.fault = p.r.delayErr
		if p.batch != nil {
			p.batch.flushStores()
		}
		return res
	}
	if p.keep != nil {
		kept := queues[:0]
		for _, q := range queues {
			if p.keep(q) {
				kept = append(kept, q)
			}
		}
		queues = kept
	}
	var small [8]bool
	takes, refs := vh.storedCopies(p.m, queues, small[:0])
	if len(p.r.delays) > 0 {
		// Delayed copies are written here, so the store batch, whose
		// confirm counts only queues, does not hold this publish.
		if p.batch != nil {
			p.batch.flushStores()
		}
		vh.holdDelayed(p.r.delays, p.m, p.r.delay, &res)
		clear(p.r.delays)
	} else if p.batch != nil {
		if refs > 0 && !res.routed && p.batch.holdForStore(p.m, queues) {
			// It has queues that will store it, so it counts as routed now.
			res.routed, res.deferred = true, true
			return res
		}
		p.batch.flushStores()
	}
	vh.deliverTo(p.m, queues, p.ttl, takes, refs, &res)
	return res
}

// storedCopies decides for each of queues whether it keeps a reference to
// the vhost store's one copy of m (a persistent message in a durable queue,
// or a durable queue that pages), appending to takes, and counts them. It is
// decided once per queue, so the reference count given to the store matches
// the queues that hold one.
func (vh *Vhost) storedCopies(m *Message, queues []*Queue, takes []bool) ([]bool, int) {
	if vh.storage == nil {
		return takes, 0
	}
	refs := 0
	for _, q := range queues {
		t := q.h.takesStoredCopy(m)
		takes = append(takes, t)
		if t {
			refs++
		}
	}
	return takes, refs
}

// deliverTo hands m to queues. takes and refs are storedCopies' answer: the
// queues that keep a stored copy share one, written here with refs references.
func (vh *Vhost) deliverTo(m *Message, queues []*Queue, ttl int64, takes []bool, refs int, res *routeResult) {
	var loc msgstore.Loc
	storeFailed := false
	if refs > 0 {
		var err error
		loc, err = vh.storage.put(m, refs)
		vh.storage.noteWrite(err)
		if err != nil {
			// Without the store the message still reaches the other queues.
			res.rejected, storeFailed, res.storeFailed = true, true, true
		}
	}
	for i, q := range queues {
		t := refs > 0 && takes[i]
		if t && storeFailed {
			continue // the durable copy failed: do not take it in memory only
		}
		res.add(q.h.enqueue(m, ttl, t, loc))
	}
}
