package server

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/msgstore"
)

// remoteQueue is the handle of a queue whose home is another node: every
// operation is forwarded to the home (queue_handle.go's contract).
// Publishes go through the home's link, batched, and complete their confirm
// when the home answered after its own confirm; consumers are registered on
// the home, which decides priorities, single active consumer and credit,
// and pushes deliveries here; the channel names a delivery by the home's id,
// which settlements carry back.
type remoteQueue struct {
	q    *Queue
	home string
	r    *remoteQueues
	// link caches r.link(home): links live as long as the node, and the
	// lookup under r.mu, once per publish, is a lock every publishing
	// connection shares.
	link atomic.Pointer[homeLink]
	// wake is signalled by redispatch: the consumers' connections have
	// write-buffer room again, for a push that waits for it.
	wake chan struct{}

	mu sync.Mutex
	// ready and consumers are the counts the home last reported, for
	// deletable, which must not wait for the network.
	ready, consumers int
	// deleted is the ready count the home dropped at its delete.
	deleted int
}

// remoteConsumer is an ingress consumer of a queue homed elsewhere.
type remoteConsumer struct {
	c *consumer
	h *remoteQueue
	// subscribed is closed once consume's accepted callback ran, so a
	// push that overtook the home's consume answer waits for consume-ok.
	subscribed chan struct{}
	// mu is held across a pushed delivery's check and hand-over to the
	// channel; gone is set under it once the consumer left the registry,
	// so no delivery reaches the channel after cancel returned (a channel
	// closing takes its unacked deliveries after cancelling).
	mu   sync.Mutex
	gone bool
}

// retire marks rc gone, after any delivery in progress to it.
func (rc *remoteConsumer) retire() {
	rc.mu.Lock()
	rc.gone = true
	rc.mu.Unlock()
}

func (h *remoteQueue) queue() *Queue { return h.q }

// takesStoredCopy is false: the home stores its own copy.
func (*remoteQueue) takesStoredCopy(*Message) bool { return false }

// enqueue hands m to the link to the home; the confirm waits for the home's
// answer (accepted.wait). The home decides TTL, length limits and
// dead-lettering; its refusal (reject-publish) is a nack.
func (h *remoteQueue) enqueue(m *Message, ttl int64, _ bool, _ msgstore.Loc) accepted {
	if len(m.Body) > maxForwardedBody {
		h.r.s.log.Warn("message too large to forward to its queue's home node; not enqueued",
			"queue", h.q.name, "node", h.home, "bytes", len(m.Body))
		return accepted{res: enqueued, failed: true}
	}
	l := h.link.Load()
	if l == nil {
		if l = h.r.link(h.home); l == nil {
			return accepted{res: enqueued, failed: true} // the node is stopping
		}
		h.link.Store(l)
	}
	token, ok := l.enqueue(h.q, m, ttl)
	if !ok {
		return accepted{res: enqueued, failed: true}
	}
	return accepted{res: enqueued, wait: l, token: token}
}

// consume registers c on the home under a new key and waits for its answer.
func (h *remoteQueue) consume(c *consumer, accepted func()) *amqp.Error {
	rc := &remoteConsumer{c: c, h: h, subscribed: make(chan struct{})}
	key := h.r.addConsumer(rc)
	w := wireWriter{}
	w.queueRef(h.q)
	w.uint(key)
	w.string(c.tag)
	w.bool(c.noAck)
	w.bool(c.exclusive)
	w.uint(uint64(c.prefetch))
	w.int(c.priority)
	w.table(c.args)
	_, err := h.callHome(rpcConsume, w.b, methodBasicConsume)
	if err != nil {
		h.r.removeConsumer(key)
		return err
	}
	accepted()
	close(rc.subscribed)
	return nil
}

// cancel removes c here first, so a push that follows is refused and its
// deliveries requeued on the home, then on the home.
func (h *remoteQueue) cancel(c *consumer) bool {
	key, ok := h.r.takeConsumer(c)
	if !ok {
		return false
	}
	w := wireWriter{}
	w.queueRef(h.q)
	w.uint(key)
	rd, err := h.callHome(rpcCancel, w.b, methodBasicConsume)
	if err != nil {
		// The home may not have run it: the cancel follows on the
		// settlement link, retried until the home answers or is declared
		// down (which drops this node's consumers there), so the home does
		// not keep a consumer no client has.
		if l := h.r.link(h.home); l != nil {
			l.settle([]fwdSettle{{q: h.q, kind: settleCancelConsumer, key: key}})
		}
		return false
	}
	return rd.bool()
}

