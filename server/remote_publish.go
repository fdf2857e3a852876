package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/cluster"
)

// A homeLink forwards one node's publishes and settlements to one home
// node. Publishes are batched: while one batch is with the home (which
// answers once its copies are durable, after its own confirm), the next
// collects, so a busy link sends many publishes per rpc and a quiet one
// sends each at once. One batch in flight keeps the publishers' order
// without sequence reordering on the home. The collecting batch is bounded
// (the window); a publisher that finds it full waits, which stops its
// channel reading its socket, as RabbitMQ's credit flow does.
type homeLink struct {
	r    *remoteQueues
	home string

	mu      sync.Mutex
	room    *sync.Cond // signalled when the sender takes the collecting batch
	open    []fwdPublish
	bytes   int
	sending []fwdPublish // the batch with the home
	spare   []fwdPublish // the array of the last batch answered, cleared, for the next to collect in
	// base is the token of open[0] (and of sending[0] before it), so a
	// token finds its entry by subtraction; tokens below done are
	// answered, and failed holds the recent failed ones among them.
	base, sendBase, done uint64
	failed               map[uint64]struct{}
	kick                 chan struct{}

	settles    []fwdSettle
	settleKick chan struct{}
	// downs counts the times the home was declared down (NodeDown):
	// settlements that failed before are dropped then, not retried, since
	// the home has returned or will return those deliveries itself.
	downs atomic.Uint64
}

// fwdPublish is one message for one or more queues of the same home.
type fwdPublish struct {
	vhost string
	queue string   // the first queue
	more  []string // the others, for a fan-out to queues of one home
	m     *Message
	ttl   int64
	// wait and waits are the confirms waiting for the home's answer: most
	// entries have one, kept inline, so a forwarded publish allocates no
	// slice of its own (wait.t is nil while there is none).
	wait  completion
	waits []completion
}

// addWait registers c for the home's answer to e.
func (e *fwdPublish) addWait(c completion) {
	if e.wait.t == nil {
		e.wait = c
	} else {
		e.waits = append(e.waits, c)
	}
}

// appendWaits appends e's confirms to cs.
func (e *fwdPublish) appendWaits(cs []completion) []completion {
	if e.wait.t != nil {
		cs = append(cs, e.wait)
	}
	return append(cs, e.waits...)
}

// The forwarding window: a batch collects at most this many publishes or
// bytes of bodies before publishers wait (RabbitMQ's soft limit is 32
// outstanding commands per queue; a batch is one command here).
const (
	linkMaxBatch   = 2048
	linkMaxBytes   = 8 << 20
	linkKeepFailed = 1 << 16 // failed tokens remembered for late whenDurable calls
	// maxForwardedBody is the largest body one rpc frame carries, with
	// 1 MiB for the properties and names around it: every body
	// max-message-size allows (at most 512 MiB), so a forwarded publish,
	// delivery or get is never refused for its size. A batch holding one
	// is that body alone (the window above counts bytes).
	maxForwardedBody = cluster.MaxRPCFrame - 1<<20
)

func newHomeLink(r *remoteQueues, home string) *homeLink {
	l := &homeLink{r: r, home: home, kick: make(chan struct{}, 1), settleKick: make(chan struct{}, 1),
		base: 1, done: 1, failed: make(map[uint64]struct{})}
	l.room = sync.NewCond(&l.mu)
	return l
}

// enqueue adds m for queue q to the collecting batch and returns its token.
// Consecutive enqueues of one message to queues of the same home (a
// fan-out) share one entry, so the message crosses once.
func (l *homeLink) enqueue(q *Queue, m *Message, ttl int64) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.open); n > 0 && l.open[n-1].m == m && l.open[n-1].vhost == q.vhost.name {
		l.open[n-1].more = append(l.open[n-1].more, q.name)
		return l.base + uint64(n-1), true
	}
	for len(l.open) > 0 && (len(l.open) >= linkMaxBatch || l.bytes+len(m.Body) > linkMaxBytes) && l.r.ctx.Err() == nil {
		l.room.Wait()
	}
	if l.r.ctx.Err() != nil {
		return 0, false
	}
	l.open = append(l.open, fwdPublish{vhost: q.vhost.name, queue: q.name, m: m, ttl: ttl})
	l.bytes += len(m.Body)
	if len(l.open) == 1 {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	return l.base + uint64(len(l.open)-1), true
}

