package server

import (
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/msgstore"
)

// queueKind is what differs between the kinds of queue before a queue
// exists (its declare and its arguments) and the one place a queue's handle
// is chosen. A queue's kind is fixed at declare.
type queueKind interface {
	// newHandle is the handle of q, a queue of this kind.
	newHandle(q *Queue) queueHandle
	// checkDeclare refuses declare properties the kind does not support.
	checkDeclare(vh *Vhost, name string, m *amqp.QueueDeclare, qa *queueArgs) *amqp.Error
	// policyArgs adjusts a new queue's arguments by the merged policy
	// definition def.
	policyArgs(vh *Vhost, name string, declared amqp.Table, qa queueArgs, def map[string]any) queueArgs
}

// kindOf is the kind of a queue declared with qa.
func kindOf(qa *queueArgs) queueKind {
	if qa.stream != nil {
		return streamKind{}
	}
	if qa.quorum != nil {
		return quorumKind{}
	}
	if qa.mirrored {
		return mirroredKind{}
	}
	return classicKind{}
}

// classicKind is a classic queue: messages in memory, paged to its index.
type classicKind struct{}

func (classicKind) newHandle(q *Queue) queueHandle { return classicQueue{q} }

func (classicKind) checkDeclare(*Vhost, string, *amqp.QueueDeclare, *queueArgs) *amqp.Error {
	return nil
}

func (classicKind) policyArgs(vh *Vhost, name string, declared amqp.Table, qa queueArgs, def map[string]any) queueArgs {
	return effectiveQueueArgs(name, vh.name, declared, def, qa)
}

// classicQueue is a classic queue's handle: its state is the Queue's
// (queue.go, queue_disk.go, get.go).
type classicQueue struct{ q *Queue }

func (h classicQueue) queue() *Queue { return h.q }

// takesStoredCopy: durable queues share the vhost store's copy; a transient
// queue that pages stores its own copy in the transient store
// (Queue.enqueueLocked).
func (h classicQueue) takesStoredCopy(m *Message) bool {
	q := h.q
	// isDurable first: a transient queue's index is set later, under its lock.
	// A durable queue's store is set with its index when it opens and never
	// changes; the index itself is replaced when a failed one is reopened
	// (queue_reopen.go), so it is not read here, without the lock.
	return isDurable(q) && q.store != nil && (m.Persistent() || q.paging.Load())
}

func (h classicQueue) enqueue(m *Message, ttl int64, stored bool, loc msgstore.Loc) accepted {
	return accepted{res: h.q.enqueue(m, ttl, stored, loc), stored: stored}
}

func (h classicQueue) consume(c *consumer, ok func()) *amqp.Error { return h.q.addConsumer(c, ok) }

func (h classicQueue) cancel(c *consumer) bool { return h.q.removeConsumer(c) }

func (h classicQueue) redispatch() { h.q.dispatch() }

func (h classicQueue) get(max int, noAck bool, each func(outgoing, int)) (int, *amqp.Error) {
	return h.q.get(max, noAck, each), nil
}

func (classicQueue) checkSettle(settleKind, uint32) *amqp.Error { return nil }

func (h classicQueue) settle(ds []delivery, kind settleKind) {
	if kind == settleRequeue {
		h.q.requeue(ds)
	} else {
		h.q.settle(ds, kind == settleDrop)
	}
}

func (h classicQueue) purge(uint32) (int, *amqp.Error) { return h.q.purge(), nil }

func (h classicQueue) deletable(ifUnused, ifEmpty bool) *amqp.Error {
	return h.q.deletable(ifUnused, ifEmpty)
}

func (h classicQueue) delete() ([]*consumer, int) { return h.q.markDeleted() }

func (h classicQueue) counts() (int, int) { return h.q.counts() }

func (h classicQueue) info() QueueInfo { return h.q.localInfo() }

func (h classicQueue) status() QueueStatus { return h.q.localStatus() }

func (h classicQueue) consumerInfos() []ConsumerInfo { return h.q.localConsumers() }

func (h classicQueue) consumerTimeout() time.Duration {
	return time.Duration(h.q.consumerTimeout.Load())
}

func (h classicQueue) touch() { h.q.touch() }

func (classicQueue) typeName() string { return "classic" }

func (h classicQueue) hasFiles() bool { return isDurable(h.q) }

func (h classicQueue) openFiles(*Server) error { return h.q.openStorage() }

func (h classicQueue) applyPolicy(def map[string]any) {
	q := h.q
	q.mu.Lock()
	current := q.qa
	q.mu.Unlock()
	q.reconfigure(effectiveQueueArgs(q.name, q.vhost.name, q.declaredArgs(), def, current))
}

// deletable refuses queue.delete with if-unused or if-empty as RabbitMQ does.
func (q *Queue) deletable(ifUnused, ifEmpty bool) *amqp.Error {
	ready, consumers := q.counts()
	return classicDeletable(q, ready, consumers, ifUnused, ifEmpty)
}

// classicDeletable is the classic rule for a queue's counts.
func classicDeletable(q *Queue, ready, consumers int, ifUnused, ifEmpty bool) *amqp.Error {
	if ifUnused && consumers > 0 {
		return amqp.NewError(amqp.PreconditionFailed, methodQueueDelete, "%s in use", describeQueue(q.name, q.vhost.name))
	}
	if ifEmpty && ready > 0 {
		return amqp.NewError(amqp.PreconditionFailed, methodQueueDelete, "%s not empty", describeQueue(q.name, q.vhost.name))
	}
	return nil
}
