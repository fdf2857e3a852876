package server

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// A queue that is not replicated lives on one node, its home. Every other
// node of the cluster knows its definition and serves it to its clients
// through a remoteQueue handle (remote_queue.go), which forwards each
// operation to the home over the cluster's rpc plane; the home answers
// through its own handle of the queue (remote_home.go). The proxy is one
// more queueHandle: channels, the management API and dead-lettering use it
// as they use a local queue.
//
// The broker reaches the rpc plane through two small interfaces, so the
// proxy is tested with in-process servers joined by an in-memory network
// as well as through the cluster package.

// peerCaller sends one request to a node and waits for its answer. An
// error means the node did not answer (down, unreachable, timed out);
// refusals of the operation itself travel inside the answer.
type peerCaller interface {
	Call(ctx context.Context, node, method string, payload []byte) ([]byte, error)
}

// peerHandler answers one request from node from.
type peerHandler func(ctx context.Context, from string, payload []byte) ([]byte, error)

// peerRegistrar registers the handlers a home node answers with.
type peerRegistrar interface {
	Handle(method string, h peerHandler)
}

// The rpc methods of the remote-queue plane.
const (
	rpcPublish = "queue.publish" // ingress → home: a batch of forwarded publishes
	rpcGet     = "queue.get"
	rpcPurge   = "queue.purge"
	rpcDelete  = "queue.delete"
	rpcCounts  = "queue.counts"
	rpcInfo    = "queue.info"
	rpcConsume = "queue.consume"
	rpcCancel  = "queue.cancel"
	rpcSettle  = "queue.settle"  // ingress → home: acks, rejects, requeues
	rpcDeliver = "queue.deliver" // home → ingress: deliveries and cancels
)

// remoteConfirmTimeout bounds a forwarded publish batch and a push of
// deliveries: unconfirmed after it, the publishes are nacked
// (rabbit_fifo_client's 30 s). A variable so a test can shorten it.
var remoteConfirmTimeout = 30 * time.Second

// Timeouts of forwarded operations.
const (
	// remoteCallTimeout bounds a synchronous operation (get, purge,
	// consume, counts): a home that does not answer within it counts as
	// down or inaccessible.
	remoteCallTimeout = 10 * time.Second
)

// remoteQueues is a node's side of the remote-queue plane: the links that
// forward publishes and settlements to each home node, the ingress
// consumers of queues homed elsewhere, and, as a home, the sinks that
// push deliveries to the consumers' nodes. nil on a standalone node, which
// runs none of this.
type remoteQueues struct {
	s     *Server
	node  string
	peers peerCaller

	// mu guards the maps below. It is a leaf: nothing is called under it.
	mu sync.Mutex
	// links forward publishes and settlements, one per home node.
	links map[string]*homeLink
	// consumers are this node's consumers of queues homed elsewhere, by the
	// key the home names them with in its pushes.
	consumers map[uint64]*remoteConsumer
	nextKey   uint64
	// nextGet numbers this node's forwarded basic.gets, so one whose answer
	// never came can be named to the home, which then returns what it took.
	nextGet uint64
	// sinks are the home side: one per node consuming from this node's
	// queues.
	sinks  map[string]*remoteSink
	closed bool

	// ctx ends when the node stops: it bounds every call and stops the
	// links' and sinks' goroutines.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// enableRemoteQueues makes s serve its queues to the other nodes through reg
// and reach theirs through peers; s is named node in the cluster. Call it
// before clients connect.
func (s *Server) enableRemoteQueues(node string, peers peerCaller, reg peerRegistrar) {
	r := &remoteQueues{s: s, node: node, peers: peers, links: make(map[string]*homeLink),
		consumers: make(map[uint64]*remoteConsumer), sinks: make(map[string]*remoteSink),
		// Keys start at a random point of their own per process: a home
		// that has not yet noticed this node's restart still holds
		// consumers under the previous process's keys, and a key reused
		// here would give their deliveries (and this node's acks for them)
		// to another consumer, possibly of another queue.
		nextKey: uint64(rand.Uint32()) << 32, nextGet: uint64(rand.Uint32()) << 32}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	s.remote = r
	r.registerHome(reg)
	r.registerIngress(reg)
}

// close stops the links and sinks and waits for their goroutines; pending
// forwarded publishes are nacked.
func (r *remoteQueues) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.cancel()
	r.mu.Unlock()
	r.wg.Wait()
}

// remoteHandle is the handle of q, a queue whose home is node home.
func (r *remoteQueues) remoteHandle(q *Queue, home string) *remoteQueue {
	return &remoteQueue{q: q, home: home, r: r, wake: make(chan struct{}, 1)}
}