// barrier waits until the home has answered every publish this node
// forwarded to it so far, so a synchronous operation that follows (get,
// purge, counts, delete) sees them, as on the publishing node's own queues.
// It returns when the node stops; a home that does not answer ends it
// within the confirm timeout.
func (l *homeLink) barrier() {
	l.mu.Lock()
	defer l.mu.Unlock()
	target := l.base + uint64(len(l.open))
	for l.done < target && l.r.ctx.Err() == nil {
		l.room.Wait()
	}
}

// whenDurable completes c once the home answered for token: the home's
// copies are durable (ack) or it refused or did not answer (nack).
func (l *homeLink) whenDurable(token uint64, c completion) {
	l.mu.Lock()
	switch {
	case token >= l.base && token-l.base < uint64(len(l.open)):
		l.open[token-l.base].addWait(c)
	case token >= l.sendBase && token-l.sendBase < uint64(len(l.sending)):
		l.sending[token-l.sendBase].addWait(c)
	default: // answered already
		_, failed := l.failed[token]
		l.mu.Unlock()
		c.done(!failed)
		return
	}
	l.mu.Unlock()
}

// publishLoop sends the collected batches, one at a time, until the node
// stops; what is collected then is nacked.
func (l *homeLink) publishLoop() {
	defer l.r.wg.Done()
	for {
		select {
		case <-l.kick:
		case <-l.r.ctx.Done():
			l.mu.Lock()
			l.room.Broadcast()
			l.mu.Unlock()
			l.sendBatch() // answered at once: the context is done
			return
		}
		for l.sendBatch() {
		}
	}
}

// sendBatch sends what has collected and completes its confirms; it
// reports whether there was anything.
func (l *homeLink) sendBatch() bool {
	l.mu.Lock()
	if len(l.open) == 0 {
		l.mu.Unlock()
		return false
	}
	l.sending, l.sendBase = l.open, l.base
	l.base += uint64(len(l.open))
	l.open, l.spare, l.bytes = l.spare, nil, 0
	batch := l.sending
	l.room.Broadcast()
	l.mu.Unlock()

	ok := l.forward(batch)

	l.mu.Lock()
	batch = l.sending // waits added while it was with the home
	l.sending = nil
	acked := make([]completion, 0, len(batch))
	var nacked []completion
	for i := range batch {
		if ok == nil || !ok[i] {
			l.failed[l.sendBase+uint64(i)] = struct{}{}
			nacked = batch[i].appendWaits(nacked)
		} else {
			acked = batch[i].appendWaits(acked)
		}
	}
	l.done = l.sendBase + uint64(len(batch))
	// The two arrays take turns, so collecting a batch does not grow a new
	// one entry by entry (a third of the link's enqueue time).
	clear(batch)
	l.spare = batch[:0]
	l.forgetFailedLocked()
	l.room.Broadcast() // and wakes barriers
	l.mu.Unlock()
	completeAll(acked, true)
	completeAll(nacked, false)
	return true
}

// forgetFailedLocked bounds the failed tokens kept for late whenDurable
// calls (a store batch registers its confirms at the end of a socket read).
func (l *homeLink) forgetFailedLocked() {
	if len(l.failed) < linkKeepFailed {
		return
	}
	for t := range l.failed {
		if l.done-t > linkKeepFailed {
			delete(l.failed, t)
		}
	}
}

// forward sends batch to the home and returns, per entry, whether the home
// took it durably; nil when the home did not answer.
func (l *homeLink) forward(batch []fwdPublish) []bool {
	if l.r.ctx.Err() != nil {
		return nil
	}
	w := wireWriter{b: make([]byte, 0, 64+len(batch)*64)}
	w.string(l.r.node)
	w.uint(l.sendBase) // the publisher ref's sequence: (ingress node, link, token)
	w.uint(uint64(len(batch)))
	for i := range batch {
		e := &batch[i]
		w.string(e.vhost)
		w.uint(uint64(1 + len(e.more)))
		w.string(e.queue)
		for _, q := range e.more {
			w.string(q)
		}
		w.string(e.m.Exchange)
		w.string(e.m.RoutingKey)
		w.bytes(e.m.RawProps)
		w.bytes(e.m.Body)
		w.int(e.ttl)
	}
	ctx, cancel := context.WithTimeout(l.r.ctx, remoteConfirmTimeout)
	defer cancel()
	ans, err := l.r.peers.Call(ctx, l.home, rpcPublish, w.b)
	if err != nil {
		l.r.s.log.Warn("forwarded publishes not confirmed by their home node", "node", l.home, "publishes", len(batch), "err", err)
		return nil
	}
	rd, aerr := readAnswer(ans, methodBasicPublish)
	if aerr != nil {
		return nil
	}
	ok := make([]bool, len(batch))
	for i := range ok {
		ok[i] = rd.bool()
	}
	if rd.err != nil {
		return nil
	}
	return ok
}

