package server

import (
	"sync"

	"github.com/warrenmq/warren/amqp"
)

// Confirm states.
const (
	confirmWaiting uint8 = iota // waiting for the disk
	confirmAck
	confirmNack
)

// confirmTracker orders a confirm-mode channel's publisher confirms. Publishes
// that only touched memory are settled at once; those written to disk are
// settled by the vhost's committer after the fsync. Confirms go out in publish
// order, coalesced: a run of acks becomes one basic.ack with multiple=true.
//
// mu is a leaf lock apart from the outbox lock taken while sending.
type confirmTracker struct {
	mu      sync.Mutex
	entries []confirmEntry // unsent, ordered by seq
	head    int
	closed  bool
	acked   uint64 // basic.ack confirms sent, for the management API
}

type confirmEntry struct {
	seq   uint64
	state uint8
}

// add records publish seq in state.
func (t *confirmTracker) add(seq uint64, state uint8) {
	t.mu.Lock()
	t.entries = append(t.entries, confirmEntry{seq: seq, state: state})
	t.mu.Unlock()
}

// settle marks a waiting publish as acked or nacked; false if it is unknown
// (the channel closed meanwhile).
func (t *confirmTracker) settle(seq uint64, ok bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
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
		return false
	}
	if ok {
		t.entries[lo].state = confirmAck
	} else {
		t.entries[lo].state = confirmNack
	}
	return true
}

// flush sends every settled confirm at the front, in order, on channel id.
func (t *confirmTracker) flush(o *outbox, channel uint16) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	sent := false
	var runStart, runEnd uint64 // a run of acks not yet sent
	emitRun := func() {
		if runEnd == 0 {
			return
		}
		ack := amqp.BasicAck{DeliveryTag: runEnd, Multiple: runEnd > runStart}
		if start, ok := o.beginMethodLocked(channel); ok {
			o.buf = ack.AppendTo(o.buf)
			o.endMethodLocked(start)
		}
		runStart, runEnd, sent = 0, 0, true
	}
	o.mu.Lock()
	for t.head < len(t.entries) && t.entries[t.head].state != confirmWaiting {
		e := t.entries[t.head]
		t.head++
		if e.state == confirmAck {
			t.acked++
			if runEnd == 0 {
				runStart = e.seq
			}
			runEnd = e.seq
			continue
		}
		emitRun()
		nack := amqp.BasicNack{DeliveryTag: e.seq}
		if start, ok := o.beginMethodLocked(channel); ok {
			o.buf = nack.AppendTo(o.buf)
			o.endMethodLocked(start)
		}
		sent = true
	}
	emitRun()
	o.mu.Unlock()
	if t.head == len(t.entries) {
		t.entries, t.head = t.entries[:0], 0
	} else if t.head > 1024 && t.head*2 > len(t.entries) {
		n := copy(t.entries, t.entries[t.head:])
		t.entries, t.head = t.entries[:n], 0
	}
	if sent {
		o.signal()
	}
}

// close drops unsent confirms: the channel is gone.
func (t *confirmTracker) close() {
	t.mu.Lock()
	t.closed = true
	t.entries, t.head = nil, 0
	t.mu.Unlock()
}
