package server

import (
	"sync"

	"github.com/warrenmq/warren/amqp"
)

// outbox is one connection's pending output. Any goroutine appends frames under
// mu (a memory copy, never socket I/O); the connection's writer goroutine swaps
// the buffer out and writes it with one syscall, so many deliveries and confirms
// coalesce into few writes.
//
// mu is a leaf lock: nothing else is locked while it is held.
type outbox struct {
	mu    sync.Mutex
	buf   []byte
	limit int
	// waiting are queues that skipped this connection's consumers because buf was
	// over limit; the writer wakes them once it has drained buf.
	waiting []*Queue
	closed  bool
	// kick wakes the writer; 1-buffered so a send never blocks.
	kick chan struct{}
}

func newOutbox(limit int) *outbox {
	return &outbox{limit: limit, kick: make(chan struct{}, 1), buf: make([]byte, 0, 16<<10)}
}

func (o *outbox) signal() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// reserve reports whether a queue may write a delivery now. When the buffer is
// over its limit it records q to be woken later and returns false.
func (o *outbox) reserve(q *Queue) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	if len(o.buf) < o.limit {
		return true
	}
	for _, w := range o.waiting {
		if w == q {
			return false
		}
	}
	o.waiting = append(o.waiting, q)
	return false
}

// sendMethod appends one method frame and wakes the writer. m should be a
// pointer to a stack value: it is only encoded, never kept.
func (o *outbox) sendMethod(channel uint16, m amqp.Method) {
	o.mu.Lock()
	if !o.closed {
		o.buf = amqp.AppendMethodFrame(o.buf, channel, m)
	}
	o.mu.Unlock()
	o.signal()
}

// appendMethodLocked appends a method frame; the caller holds o.mu and
// signals the writer afterwards. Generic so hot callers pass concrete
// structs that stay on the stack.
func appendMethodLocked[M interface{ AppendTo([]byte) []byte }](o *outbox, channel uint16, m M) {
	if o.closed {
		return
	}
	var start int
	o.buf, start = amqp.BeginFrame(o.buf, amqp.TypeMethod, channel)
	o.buf = m.AppendTo(o.buf)
	o.buf = amqp.EndFrame(o.buf, start)
}

// appendWithContentLocked appends a method frame followed by its content
// header and body frames; the caller holds o.mu and signals afterwards.
func appendWithContentLocked[M interface{ AppendTo([]byte) []byte }](o *outbox, channel uint16, frameMax uint32, m M, props, body []byte) {
	if o.closed {
		return
	}
	var start int
	o.buf, start = amqp.BeginFrame(o.buf, amqp.TypeMethod, channel)
	o.buf = m.AppendTo(o.buf)
	o.buf = amqp.EndFrame(o.buf, start)
	o.buf = amqp.AppendContent(o.buf, channel, frameMax, props, body)
}

// take swaps out the pending bytes and queues to wake. spare is an empty buffer
// the writer has finished with, reused to avoid allocation.
func (o *outbox) take(spare []byte) (out []byte, waiting []*Queue) {
	o.mu.Lock()
	out = o.buf
	o.buf = spare[:0]
	waiting = o.waiting
	o.waiting = nil
	o.mu.Unlock()
	return out, waiting
}

// close makes further appends no-ops.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.waiting = nil
	o.mu.Unlock()
	o.signal()
}