// fwdSettle is one settlement for a queue of the link's home: the ingress
// consumer's key (0 for basic.get) and the home's delivery id. An entry
// with durable set is no settlement but a mark: the home answers the batch
// that carries it only after a commit round of that vhost has stored every
// settlement before it, and the mark's channel gets the outcome.
type fwdSettle struct {
	q    *Queue
	kind settleKind
	key  uint64
	id   uint64

	durable chan error // a mark (tx.commit waiting for its acks)
	vhost   string     // the mark's vhost
}

// settle queues settlements for the home; they leave in order, batched.
func (l *homeLink) settle(ds []fwdSettle) {
	l.mu.Lock()
	l.settles = append(l.settles, ds...)
	l.mu.Unlock()
	select {
	case l.settleKick <- struct{}{}:
	default:
	}
}

// settledDurably waits until the home has stored every settlement queued
// on the link before the call, in vhost vh: what tx.commit-ok promises for
// the acks of remote deliveries, as the local commit round does for local
// ones. An error means the home did not confirm it (down, unreachable, its
// round failed).
func (l *homeLink) settledDurably(vh string) error {
	done := make(chan error, 1)
	l.settle([]fwdSettle{{durable: done, vhost: vh}})
	select {
	case err := <-done:
		return err
	case <-l.r.ctx.Done():
		return l.r.ctx.Err()
	}
}

// Retries of settlements the home did not answer.
const (
	settleRetryMin = 200 * time.Millisecond
	settleRetryMax = 2 * time.Second
)

// settleLoop sends queued settlements until the node stops. Settlements the
// home did not answer are sent again, in order, until it answers or is
// declared down: a home cut off in one direction only (it reaches this
// node, this node not it) is never declared down, and a dropped requeue or
// ack would leave its delivery held by the home for good. A home declared
// down loses them: it returns the deliveries of a node it lost.
func (l *homeLink) settleLoop() {
	defer l.r.wg.Done()
	var retry []fwdSettle // failed, for the home's current life
	var retryDowns uint64
	backoff := settleRetryMin
	for {
		if len(retry) == 0 {
			select {
			case <-l.settleKick:
			case <-l.r.ctx.Done():
				return
			}
		} else if !sleepOrDone(l.r.ctx, backoff) {
			return
		}
		l.mu.Lock()
		ds := append(retry, l.settles...)
		l.settles = nil
		l.mu.Unlock()
		if len(retry) > 0 && l.downs.Load() != retryDowns {
			l.r.s.log.Warn("settlements dropped: their home node was declared down and returns the deliveries", "node", l.home, "count", len(retry))
			ds = ds[len(retry):]
		}
		retry = nil
		if len(ds) == 0 {
			continue
		}
		downs := l.downs.Load()
		items, err := l.sendSettles(ds)
		if err == nil {
			backoff = settleRetryMin
			continue
		}
		l.r.s.log.Warn("settlements not delivered to the queue's home node: retrying", "node", l.home, "count", len(items), "err", err)
		retry, retryDowns = items, downs
		backoff = min(2*backoff, settleRetryMax)
	}
}

// sendSettles sends one batch and answers its marks; it returns the
// settlements of the batch (without the marks) and the call's error.
func (l *homeLink) sendSettles(ds []fwdSettle) ([]fwdSettle, error) {
	var items []fwdSettle
	var marks []chan error
	vhosts := map[string]bool{}
	for _, d := range ds {
		if d.durable != nil {
			marks = append(marks, d.durable)
			vhosts[d.vhost] = true
		} else {
			items = append(items, d)
		}
	}
	w := wireWriter{}
	w.uint(uint64(len(items)))
	for _, d := range items {
		w.queueRef(d.q)
		w.uint(uint64(d.kind))
		w.uint(d.key)
		w.uint(d.id)
	}
	w.uint(uint64(len(vhosts)))
	for vh := range vhosts {
		w.string(vh)
	}
	ans, err := l.r.call(l.home, rpcSettle, w.b, remoteCallTimeout)
	if err == nil && len(marks) > 0 {
		if _, aerr := readAnswer(ans, 0); aerr != nil {
			err = aerr
		}
	}
	for _, m := range marks {
		m <- err // a failed mark fails its tx.commit; the settlements are retried
	}
	return items, err
}

// sleepOrDone waits d or until ctx ends and reports whether d passed.
func sleepOrDone(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
