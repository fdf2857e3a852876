package server

import "github.com/warrenmq/warren/msgstore"

// queued is a message's place in one queue.
type queued struct {
	msg *Message
	// seq orders the queue: a requeued message goes back to its original place.
	seq         uint64
	redelivered bool
	// expiresAt is when the message expires in this queue, in unix
	// milliseconds; 0 means never.
	expiresAt int64
	// deliveries counts failed deliveries (returns to the queue), for
	// x-delivery-limit and the x-delivery-count header.
	deliveries uint32
	priority   uint8
	// persistent is msg.Persistent(), read from the properties once per
	// queue: the tallies ask it at every push, pop, delivery and settle.
	persistent bool
	// disk is where a stored message is recorded (nil if it is only in
	// memory). A pointer keeps queued small on the in-memory path.
	disk *diskRef
}

// diskRef is a stored message's queue index entry and message store record.
type diskRef struct {
	seq uint64 // queue index sequence id
	loc msgstore.Loc
}

// readyList is one priority level of a queue's ready messages, ordered by seq.
// Pops and pushes at either end are O(1) amortised; a requeue into the middle
// shifts.
type readyList struct {
	items []queued
	head  int
}

func (r *readyList) len() int { return len(r.items) - r.head }

func (r *readyList) push(q queued) { r.items = append(r.items, q) }

func (r *readyList) front() *queued { return &r.items[r.head] }

func (r *readyList) pop() queued {
	q := r.items[r.head]
	r.items[r.head] = queued{}
	r.head++
	if r.head == len(r.items) {
		r.items, r.head = r.items[:0], 0
	} else if r.head >= 1024 && r.head*2 >= len(r.items) {
		n := copy(r.items, r.items[r.head:])
		clear(r.items[n:])
		r.items, r.head = r.items[:n], 0
	}
	return q
}

// requeue puts q back in seq order.
func (r *readyList) requeue(q queued) {
	live := r.items[r.head:]
	if len(live) == 0 || q.seq > live[len(live)-1].seq {
		r.items = append(r.items, q)
		return
	}
	if q.seq < live[0].seq && r.head > 0 {
		r.head--
		r.items[r.head] = q
		return
	}
	lo, hi := 0, len(live)
	for lo < hi {
		mid := (lo + hi) / 2
		if live[mid].seq < q.seq {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	at := r.head + lo
	r.items = append(r.items, queued{})
	copy(r.items[at+1:], r.items[at:])
	r.items[at] = q
}

// drain removes and returns every message.
func (r *readyList) drain() []queued {
	out := append([]queued(nil), r.items[r.head:]...)
	clear(r.items)
	r.items, r.head = r.items[:0], 0
	return out
}

// readySet is a queue's ready messages: one readyList per priority level
// (just one for a plain queue), highest level served first.
type readySet struct {
	levels []readyList
	tally
}

// tally counts messages and their body bytes, all of them and the
// persistent ones, as they come and go under the queue's lock, so the
// management API reads a queue's figures without visiting its messages.
type tally struct {
	count, bytes                int
	persistent, persistentBytes int
}

func (t *tally) add(q queued) {
	t.count++
	t.bytes += q.msg.size()
	if q.persistent {
		t.persistent++
		t.persistentBytes += q.msg.size()
	}
}

func (t *tally) remove(q queued) {
	t.count--
	t.bytes -= q.msg.size()
	if q.persistent {
		t.persistent--
		t.persistentBytes -= q.msg.size()
	}
}

func newReadySet(maxPriority uint8) readySet {
	return readySet{levels: make([]readyList, int(maxPriority)+1)}
}

func (s *readySet) len() int { return s.count }

func (s *readySet) push(q queued) {
	s.levels[q.priority].push(q)
	s.add(q)
}

func (s *readySet) requeue(q queued) {
	s.levels[q.priority].requeue(q)
	s.add(q)
}

// front returns the level holding the next message to deliver, or nil.
func (s *readySet) front() *readyList {
	for i := len(s.levels) - 1; i >= 0; i-- {
		if s.levels[i].len() > 0 {
			return &s.levels[i]
		}
	}
	return nil
}

func (s *readySet) pop() queued {
	l := &s.levels[0]
	if len(s.levels) > 1 {
		l = s.front()
	}
	q := l.pop()
	s.remove(q)
	return q
}

// popOldest removes the message that entered the queue first, whatever its
// priority (drop-head overflow drops the oldest).
func (s *readySet) popOldest() queued {
	var best *readyList
	for i := range s.levels {
		l := &s.levels[i]
		if l.len() > 0 && (best == nil || l.front().seq < best.front().seq) {
			best = l
		}
	}
	q := best.pop()
	s.remove(q)
	return q
}

func (s *readySet) drain() []queued {
	var out []queued
	for i := range s.levels {
		out = append(out, s.levels[i].drain()...)
	}
	s.tally = tally{}
	return out
}
