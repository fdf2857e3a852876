package server

import (
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/msgstore"
)

// queueHandle is the one way channels, the management API and
// dead-lettering use a queue, whatever its kind: a classic queue
// (classicQueue), a stream (streamQueue), a proxy for a queue whose home is
// another cluster node (remoteQueue), and later a replicated queue. A *Queue is the
// queue's definition (name, flags, arguments, bindings), which every node
// knows; its handle, Queue.handle, is where its messages are.
//
// The contract an implementation keeps, so a remote proxy can satisfy it:
//
//   - Locks. Every method is called with none of the caller's locks held
//     (no channel lock, no Vhost.mu), except deletable, which queue.delete
//     calls under Vhost.mu and must therefore not block on I/O; a proxy
//     answers it from the counts it last heard of, and the home node
//     refuses again if they changed. The handle calls back into a
//     consumerSink only as that interface says (under its own lock for a
//     classic queue, from its reader goroutine for a stream).
//   - Blocking. enqueue may block for the home's lock (a classic queue's
//     Queue.mu) but not for durability: what is still to become durable
//     is returned in accepted for the publisher's confirm. consume, cancel,
//     get, purge and delete may wait for the home (a remote call); settle
//     and redispatch should not wait for an answer (a proxy sends them and
//     returns), as an ack or a qos change has nothing to report.
//   - Ordering. Messages enqueued by one caller are kept in that order.
//     Deliveries to one consumer reach its sink in queue order, each after
//     consume's accepted callback (so consume-ok precedes them), and none
//     after cancel returns. A message settled with requeue goes back to its
//     original place and is marked redelivered. Settling a delivery id the
//     queue no longer knows (deleted meanwhile) only returns the credit.
//   - Identity. A delivery is named by the id in outgoing: a plain number,
//     unique per queue among its unsettled deliveries. The caller keeps
//     nothing of the queue's own entry, so a proxy can forward the id.
type queueHandle interface {
	// queue is the definition this handle serves.
	queue() *Queue

	// takesStoredCopy reports whether the queue keeps a reference to the
	// vhost store's one copy of m, which the publish path writes once for
	// all the queues that take it.
	takesStoredCopy(m *Message) bool
	// enqueue hands m to the queue and says what it did with it: refused,
	// a duplicate, gone, or taken, with what the publisher's confirm must
	// still wait for (accepted.wait). ttl is m's own expiration in ms, or
	// -1; stored is set when the queue holds a reference to the shared
	// stored copy at loc, which enqueue takes over.
	enqueue(m *Message, ttl int64, stored bool, loc msgstore.Loc) accepted

	// consume subscribes c (its tag, ack mode, prefetch, priority,
	// exclusivity and basic.consume arguments, such as a stream's
	// x-stream-offset) or refuses with RabbitMQ's error. accepted runs
	// once c is subscribed and before its first delivery.
	consume(c *consumer, accepted func()) *amqp.Error
	// cancel unsubscribes c; no delivery to it follows. It reports whether
	// an auto-delete queue lost its last consumer, so the caller deletes it.
	cancel(c *consumer) (autoDelete bool)
	// redispatch lets the queue deliver again: a consumer's channel has
	// credit or write buffer room again.
	redispatch()
	// get takes up to max messages for basic.get, passing each to each
	// with the ready messages left behind it, or refuses with RabbitMQ's
	// error. each runs in queue order and must not call into the queue.
	get(max int, noAck bool, each func(m outgoing, remaining int)) (int, *amqp.Error)
	// checkSettle refuses a kind of settlement the queue does not support
	// (a stream has no nack or reject), with RabbitMQ's error for method.
	checkSettle(kind settleKind, method uint32) *amqp.Error
	// settle finishes deliveries of this queue by id: ack, requeue, or
	// drop (dead-lettered as rejected), and returns their consumers' credit.
	settle(ds []delivery, kind settleKind)
	// purge drops the ready messages and says how many there were, or
	// refuses with RabbitMQ's error for method.
	purge(method uint32) (int, *amqp.Error)

	// deletable refuses queue.delete with if-unused or if-empty when the
	// queue has consumers or ready messages.
	deletable(ifUnused, ifEmpty bool) *amqp.Error
	// delete stops the queue after its definition was removed, drops its
	// messages and files, and returns its consumers, for cancel
	// notifications, and the number of ready messages it held.
	delete() ([]*consumer, int)

	// counts returns the ready messages and the consumers.
	counts() (ready, consumers int)
	// info is the queue's snapshot for the management API.
	info() QueueInfo
	// status is info with its consumers' state (exclusive and single
	// active consumer, idle time, capacity); the caller adds the
	// definition's (type, owner, policies).
	status() QueueStatus
	// consumerInfos lists the consumers in delivery order.
	consumerInfos() []ConsumerInfo
	// consumerTimeout is the queue's consumer timeout, 0 for the server's.
	// It takes no lock: the channel asks it while holding its own.
	consumerTimeout() time.Duration
	// touch records use of the queue for x-expires.
	touch()

	// The definition paths (declare, recovery, policies, bindings).

	// typeName is the queue's type as the management API and RabbitMQ's
	// errors name it: "classic", "stream".
	typeName() string
	// hasFiles reports whether the queue's declare creates files (an index
	// or a log), which happens outside Vhost.mu.
	hasFiles() bool
	// openFiles opens (or creates) the queue's files; srv is nil for a
	// declaration through the management API.
	openFiles(srv *Server) error
	// applyPolicy applies the merged policy definition def, which changed.
	applyPolicy(def map[string]any)
}

