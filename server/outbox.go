package server

import (
	"sync"
	"sync/atomic"

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
	waiting []queueHandle
	closed  bool
	// full mirrors len(buf) >= limit so queues can check for room without
	// taking mu; it is set by appends and cleared when the writer takes buf.
	full atomic.Bool
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
func (o *outbox) reserve(q queueHandle) bool {
	if !o.full.Load() {
		return true // the common case, without the lock
	}
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
		o.noteSizeLocked()
	}
	o.mu.Unlock()
	o.signal()
}

// A method frame is built in place in three steps, so hot callers pass
// concrete method structs that stay on the stack (a generic helper would call
// AppendTo through a dictionary and move them to the heap):
//
//	start, ok := o.beginMethodLocked(channel)
//	if ok {
//		o.buf = m.AppendTo(o.buf)
//		o.endMethodLocked(start) // or o.endWithContentLocked(start, ...)
//	}
//
// The caller holds o.mu and signals the writer afterwards.

// beginMethodLocked starts a method frame; ok is false once the outbox is closed.
func (o *outbox) beginMethodLocked(channel uint16) (start int, ok bool) {
	if o.closed {
		return 0, false
	}
	o.buf, start = amqp.BeginFrame(o.buf, amqp.TypeMethod, channel)
	return start, true
}

// endMethodLocked finishes a method frame without content.
func (o *outbox) endMethodLocked(start int) {
	o.buf = amqp.EndFrame(o.buf, start)
	o.noteSizeLocked()
}

// noteSizeLocked raises the full flag once the buffer reaches its limit; the
// writer lowers it when it takes the buffer.
func (o *outbox) noteSizeLocked() {
	if len(o.buf) >= o.limit && !o.full.Load() {
		o.full.Store(true)
	}
}

// endWithContentLocked finishes a method frame and appends its content
// header and body frames.
func (o *outbox) endWithContentLocked(start int, channel uint16, frameMax uint32, props, body []byte) {
	o.buf = amqp.EndFrame(o.buf, start)
	o.buf = amqp.AppendContent(o.buf, channel, frameMax, props, body)
	o.noteSizeLocked()
}

// take swaps out the pending bytes and queues to wake. spare is an empty buffer
// the writer has finished with, reused to avoid allocation.
func (o *outbox) take(spare []byte) (out []byte, waiting []queueHandle) {
	o.mu.Lock()
	out = o.buf
	o.buf = spare[:0]
	if !o.closed {
		o.full.Store(false)
	}
	waiting = o.waiting
	o.waiting = nil
	o.mu.Unlock()
	return out, waiting
}

// close makes further appends no-ops.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.full.Store(true) // reserve then takes the lock and sees closed
	o.waiting = nil
	o.mu.Unlock()
	o.signal()
}
