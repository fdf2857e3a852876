package server

import (
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/msgstore"
)

// streamKind is a stream: an append-only log read by offset (stream.go).
type streamKind struct{}

func (streamKind) newHandle(q *Queue) queueHandle { return streamQueue{q} }

func (streamKind) checkDeclare(vh *Vhost, name string, m *amqp.QueueDeclare, qa *queueArgs) *amqp.Error {
	return checkStreamDeclare(vh, name, m, qa.stream)
}

// policyArgs: a stream takes only the stream keys (effectiveStreamArgs);
// the classic-queue keys do not apply to it.
func (streamKind) policyArgs(vh *Vhost, name string, _ amqp.Table, qa queueArgs, def map[string]any) queueArgs {
	sa, err := effectiveStreamArgs(name, vh.name, *qa.stream, def)
	if err != nil {
		vh.log.Error("stream policy value not applied", "queue", name, "err", err)
	}
	qa.stream = &sa
	return qa
}

// streamQueue is a stream's handle. Its consumers are the stream's, each
// with a reader goroutine (stream_consumer.go), never the Queue's.
type streamQueue struct{ q *Queue }

func (h streamQueue) queue() *Queue { return h.q }

// takesStoredCopy is false: a stream keeps its messages in its own log.
func (streamQueue) takesStoredCopy(*Message) bool { return false }

// enqueue appends m to the stream's log; the confirm waits for the append to
// be durable (accepted.wait). A stream has no per-message TTL.
func (h streamQueue) enqueue(m *Message, _ int64, _ bool, _ msgstore.Loc) accepted {
	s := h.q.vhost.streams.get(h.q)
	if s == nil {
		return accepted{res: enqueueGone} // deleted meanwhile
	}
	off, err := s.append(m)
	if err != nil {
		s.logger.Error("stream append failed", "err", err)
		return accepted{res: enqueued, failed: true}
	}
	return accepted{res: enqueued, wait: logWaiter{s.log}, token: off}
}

// redispatch: a stream's readers wait for their own credit, not the
// channel's write buffer.
func (streamQueue) redispatch() {}

// get refuses: RabbitMQ 3.10 streams have no basic.get (540, which closes
// the connection; the management API answers 400 with the same text).
func (h streamQueue) get(int, bool, func(outgoing, int)) (int, *amqp.Error) {
	return 0, amqp.NewError(amqp.NotImplemented, methodBasicGet, "basic.get not supported by stream queues %s", describeQueue(h.q.name, h.q.vhost.name))
}

// checkSettle refuses nack and reject as RabbitMQ 3.10 does (540).
func (streamQueue) checkSettle(kind settleKind, method uint32) *amqp.Error {
	if kind == settleAck {
		return nil
	}
	return amqp.NewError(amqp.NotImplemented, method, "basic.nack and basic.reject not supported by stream queues")
}

// purge refuses queue.purge as RabbitMQ 3.10 does: 540, which closes the
// connection. A stream's records go only by retention.
func (h streamQueue) purge(method uint32) (int, *amqp.Error) {
	return 0, amqp.NewError(amqp.NotImplemented, method, "queue.purge not supported by stream queues %s", describeQueue(h.q.name, h.q.vhost.name))
}

func (h streamQueue) deletable(ifUnused, ifEmpty bool) *amqp.Error {
	return h.q.deletable(ifUnused, ifEmpty)
}

// delete stops the stream's goroutines (its maintenance goroutine cancels
// its consumers) and removes its files.
func (h streamQueue) delete() ([]*consumer, int) {
	closeStream(h.q, true)
	return h.q.markDeleted()
}

func (h streamQueue) counts() (int, int) { return h.q.counts() }

func (h streamQueue) info() QueueInfo { return h.q.localInfo() }

func (h streamQueue) status() QueueStatus { return h.q.localStatus() }

func (h streamQueue) consumerInfos() []ConsumerInfo { return h.q.localConsumers() }

func (h streamQueue) consumerTimeout() time.Duration {
	return time.Duration(h.q.consumerTimeout.Load())
}

func (h streamQueue) touch() { h.q.touch() }

func (streamQueue) typeName() string { return "stream" }

// hasFiles: a stream always has its log.
func (streamQueue) hasFiles() bool { return true }

// openFiles opens the stream's log. Through the management API srv is nil
// and the stream needs the server bound to the vhost's stream table
// (Server.DeclareQueue binds it).
func (h streamQueue) openFiles(srv *Server) error {
	if srv == nil {
		srv = h.q.vhost.streams.server()
	}
	if srv == nil {
		return ErrStreamNeedsAMQP
	}
	return openStream(srv, h.q)
}

// applyPolicy gives the running stream the retention def sets; the stream's
// arguments are fixed at declare.
func (h streamQueue) applyPolicy(def map[string]any) { h.q.vhost.applyStreamPolicy(h.q, def) }

// logWaiter is a stream log as the destination a confirm waits for.
type logWaiter struct{ l *msgstore.Log }

// whenDurable completes c once the record at offset off is durable under
// the stream's flush policy. The callback runs on the log's flusher
// goroutine and does not block.
func (w logWaiter) whenDurable(off uint64, c completion) {
	fn := c.durable
	if h := testHookStreamDurable.Load(); h != nil {
		fn = (*h)(fn)
	}
	w.l.WhenDurable(off, fn)
}
