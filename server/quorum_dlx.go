package server

import (
	"slices"
	"time"
)

// At-least-once dead-lettering (x-dead-letter-strategy at-least-once), as
// RabbitMQ 3.10's rabbit_fifo_dlx and rabbit_fifo_dlx_worker do it.
//
// It is effective only with a dead-letter exchange and x-overflow
// reject-publish (rabbit_quorum_queue:dlh); with drop-head the queue falls
// back to at-most-once and logs RabbitMQ's warning, since dropping the head
// to make room would discard what waits to be dead-lettered.
//
// A message the classic code dead-letters is not settled: its DISCARD
// record (with the reason) goes to the log and the message waits in the
// queue's dlx set, out of the queue (not delivered, not in messages, shown
// as messages_dlx and message_bytes_dlx) but counted towards the length
// limit, as rabbit_fifo:is_over_limit counts it. The leader publishes each
// one to every queue the dead-letter exchange routes it to and asks each
// target for a confirm; once all targets confirmed, the message's SETTLE
// goes to the log. A message no queue takes (no exchange, no binding, a
// nack) stays and is published again every quorumDLXRetry to the targets
// that have not confirmed it (rabbit_fifo_dlx_worker's settle timeout,
// dead_letter_worker_publisher_confirm_timeout, 180 s). A new leader
// rebuilds the set from the log's DISCARDs and publishes them all again:
// a target may get a message twice, never none.

// quorumDLXRetry is how long a dead letter waits between publishes.
var quorumDLXRetry = 180 * time.Second

// Dead-letter strategies, as the API shows the effective one.
const (
	dlStrategyAtMostOnce  = "at-most-once"
	dlStrategyAtLeastOnce = "at-least-once"
)

// quorumDLStrategy is rabbit_quorum_queue:dlh: the effective strategy of a
// quorum queue's arguments ("" without a dead-letter exchange) and the
// warning RabbitMQ logs when the asked strategy is not the effective one.
func quorumDLStrategy(qa *queueArgs) (strategy, warning string) {
	asked := qa.quorum != nil && qa.quorum.atLeastOnceAsked
	switch {
	case !qa.hasDLX && asked:
		return "", "disabling dead-lettering despite configured dead-letter-strategy 'at-least-once' because dead-letter-exchange is not configured"
	case !qa.hasDLX:
		return "", ""
	case asked && qa.overflow == overflowRejectPublish:
		return dlStrategyAtLeastOnce, ""
	case asked:
		return dlStrategyAtMostOnce, "falling back to dead-letter-strategy at-most-once because configured dead-letter-strategy " +
			"at-least-once is incompatible with effective overflow strategy drop-head; to enable dead-letter-strategy at-least-once, set overflow strategy to reject-publish"
	}
	return dlStrategyAtMostOnce, ""
}

// quorumDLX is a leader's set of messages dead-lettered at least once and
// not yet confirmed by their targets. Guarded by Queue.mu.
type quorumDLX struct {
	held     map[uint64]*dlxEntry
	n, bytes int // messages_dlx, message_bytes_dlx
	// running: a goroutine is publishing; again: more became due meanwhile.
	running, again bool
	timer          *time.Timer // the next retry
	stopped        bool        // the leader stepped down or closed
}

// dlxEntry is one message waiting for its dead-letter targets.
type dlxEntry struct {
	d deadLetter
	m *Message // the dead-lettered copy, built at its first publish
	// settled are the targets that confirmed it.
	settled []string
	// round counts publishes; a confirm of an older round is ignored.
	round    uint64
	inflight int  // targets of this round yet to answer
	failed   bool // a target of this round nacked it
	due      bool // to publish at the next pass
	lastPub  time.Time
}

func newQuorumDLX() *quorumDLX { return &quorumDLX{held: make(map[uint64]*dlxEntry)} }

// holdLocked takes the dead letters of messages in the log (seq != 0) into
// the set: their SETTLE, noted by forgetLocked, becomes a DISCARD. It
// returns the others, dead-lettered at most once.
func (j *quorumJournal) holdLocked(dead []deadLetter) []deadLetter {
	x := j.dlx
	rest := dead[:0]
	var ids map[uint64]bool
	for _, d := range dead {
		if d.m.seq == 0 {
			rest = append(rest, d)
			continue
		}
		if ids == nil {
			ids = make(map[uint64]bool, len(dead))
		}
		ids[d.m.seq] = true
		x.addLocked(d, true)
		j.discard = append(j.discard, quorumDiscard{id: d.m.seq, reason: d.reason})
	}
	if ids != nil {
		j.settle = slices.DeleteFunc(j.settle, func(id uint64) bool { return ids[id] })
	}
	return rest
}