// consumerSink is what a queue needs of a consumer's subscriber (a
// channel, or a test's fake): credit, deliveries and cancellation.
type consumerSink interface {
	// reserve takes room for one delivery to c now: the write buffer has
	// room and, unless c is no-ack, the channel's prefetch has credit. When
	// the buffer is full it remembers wake and calls its redispatch once
	// the buffer drained. A classic queue calls it under Queue.mu.
	reserve(c *consumer, wake queueHandle) bool
	// refund gives back credit reserve took for a delivery that did not
	// happen.
	refund(c *consumer)
	// charge counts one delivery to c against the channel's prefetch
	// without a limit check: a stream bounds its deliveries by its own
	// per-consumer credit.
	charge(c *consumer)
	// deliver hands m to c. Unless c is no-ack it stays unsettled until the
	// sink settles it through c.q by m.id. A classic queue calls it under
	// Queue.mu, so it must only append to memory and not call into the queue.
	deliver(c *consumer, m outgoing)
	// cancelled tells the subscriber that the queue cancelled c (the queue
	// was deleted, or a stream cannot be read).
	cancelled(c *consumer)
	// subscribed reports whether c is still subscribed on the sink's side
	// (a stream reader polls it; the channel may drop its consumers first).
	subscribed(c *consumer) bool
	// owner describes the subscriber for the management API.
	owner() consumerOwner
}

// consumerOwner is who holds a consumer, as the management API lists it.
type consumerOwner struct {
	ConnID               uint64
	ConnName, User, Peer string
	Channel              uint16
	// DefaultTimeout is the server's consumer timeout.
	DefaultTimeout time.Duration
}

// outgoing is one message a queue hands to a consumer or to basic.get:
// plain values, so a remote queue can send them over the network.
type outgoing struct {
	id          uint64   // names the delivery to settle it
	msg         *Message // exchange, routing key and body; read only
	props       []byte   // the properties to send
	redelivered bool
}

// durableWaiter is a destination that has accepted a message but not yet
// made it durable: a stream's log, later a replicated log or a remote node.
type durableWaiter interface {
	// whenDurable completes one destination of c once what enqueue
	// returned as token is durable (or failed). It must not block.
	whenDurable(token uint64, c completion)
}

// accepted is what one queue did with a published message.
type accepted struct {
	res    enqueueResult
	stored bool // it keeps a reference to the vhost store's copy
	// wait, when set, must complete the confirm with token; failed says the
	// write failed at once and the confirm is a nack.
	wait   durableWaiter
	token  uint64
	failed bool
}
