package server

import (
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/msgstore"
)

// Queues homed on another node of the cluster. Every node has such a queue
// in its definitions (it is listed, with its node, and bindings route to
// it), but its messages and consumers live on its home node. makeRemote is
// the one place a queue's handle becomes a remote one: the proxy that
// forwards publishes, consumes, gets, acks and purges to the home node
// (remote_queue.go) for a classic queue, unservedQueue — every operation
// refused as RabbitMQ refuses one whose home node is down — for a stream
// until streams replicate.

// makeRemote gives a queue just built by a declare or the loader (not yet
// installed) the handle of a queue homed on node: the remote-queue proxy
// when this node serves remote queues and the queue is a classic one
// (streams replicate in the next issue), unservedQueue otherwise.
func (s *Server) makeRemote(q *Queue, node string) {
	q.home = node
	q.stopTimers() // x-expires and TTLs run on the home node
	if _, classic := q.h.(classicQueue); classic && s.remote != nil {
		q.h = s.remote.remoteHandle(q, node)
		return
	}
	q.h = unservedQueue{q}
}

// homedHere reports whether this node holds q's data.
// A quorum queue's home is its current leader.
func (q *Queue) homedHere() bool {
	if h, ok := q.quorumHandle(); ok {
		return h.leading()
	}
	return q.home == ""
}

// HomeNode is the node holding q's data: its home in a cluster, or node
// (this one) for a queue homed here.
func (q *Queue) HomeNode(node string) string {
	if h, ok := q.quorumHandle(); ok {
		if l := h.placement().Leader; l != "" {
			return l
		}
	}
	if q.home != "" {
		return q.home
	}
	return node
}

// homeDown is the answer to an operation on a queue homed on another node
// while no proxy serves it: RabbitMQ 3.10's 404 for a queue whose home
// node is down (rabbit_amqqueue's absent/nodedown: "home node 'rabbit@a'
// of durable queue 'q' in vhost '/' is down or inaccessible"; a transient
// queue is deleted with its node there, so only durable ones are absent).
func homeDown(q *Queue, method uint32) *amqp.Error {
	durable := ""
	if q.durable {
		durable = "durable "
	}
	return amqp.NewError(amqp.NotFound, method, "home node '%s' of %s%s is down or inaccessible",
		q.home, durable, describeQueue(q.name, q.vhost.name))
}

// unservedQueue is the handle of a queue homed on another node until the
// remote proxy exists: a publish routed to it is rejected (a publisher
// with confirms gets a nack); consume, get, purge and a conditional delete
// are refused with homeDown; it has no messages, consumers or files here.
type unservedQueue struct{ q *Queue }

func (u unservedQueue) queue() *Queue                            { return u.q }
func (unservedQueue) takesStoredCopy(*Message) bool              { return false }
func (unservedQueue) cancel(*consumer) bool                      { return false }
func (unservedQueue) redispatch()                                {}
func (unservedQueue) settle([]delivery, settleKind)              {}
func (unservedQueue) delete() ([]*consumer, int)                 { return nil, 0 }
func (unservedQueue) counts() (int, int)                         { return 0, 0 }
func (unservedQueue) consumerInfos() []ConsumerInfo              { return nil }
func (unservedQueue) consumerTimeout() time.Duration             { return 0 }
func (unservedQueue) touch()                                     {}
func (unservedQueue) hasFiles() bool                             { return false }
func (unservedQueue) openFiles(*Server) error                    { return nil }
func (unservedQueue) applyPolicy(map[string]any)                 {}
func (unservedQueue) checkSettle(settleKind, uint32) *amqp.Error { return nil }

func (unservedQueue) enqueue(*Message, int64, bool, msgstore.Loc) accepted {
	return accepted{res: enqueueRejected}
}

func (u unservedQueue) consume(*consumer, func()) *amqp.Error {
	return homeDown(u.q, methodBasicConsume)
}

func (u unservedQueue) get(int, bool, func(outgoing, int)) (int, *amqp.Error) {
	return 0, homeDown(u.q, methodBasicGet)
}

func (u unservedQueue) purge(method uint32) (int, *amqp.Error) { return 0, homeDown(u.q, method) }

func (u unservedQueue) deletable(ifUnused, ifEmpty bool) *amqp.Error {
	if ifUnused || ifEmpty {
		return homeDown(u.q, methodQueueDelete)
	}
	return nil
}

func (u unservedQueue) info() QueueInfo {
	q := u.q
	return QueueInfo{Name: q.name, Vhost: q.vhost.name, Durable: q.durable, Exclusive: q.exclusive,
		AutoDelete: q.autoDelete, Arguments: q.args}
}

func (u unservedQueue) status() QueueStatus { return QueueStatus{QueueInfo: u.info()} }

func (u unservedQueue) typeName() string {
	if u.q.qa.stream != nil {
		return "stream"
	}
	return "classic"
}