// redispatch wakes a push waiting for its connection's write buffer.
func (h *remoteQueue) redispatch() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// get forwards basic.get under a token of its own. When the home does not
// answer, it may still have run the get (the request arrived, the answer
// was lost, or the request arrived after the wait ended): the token is then
// sent after it as an abandonment, retried with the settlements, so the
// home returns what it took instead of holding it for a client that never
// saw it until this node is declared down, which a one-way partition never
// does.
func (h *remoteQueue) get(max int, noAck bool, each func(outgoing, int)) (int, *amqp.Error) {
	h.r.mu.Lock()
	h.r.nextGet++
	token := h.r.nextGet
	h.r.mu.Unlock()
	w := wireWriter{}
	w.queueRef(h.q)
	w.uint(uint64(max))
	w.bool(noAck)
	w.uint(token)
	h.r.publishedBefore(h.home)
	ans, cerr := h.r.call(h.home, rpcGet, w.b, remoteCallTimeout)
	if cerr != nil {
		if l := h.r.link(h.home); l != nil && !noAck {
			l.settle([]fwdSettle{{q: h.q, kind: settleGetAbandoned, id: token}})
		}
		return 0, homeDownError(h.q, h.home, methodBasicGet)
	}
	rd, err := readAnswer(ans, methodBasicGet) // a refusal: the home took nothing
	if err != nil {
		return 0, err
	}
	n := rd.count()
	got := make([]outgoing, 0, n)
	remaining := make([]int, 0, n)
	for range n {
		got = append(got, rd.outgoing())
		remaining = append(remaining, int(rd.uint()))
	}
	if rd.err != nil {
		return 0, amqp.NewError(amqp.InternalError, methodBasicGet, "malformed answer from node '%s'", h.home)
	}
	for i, m := range got {
		each(m, remaining[i])
	}
	return n, nil
}

func (*remoteQueue) checkSettle(settleKind, uint32) *amqp.Error { return nil }

// settle forwards the settlements without waiting (an ack has nothing to
// report); the home returns the credit.
func (h *remoteQueue) settle(ds []delivery, kind settleKind) {
	l := h.r.link(h.home)
	if l == nil {
		return
	}
	fs := make([]fwdSettle, len(ds))
	for i, d := range ds {
		fs[i] = fwdSettle{q: h.q, kind: kind, key: h.r.keyOf(d.c), id: d.id}
	}
	l.settle(fs)
}

func (h *remoteQueue) purge(method uint32) (int, *amqp.Error) {
	w := wireWriter{}
	w.queueRef(h.q)
	w.uint(uint64(method))
	rd, err := h.callHome(rpcPurge, w.b, method)
	if err != nil {
		return 0, err
	}
	return int(rd.uint()), nil
}

// deletable answers from the counts the home last reported: it runs under
// Vhost.mu. deleteAtHome checked the flags on the home before.
func (h *remoteQueue) deletable(ifUnused, ifEmpty bool) *amqp.Error {
	h.mu.Lock()
	ready, consumers := h.ready, h.consumers
	h.mu.Unlock()
	what := describeQueue(h.q.name, h.q.vhost.name)
	if ifUnused && consumers > 0 {
		return amqp.NewError(amqp.PreconditionFailed, methodQueueDelete, "%s in use", what)
	}
	if ifEmpty && ready > 0 {
		return amqp.NewError(amqp.PreconditionFailed, methodQueueDelete, "%s not empty", what)
	}
	return nil
}

// deleteAtHome deletes the queue on its home with queue.delete's flags and
// returns the ready messages it dropped. It runs before the definition is
// removed here, without Vhost.mu.
func (h *remoteQueue) deleteAtHome(ifUnused, ifEmpty bool) (int, *amqp.Error) {
	w := wireWriter{}
	w.queueRef(h.q)
	w.bool(ifUnused)
	w.bool(ifEmpty)
	rd, err := h.callHome(rpcDelete, w.b, methodQueueDelete)
	if err != nil {
		return 0, err
	}
	n := int(rd.uint())
	h.mu.Lock()
	h.ready, h.consumers, h.deleted = 0, 0, n
	h.mu.Unlock()
	return n, nil
}

