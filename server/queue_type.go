package server

import (
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/msgstore"
)

// queueType is what differs between the kinds of queue on the paths every
// kind shares: the one publish path (Vhost.publish, for AMQP, the management
// API and dead-lettering) and basic.get (AMQP and the management API). A
// classic queue enqueues; a stream appends to its log. A queue's type is
// chosen at declare and never changes, so it is read without a lock (the
// queue's effective arguments, q.qa, change with policies and are read under
// Queue.mu).
type queueType interface {
	// takesStoredCopy reports whether q keeps a reference to the vhost
	// store's one copy of m, which the publish path writes once for all the
	// queues that take it.
	takesStoredCopy(q *Queue, m *Message) bool
	// accept hands m to q and says what q did with it. ttl is m's own
	// expiration in ms, or -1; stored is set when q holds a reference to the
	// shared stored copy at loc, which accept takes over.
	accept(q *Queue, m *Message, ttl int64, stored bool, loc msgstore.Loc) accepted
	// get takes up to max messages for basic.get, passing each to each, or
	// refuses with RabbitMQ's error.
	get(q *Queue, max int, noAck bool, each func(gotMessage)) (int, *amqp.Error)
}

// typeOf is the type of a queue declared with qa.
func typeOf(qa *queueArgs) queueType {
	if qa.stream != nil {
		return streamType{}
	}
	return classicType{}
}

// isStream reports whether q is a stream, for the paths that do not yet go
// through queueType (consume, cancel, settle). It takes no lock.
func (q *Queue) isStream() bool {
	_, ok := q.typ.(streamType)
	return ok
}

// accepted is what one queue did with a published message.
type accepted struct {
	res    enqueueResult
	stored bool // it keeps a reference to the stored copy
	// A stream's append: the log and the offset it gave, or that it failed.
	log          *msgstore.Log
	offset       uint64
	appendFailed bool
}

// classicType is a classic queue: messages in memory, paged to its index.
type classicType struct{}

// takesStoredCopy: durable queues share the vhost store's copy; a transient
// queue that pages stores its own copy in the transient store
// (Queue.enqueueLocked).
func (classicType) takesStoredCopy(q *Queue, m *Message) bool {
	// isDurable first: a transient queue's index is set later, under its lock.
	return isDurable(q) && q.index != nil && (m.Persistent() || q.paging.Load())
}

func (classicType) accept(q *Queue, m *Message, ttl int64, stored bool, loc msgstore.Loc) accepted {
	return accepted{res: q.enqueue(m, ttl, stored, loc), stored: stored}
}

func (classicType) get(q *Queue, max int, noAck bool, each func(gotMessage)) (int, *amqp.Error) {
	return q.get(max, noAck, each), nil
}

// streamType is a stream: an append-only log read by offset (stream.go).
type streamType struct{}

// takesStoredCopy is false: a stream keeps its messages in its own log.
func (streamType) takesStoredCopy(*Queue, *Message) bool { return false }

// accept appends m to the stream's log; the confirm waits for the append to
// be durable (routeResult.streams completes the publish's confirm through
// streamPublish.completeWhenDurable). A stream has no per-message TTL.
func (streamType) accept(q *Queue, m *Message, _ int64, _ bool, _ msgstore.Loc) accepted {
	s := q.vhost.streams.get(q)
	if s == nil {
		return accepted{res: enqueueGone} // deleted meanwhile
	}
	off, err := s.append(m)
	if err != nil {
		s.logger.Error("stream append failed", "err", err)
		return accepted{res: enqueued, appendFailed: true}
	}
	return accepted{res: enqueued, log: s.log, offset: off}
}

// get refuses: RabbitMQ 3.10 streams have no basic.get (540, which closes
// the connection; the management API answers 400 with the same text).
func (streamType) get(q *Queue, _ int, _ bool, _ func(gotMessage)) (int, *amqp.Error) {
	return 0, amqp.NewError(amqp.NotImplemented, methodBasicGet, "basic.get not supported by stream queues %s", describeQueue(q.name, q.vhost.name))
}