func (x *quorumDLX) addLocked(d deadLetter, due bool) {
	if _, ok := x.held[d.m.seq]; ok {
		return
	}
	x.held[d.m.seq] = &dlxEntry{d: d, due: due}
	x.n++
	x.bytes += len(d.m.msg.Body)
}

// dlxLenLocked is the count and body bytes of the dlx set.
func (q *Queue) dlxLenLocked() (int, int) {
	if q.journal == nil || q.journal.dlx == nil {
		return 0, 0
	}
	return q.journal.dlx.n, q.journal.dlx.bytes
}

// setDLStrategy applies the queue's effective strategy (at open and at a
// policy change). Leaving at-least-once dead-letters what the set holds
// at most once, as rabbit_fifo_dlx does when its handler changes.
func (h *quorumQueue) setDLStrategy() {
	q := h.q
	q.mu.Lock()
	strategy, warning := quorumDLStrategy(&q.qa)
	j := q.journal
	var dead []deadLetter
	switch {
	case strategy == dlStrategyAtLeastOnce && j.dlx == nil:
		j.dlx = newQuorumDLX()
	case strategy != dlStrategyAtLeastOnce && j.dlx != nil:
		for id, e := range j.dlx.held {
			dead = append(dead, e.d)
			j.note(qrSettle, id)
		}
		j.dlx.stopLocked()
		j.dlx = nil
	}
	q.mu.Unlock()
	if warning != "" {
		q.vhost.log.Warn("quorum queue: "+warning, "queue", q.name)
	}
	q.publishDeadLetters(dead)
	h.flush()
	h.kickDLX()
}

func (x *quorumDLX) stopLocked() {
	x.stopped = true
	if x.timer != nil {
		x.timer.Stop()
		x.timer = nil
	}
}

// kickDLX writes the journal (the DISCARDs before any publish of theirs)
// and publishes the due dead letters. One caller publishes at a time; the
// others leave what they found due to it.
func (h *quorumQueue) kickDLX() {
	h.mu.Lock()
	open := h.r != nil
	h.mu.Unlock()
	if !open {
		return // openFiles kicks it once the replica runs
	}
	q := h.q
	q.mu.Lock()
	x := q.journal.dlx
	if x == nil || x.stopped {
		q.mu.Unlock()
		return
	}
	if x.running {
		x.again = true
		q.mu.Unlock()
		return
	}
	x.running = true
	q.mu.Unlock()
	h.flush()
	q.mu.Lock()
	for !x.stopped {
		x.again = false
		due := x.takeDueLocked(time.Now())
		qa := q.qa
		q.mu.Unlock()
		for _, e := range due {
			h.publishDeadLetter(x, e, &qa)
		}
		q.mu.Lock()
		if !x.again {
			break
		}
	}
	x.running = false
	if !x.stopped && x.n > 0 && x.timer == nil {
		x.timer = time.AfterFunc(quorumDLXRetry, h.retryDLX)
	}
	q.mu.Unlock()
	h.flush() // the settlements of targets that confirmed at once
}

// retryDLX marks what waited quorumDLXRetry due again and publishes it.
func (h *quorumQueue) retryDLX() {
	q := h.q
	q.mu.Lock()
	x := q.journal.dlx
	if x == nil || x.stopped {
		q.mu.Unlock()
		return
	}
	x.timer = nil
	now := time.Now()
	for _, e := range x.held {
		if !e.lastPub.IsZero() && now.Sub(e.lastPub) >= quorumDLXRetry {
			e.due = true
		}
	}
	q.mu.Unlock()
	h.kickDLX()
}

// takeDueLocked returns the entries to publish now, each with a new round.
func (x *quorumDLX) takeDueLocked(now time.Time) []dlxPublish {
	var out []dlxPublish
	for _, e := range x.held {
		if !e.due {
			continue
		}
		e.due, e.round, e.inflight, e.failed, e.lastPub = false, e.round+1, 0, false, now
		out = append(out, dlxPublish{e: e, round: e.round, settled: slices.Clone(e.settled)})
	}
	slices.SortFunc(out, func(a, b dlxPublish) int { return cmpUint64(a.e.d.m.seq, b.e.d.m.seq) })
	return out
}