// link is the forwarding link to home, started on first use.
func (r *remoteQueues) link(home string) *homeLink {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.links[home]
	if l == nil && !r.closed {
		l = newHomeLink(r, home)
		r.links[home] = l
		r.wg.Add(2)
		go l.publishLoop()
		go l.settleLoop()
	}
	return l
}

// publishedBefore waits until home answered this node's earlier forwarded
// publishes (homeLink.barrier); nothing when none went there.
func (r *remoteQueues) publishedBefore(home string) {
	r.mu.Lock()
	l := r.links[home]
	r.mu.Unlock()
	if l != nil {
		l.barrier()
	}
}

// call sends one synchronous operation to node, bounded by timeout.
func (r *remoteQueues) call(node, method string, payload []byte, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(r.ctx, timeout)
	defer cancel()
	return r.peers.Call(ctx, node, method, payload)
}

// homeDownError is RabbitMQ's answer for a queue whose home node does not
// answer (rabbit_amqqueue's absent/nodedown): 404 for a durable queue,
// whose definition stays and comes back with its node; a transient queue
// goes with its node, and RabbitMQ reports it as not there.
func homeDownError(q *Queue, home string, method uint32) *amqp.Error {
	if isDurable(q) {
		return amqp.NewError(amqp.NotFound, method, "home node '%s' of durable %s is down or inaccessible",
			home, describeQueue(q.name, q.vhost.name))
	}
	return amqp.NewError(amqp.NotFound, method, "no %s", describeQueue(q.name, q.vhost.name))
}

// queueRef names a queue on the wire.
func (w *wireWriter) queueRef(q *Queue) {
	w.string(q.vhost.name)
	w.string(q.name)
}

// homeQueue finds the queue a request names on this node, as its home: a
// queue served here by another handle (a proxy for yet another node) is
// not this node's to answer for.
func (r *remoteQueues) homeQueue(rd *wireReader, method uint32) (*Queue, *amqp.Error) {
	vhost, name := rd.string(), rd.string()
	if rd.err != nil {
		return nil, amqp.NewError(amqp.SyntaxError, method, "malformed forwarded request")
	}
	vh := r.s.Vhost(vhost)
	if vh == nil {
		return nil, amqp.NewError(amqp.NotFound, method, "no vhost '%s'", vhost)
	}
	q := vh.queue(name)
	if q == nil {
		return nil, amqp.NewError(amqp.NotFound, method, "no %s", describeQueue(name, vhost))
	}
	if !q.homedHere() {
		return nil, amqp.NewError(amqp.NotFound, method, "%s is not homed on node '%s'", describeQueue(name, vhost), r.node)
	}
	return q, nil
}

// NodeDown tells s that node left the cluster or was found dead (the
// cluster wiring calls it on membership events). This node's consumers of
// queues homed there are cancelled, with basic.cancel to the clients that
// asked for consumer cancel notifications, as RabbitMQ does for consumers
// of a queue whose node went down; that node's consumers of this node's
// queues are cancelled here and what they held unacked is requeued, marked
// redelivered.
func (s *Server) NodeDown(node string) {
	r := s.remote
	if r == nil {
		return
	}
	r.mu.Lock()
	var lost []*remoteConsumer
	for key, rc := range r.consumers {
		if rc.h.home == node {
			lost = append(lost, rc)
			delete(r.consumers, key)
		}
	}
	sink := r.sinks[node]
	if l := r.links[node]; l != nil {
		l.downs.Add(1)
	}
	r.mu.Unlock()
	for _, rc := range lost {
		rc.retire()
		rc.c.sink.cancelled(rc.c)
	}
	if sink != nil {
		sink.lose(nil)
	}
}

// dropConsumersOf cancels this node's consumers forwarded through h, a
// quorum queue's proxy to a leader that no longer leads it (a new
// placement): the old leader serves them no more, dead or deposed, and
// their clients must re-subscribe to reach the new one. Waiting for
// gossip to call the old node dead (NodeDown) kept them silent for
// seconds after the failover.
func (r *remoteQueues) dropConsumersOf(h *remoteQueue) {
	r.mu.Lock()
	var lost []*remoteConsumer
	for key, rc := range r.consumers {
		if rc.h == h {
			lost = append(lost, rc)
			delete(r.consumers, key)
		}
	}
	r.mu.Unlock()
	for _, rc := range lost {
		rc.retire()
		rc.c.sink.cancelled(rc.c)
	}
}
