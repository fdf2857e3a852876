package server

import (
	"sync"

	"github.com/warrenmq/warren/amqp"
)

// confirmTracker orders a confirm-mode channel's publisher confirms.
//
// Each publish is one entry, in publish order. A publish that only touched
// memory is settled when it is recorded; one that has destinations still to
// become durable (a vhost commit round, a stream's append, and later a
// replicated commit or a remote node's publish-ok) waits with a count of
// them, and each destination completes it through a completion. The publish
// is confirmed once all are done: a nack if one failed, else an ack. Confirms
// go out in publish order, coalesced: a run of acks becomes one basic.ack
// with multiple=true.
//
// Entries live in one slice reused as a queue, so recording a publish does
// not allocate once the slice has grown to the channel's confirm window.
//
// mu is a leaf lock apart from the outbox lock taken while sending.
type confirmTracker struct {
	out     *outbox // where confirms are sent, on channel
	channel uint16
	// notify, when set instead of out, receives each confirm in order
	// under mu: a home node answering a forwarded batch (remote_home.go).
	notify func(seq uint64, ack bool)

	mu      sync.Mutex
	entries []confirmEntry // unsent, ordered by seq
	head    int
	closed  bool
	acked   uint64 // basic.ack confirms sent, for the management API
}

// confirmEntry is one publish whose confirm has not been sent.
type confirmEntry struct {
	seq     uint64
	pending uint32 // destinations not yet done; 0 when settled
	failed  bool   // a destination failed: the confirm is a nack
}

// completion is a publish's handle given to each of its destinations: each
// calls done once, when its copy is durable or has failed. It is a value (a
// pointer and a number), so handing it out does not allocate.
type completion struct {
	t   *confirmTracker
	seq uint64
}

// done completes one destination of the publish and sends the confirms that
// became ready.
func (c completion) done(ok bool) {
	if c.t.complete(c.seq, ok) {
		c.t.flush()
	}
}

// durable is done in the shape of msgstore.Log.WhenDurable's callback.
func (c completion) durable(err error) { c.done(err == nil) }

// completeAll completes one destination of each of cs with one outcome (a
// commit round's), then flushes each tracker once per run of completions
// of the same channel, so their confirms coalesce.
func completeAll(cs []completion, ok bool) {
	for _, c := range cs {
		c.t.complete(c.seq, ok)
	}
	var last *confirmTracker
	for _, c := range cs {
		if c.t != last {
			c.t.flush()
			last = c.t
		}
	}
}

// init sets where the tracker sends its confirms.
func (t *confirmTracker) init(out *outbox, channel uint16) {
	t.out, t.channel = out, channel
}

// settled records publish seq with its outcome known now; the caller
// flushes.
func (t *confirmTracker) settled(seq uint64, ack bool) {
	t.push(confirmEntry{seq: seq, failed: !ack})
}

// expect records publish seq waiting for n destinations and returns the
// completion each of them calls. n is at least 1.
func (t *confirmTracker) expect(seq uint64, n int) completion {
	t.push(confirmEntry{seq: seq, pending: uint32(n)})
	return completion{t: t, seq: seq}
}

func (t *confirmTracker) push(e confirmEntry) {
	t.mu.Lock()
	if !t.closed {
		t.entries = append(t.entries, e)
	}
	t.mu.Unlock()
}

// complete counts one destination of publish seq as done (failed unless
// ok) and reports whether that was its last, so a flush may send it. An
// unknown seq (the channel closed meanwhile) is ignored.
func (t *confirmTracker) complete(seq uint64, ok bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.findLocked(seq)
	if e == nil || e.pending == 0 {
		return false
	}
	if !ok {
		e.failed = true
	}
	e.pending--
	return e.pending == 0
}

// findLocked returns the unsent entry of seq, or nil.
func (t *confirmTracker) findLocked(seq uint64) *confirmEntry {
	if t.closed {
		return nil
	}
	lo, hi := t.head, len(t.entries)
	for lo < hi {
		mid := (lo + hi) / 2
		if t.entries[mid].seq < seq {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == len(t.entries) || t.entries[lo].seq != seq {
		return nil
	}
	return &t.entries[lo]
}

// flush sends every settled confirm at the front, in order.
func (t *confirmTracker) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.head == len(t.entries) || t.entries[t.head].pending > 0 {
		return
	}
	if t.notify != nil {
		t.notifyLocked()
		return
	}
	o := t.out
	var runStart, runEnd uint64 // a run of acks not yet sent
	o.mu.Lock()
	for t.head < len(t.entries) && t.entries[t.head].pending == 0 {
		e := t.entries[t.head]
		t.head++
		if !e.failed {
			t.acked++
			if runEnd == 0 {
				runStart = e.seq
			}
			runEnd = e.seq
			continue
		}
		t.sendAckLocked(runStart, runEnd)
		runStart, runEnd = 0, 0
		if start, ok := o.beginMethodLocked(t.channel); ok {
			o.buf = (&amqp.BasicNack{DeliveryTag: e.seq}).AppendTo(o.buf)
			o.endMethodLocked(start)
		}
	}
	t.sendAckLocked(runStart, runEnd)
	o.mu.Unlock()
	t.compactLocked()
	o.signal()
}

// notifyLocked hands the settled confirms at the front to notify.
func (t *confirmTracker) notifyLocked() {
	for t.head < len(t.entries) && t.entries[t.head].pending == 0 {
		e := t.entries[t.head]
		t.head++
		t.notify(e.seq, !e.failed)
	}
	t.compactLocked()
}

// sendAckLocked appends one basic.ack for the run of acks from..to (none
// when to is 0). o.mu is held.
func (t *confirmTracker) sendAckLocked(from, to uint64) {
	if to == 0 {
		return
	}
	if start, ok := t.out.beginMethodLocked(t.channel); ok {
		t.out.buf = (&amqp.BasicAck{DeliveryTag: to, Multiple: to > from}).AppendTo(t.out.buf)
		t.out.endMethodLocked(start)
	}
}

// compactLocked reuses the slice's front once it has been sent.
func (t *confirmTracker) compactLocked() {
	if t.head == len(t.entries) {
		t.entries, t.head = t.entries[:0], 0
	} else if t.head > 1024 && t.head*2 > len(t.entries) {
		n := copy(t.entries, t.entries[t.head:])
		t.entries, t.head = t.entries[:n], 0
	}
}

// close drops unsent confirms: the channel is gone.
func (t *confirmTracker) close() {
	t.mu.Lock()
	t.closed = true
	t.entries, t.head = nil, 0
	t.mu.Unlock()
}
