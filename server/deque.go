package server

// queued is a message's place in one queue.
type queued struct {
	msg *Message
	// seq orders the queue: a requeued message goes back to its original place.
	seq         uint64
	redelivered bool
}

// readyList is a queue's ready messages, ordered by seq. Pops and pushes at
// either end are O(1) amortised; a requeue into the middle shifts.
type readyList struct {
	items []queued
	head  int
	bytes int
}

func (r *readyList) len() int { return len(r.items) - r.head }

func (r *readyList) push(q queued) {
	r.items = append(r.items, q)
	r.bytes += q.msg.size()
}

func (r *readyList) front() *queued { return &r.items[r.head] }

func (r *readyList) pop() queued {
	q := r.items[r.head]
	r.items[r.head] = queued{}
	r.head++
	r.bytes -= q.msg.size()
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
	r.bytes += q.msg.size()
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
	// Binary search for the first item with a larger seq.
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

// drain removes and returns every ready message.
func (r *readyList) drain() []queued {
	out := append([]queued(nil), r.items[r.head:]...)
	clear(r.items)
	r.items, r.head, r.bytes = r.items[:0], 0, 0
	return out
}