// delete ends this node's consumers of the queue, for cancel notifications;
// the home deleted its messages.
func (h *remoteQueue) delete() ([]*consumer, int) {
	cs := h.r.takeConsumersOf(h)
	h.mu.Lock()
	n := h.deleted
	h.mu.Unlock()
	return cs, n
}

// counts asks the home; a home that does not answer leaves the counts last
// heard of (checkedCounts reports it as down).
func (h *remoteQueue) counts() (int, int) {
	ready, consumers, _ := h.checkedCounts(methodQueueDeclare)
	return ready, consumers
}

// checkedCounts is counts with the home's refusal or unavailability, for
// queue.declare, which answers 404 for a queue whose home is down.
func (h *remoteQueue) checkedCounts(method uint32) (int, int, *amqp.Error) {
	w := wireWriter{}
	w.queueRef(h.q)
	rd, err := h.callHome(rpcCounts, w.b, method)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		return h.ready, h.consumers, err
	}
	h.ready, h.consumers = int(rd.uint()), int(rd.uint())
	return h.ready, h.consumers, nil
}

// info, status and consumerInfos ask the home for its snapshot; without an
// answer they report the definition with the counts last heard of.
func (h *remoteQueue) info() QueueInfo { return h.status().QueueInfo }

func (h *remoteQueue) status() QueueStatus {
	var st remoteStatus
	if !h.remoteSnapshot(&st) {
		q := h.q
		h.mu.Lock()
		defer h.mu.Unlock()
		return QueueStatus{QueueInfo: QueueInfo{Name: q.name, Vhost: q.vhost.name, Durable: q.durable,
			Exclusive: q.exclusive, AutoDelete: q.autoDelete, Arguments: q.args, Ready: h.ready, Consumers: h.consumers}}
	}
	return st.Status
}

func (h *remoteQueue) consumerInfos() []ConsumerInfo {
	var st remoteStatus
	h.remoteSnapshot(&st)
	return st.Consumers
}

// remoteStatus is the home's answer to rpcInfo.
type remoteStatus struct {
	Status    QueueStatus
	Consumers []ConsumerInfo
}

func (h *remoteQueue) remoteSnapshot(st *remoteStatus) bool {
	w := wireWriter{}
	w.queueRef(h.q)
	rd, err := h.callHome(rpcInfo, w.b, 0)
	if err != nil {
		return false
	}
	if json.Unmarshal(rd.bytes(), st) != nil || rd.err != nil {
		h.r.s.log.Error("malformed queue snapshot from its home node", "node", h.home, "queue", h.q.name)
		return false
	}
	h.mu.Lock()
	h.ready, h.consumers = st.Status.Ready, st.Status.Consumers
	h.mu.Unlock()
	return true
}

func (h *remoteQueue) consumerTimeout() time.Duration {
	return time.Duration(h.q.consumerTimeout.Load())
}

// touch: the home records use of the queue for x-expires as it serves the
// forwarded operation.
func (*remoteQueue) touch() {}

func (*remoteQueue) typeName() string { return "classic" }

// hasFiles is false: the queue's files are on its home.
func (*remoteQueue) hasFiles() bool { return false }

func (*remoteQueue) openFiles(*Server) error { return nil }

// applyPolicy: the home applies policies to the queue it keeps.
func (*remoteQueue) applyPolicy(map[string]any) {}

// callHome sends a synchronous operation to the home and reads its answer:
// the home's refusal, or RabbitMQ's 404 when the home does not answer.
func (h *remoteQueue) callHome(method string, payload []byte, amqpMethod uint32) (*wireReader, *amqp.Error) {
	if method != rpcConsume && method != rpcCancel {
		h.r.publishedBefore(h.home)
	}
	ans, err := h.r.call(h.home, method, payload, remoteCallTimeout)
	if err != nil {
		return nil, homeDownError(h.q, h.home, amqpMethod)
	}
	return readAnswer(ans, amqpMethod)
}