// dlxPublish is one entry's publish round, read outside Queue.mu.
type dlxPublish struct {
	e       *dlxEntry
	round   uint64
	settled []string
}

// publishDeadLetter publishes one round of a dead letter to the targets
// the dead-letter exchange routes it to now, less those that confirmed it
// already. With no target it stays for the next retry, unless a target
// confirmed it before (rabbit_fifo_dlx_worker:redeliver0 settles it then).
func (h *quorumQueue) publishDeadLetter(x *quorumDLX, p dlxPublish, qa *queueArgs) {
	q := h.q
	e := p.e
	m := e.m // set and read only by the one publishing goroutine (x.running)
	if m == nil {
		var err error
		if m, err = q.deadLetterMessage(e.d, qa); err != nil {
			// The properties were validated at publish; only a broker bug
			// gets here, and no retry can publish the message.
			q.vhost.log.Error("dead-lettering: undecodable properties; message dropped", "queue", q.name, "err", err)
			h.dlxDone(x, e, p.round)
			return
		}
		e.m = m
	}
	var targets []*Queue
	if ex := q.vhost.exchange(qa.dlx); ex != nil {
		for _, t := range newRouter().route(ex, m) {
			if slices.Contains(p.settled, t.name) ||
				(e.d.reason != reasonRejected && isDeadLetterCycle(m, t.name)) {
				continue
			}
			targets = append(targets, t)
		}
	}
	if len(targets) == 0 {
		if len(p.settled) > 0 {
			h.dlxDone(x, e, p.round)
		}
		return
	}
	q.mu.Lock()
	if e.round != p.round {
		q.mu.Unlock()
		return
	}
	e.inflight = len(targets)
	q.mu.Unlock()
	for _, t := range targets {
		h.deliverDeadLetter(x, e, p.round, m, t)
	}
}

// deliverDeadLetter hands m to target t and asks it for a confirm, as a
// confirm-mode channel's publish does (confirmRouted).
func (h *quorumQueue) deliverDeadLetter(x *quorumDLX, e *dlxEntry, round uint64, m *Message, t *Queue) {
	vh := h.q.vhost
	var res routeResult
	var small [1]bool
	one := []*Queue{t}
	takes, refs := vh.storedCopies(m, one, small[:0])
	vh.deliverTo(m, one, -1, takes, refs, &res)
	name := t.name
	n := res.pending.count()
	if res.stored {
		n++
	}
	switch {
	case !res.routed, res.rejected, res.pending.failed:
		h.dlxAnswered(x, e, round, name, false)
	case n == 0:
		h.dlxAnswered(x, e, round, name, true)
	default:
		tr := &confirmTracker{notify: func(_ uint64, ack bool) { h.dlxAnswered(x, e, round, name, ack) }}
		c := tr.expect(1, n)
		res.pending.completeWhenDurable(c)
		if res.stored {
			vh.storage.await(c)
		}
	}
}

// dlxAnswered records target's confirm (ok) or nack of a round. When the
// round's last target answered and none nacked, the message is settled;
// after a nack it waits for the retry.
func (h *quorumQueue) dlxAnswered(x *quorumDLX, e *dlxEntry, round uint64, target string, ok bool) {
	q := h.q
	q.mu.Lock()
	if e.round != round || x.held[e.d.m.seq] != e {
		q.mu.Unlock()
		return
	}
	if ok {
		e.settled = append(e.settled, target)
	} else {
		e.failed = true
	}
	e.inflight--
	done := e.inflight == 0 && !e.failed
	q.mu.Unlock()
	if done {
		h.dlxDone(x, e, round)
	}
}

// dlxDone settles a dead letter its targets took and appends its SETTLE.
func (h *quorumQueue) dlxDone(x *quorumDLX, e *dlxEntry, round uint64) {
	if h.dlxDoneLocked(x, e, round) {
		h.flush()
	}
}

func (h *quorumQueue) dlxDoneLocked(x *quorumDLX, e *dlxEntry, round uint64) bool {
	q := h.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if e.round != round || x.held[e.d.m.seq] != e || x.stopped {
		return false
	}
	delete(x.held, e.d.m.seq)
	x.n--
	x.bytes -= len(e.d.m.msg.Body)
	q.journal.note(qrSettle, e.d.m.seq)
	q.stats.deadLetterd.inc()
	if x.n == 0 && x.timer != nil {
		x.timer.Stop()
		x.timer = nil
	}
	return true
}
