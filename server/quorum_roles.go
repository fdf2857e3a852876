package server

import (
	"slices"
	"sync/atomic"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/cluster/replica"
)

// A quorum queue's handle has one of three roles on a node, set by its
// placement: the leader serves the queue from its in-memory copy of the
// log's state; a mirror holds a replica of the log but no queue state
// (mirrors apply nothing, so a deposed or restarted leader has nothing to
// undo) and forwards its clients' operations to the leader; a node with no
// replica only forwards. Forwarding is the remote-queue proxy
// (remote_queue.go) pointed at the current leader, replaced when the
// leader changes.

// placement is the queue's current placement.
func (h *quorumQueue) placement() replica.Placement {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.place
}

// leading reports whether this node serves the queue.
func (h *quorumQueue) leading() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fwd == nil && h.r != nil && !h.starting
}

// forward is the proxy to the leader while another node leads, else nil.
func (h *quorumQueue) forward() *remoteQueue {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fwd
}

// setForward points this node's clients of the queue at leader.
func (h *quorumQueue) setForward(srv *Server, leader string) {
	if srv.remote == nil {
		return // standalone: there is no other leader
	}
	f := srv.remote.remoteHandle(h.q, leader)
	h.mu.Lock()
	h.fwd = f
	h.mu.Unlock()
}

// isMember reports whether node holds a replica under p.
func isMember(p replica.Placement, node string) bool { return slices.Contains(p.Replicas, node) }

// applyPlacement applies a committed placement change on this node (the
// apply of AlterQueueISR or ElectQueueLeader, on every node): the replica
// takes it, and a change of leader changes the handle's role.
func (h *quorumQueue) applyPlacement(srv *Server, np replica.Placement) {
	self := srv.cfg.NodeName
	h.mu.Lock()
	old := h.place
	joined := !isMember(old, self) && isMember(np, self) && h.r == nil && !h.closed
	left := isMember(old, self) && !isMember(np, self) && np.Leader != self
	if joined || left {
		h.place = np
		h.mu.Unlock()
		if joined {
			h.joinReplica(srv, np)
		} else {
			h.leaveReplica(srv, np)
		}
		return
	}
	h.place = np
	r, oldFwd := h.r, h.fwd
	wasLeader := r != nil && h.fwd == nil && !h.starting
	if np.Leader != self || np.Epoch > old.Epoch {
		h.starting = false // the placement is newer than what the node started with
	}
	var lost []completion
	if wasLeader && np.Leader != self {
		lost = h.depose()
	}
	h.mu.Unlock()
	completeAll(lost, false)
	if r != nil {
		r.SetPlacement(np)
	}
	switch {
	case np.Leader == self && r != nil && !wasLeader:
		h.becomeLeader()
	case np.Leader != self && wasLeader:
		h.stepDown(srv, np.Leader)
	case np.Leader != self && old.Leader != np.Leader:
		h.setForward(srv, np.Leader)
	}
	if oldFwd != nil && old.Leader != np.Leader && srv.remote != nil {
		srv.remote.dropConsumersOf(oldFwd)
	}
}

// testHookQuorumBecomeLeader, set by a test, runs on the elected node
// before it rebuilds the queue: a test holds it there to keep the window
// open in which the other nodes already forward to it and it does not
// serve the queue yet (a long replay, or a node applying the election
// late).
var testHookQuorumBecomeLeader atomic.Pointer[func(node, queue string)]

// depose ends this node's leadership for the publishes waiting on it,
// before its replica takes the placement that ends it (h.mu held): once
// the replica follows the new leader it reports that leader's commits,
// and the new leader's records may sit at the offsets where this node's
// uncommitted publishes were (truncated). Committed would confirm those
// publishes. It returns their confirms, to nack; a wait at or below
// what was committed here is left to Committed, which may be confirming
// it right now.
func (h *quorumQueue) depose() []completion {
	var lost []completion
	keep := h.waits[:0]
	for _, w := range h.waits {
		if w.off > h.committed {
			lost = append(lost, w.c)
		} else {
			keep = append(keep, w)
		}
	}
	clear(h.waits[len(keep):])
	h.waits = keep
	h.pend = nil
	h.deposed, h.deposedAt = true, h.committed
	return lost
}

// becomeLeader rebuilds the queue from this node's log (a mirror that was
// elected) and starts serving it. The replica already leads the new epoch;
// publishes wait for h.mu, so none of them is both replayed and pending.
func (h *quorumQueue) becomeLeader() {
	q := h.q
	if hook := testHookQuorumBecomeLeader.Load(); hook != nil {
		(*hook)(q.vhost.srv.cfg.NodeName, q.name)
	}
	h.mu.Lock()
	if h.log == nil || h.closed {
		h.mu.Unlock()
		return
	}
	ms, err := replayQuorum(h.log)
	if err != nil {
		h.mu.Unlock()
		q.vhost.log.Error("quorum queue: cannot rebuild from its log; not serving", "queue", q.name, "err", err)
		return
	}
	q.mu.Lock()
	q.dropQuorumStateLocked() // the log alone says what the queue holds
	q.mu.Unlock()
	dead := q.restoreQuorum(ms, h.place.Epoch, true)
	h.fwd = nil
	h.deposed = false // its appends from now on are this leadership's
	epoch := h.place.Epoch
	h.mu.Unlock()
	q.publishDeadLetters(dead) // with h.mu released: a DLX may route back here; kicks the dlx set
	h.flush()
	q.vhost.log.Info("quorum queue leader here", "queue", q.name, "messages", len(ms), "epoch", epoch)
}

// testHookQuorumCommitted, set by a test, runs in Committed between
// taking the committed publishes and enqueueing them.
var testHookQuorumCommitted atomic.Pointer[func(node, queue string)]

// testHookQuorumStepDown, set by a test, runs on a deposed leader after
// its replica took the new placement and before the queue steps down: a
// test holds it there while the replica follows the new leader.
var testHookQuorumStepDown atomic.Pointer[func(node, queue string)]

// stepDown ends serving the queue here (another node was elected): its
// consumers are cancelled and its in-memory state dropped, without
// records; the log is the leader's to change now.
func (h *quorumQueue) stepDown(srv *Server, leader string) {
	q := h.q
	if hook := testHookQuorumStepDown.Load(); hook != nil {
		(*hook)(srv.cfg.NodeName, q.name)
	}
	q.mu.Lock()
	cs := q.consumers
	q.consumers, q.exclusiveConsumer = nil, nil
	q.dropQuorumStateLocked()
	q.mu.Unlock()
	h.mu.Lock()
	waits := h.waits
	h.pend, h.waits = nil, nil
	h.mu.Unlock()
	cs2 := make([]completion, len(waits))
	for i, w := range waits {
		cs2[i] = w.c
	}
	completeAll(cs2, false)
	notifyCancelled(cs)
	h.setForward(srv, leader)
	q.vhost.log.Info("quorum queue leader moved away", "queue", q.name, "leader", leader)
}

// dropQuorumStateLocked forgets the queue's in-memory state (q.mu held):
// at a step-down, and again before a rebuild, since a Committed that was
// enqueueing while the queue stepped down leaves its messages behind
// (it runs on the replica's goroutine, the step-down on the metadata
// apply); rebuilt on top of them, an elected node served again messages
// acknowledged through another leader meanwhile.
func (q *Queue) dropQuorumStateLocked() {
	q.ready.drain()
	q.pending.drop()
	q.unacked = tally{}
	if q.journal.dlx != nil {
		q.journal.dlx.stopLocked() // the new leader publishes them
	}
	*q.journal = quorumJournal{}
}

// A cluster node that starts as the leader of a replicated queue does not
// know whether the cluster elected another leader while it was down: its
// stored placement is as of its last applied metadata entry. Until it
// knows, it serves nothing (h.starting: publishes are nacked, consumes and
// gets refused), so it cannot deliver what the other leader settled. It
// then proposes itself again in a new epoch (reclaimQuorumLeaders); the
// compare-and-set fails if an election came first, whose placement the
// node then applies from the log and follows.

// startingRefusal is the answer to a consume, get or purge while the
// queue is starting: RabbitMQ 3.10's 404 for a queue whose leader is not
// available.
func (h *quorumQueue) startingRefusal(method uint32) *amqp.Error {
	h.mu.Lock()
	starting := h.starting
	h.mu.Unlock()
	if !starting {
		return nil
	}
	q := h.q
	return amqp.NewError(amqp.NotFound, method, "leader of durable %s is not available yet (the node is starting)",
		describeQueue(q.name, q.vhost.name))
}

// reclaimQuorumLeaders proposes, for each queue this node started leading,
// its leadership again in a new epoch (reapLoop, every node).
func (s *Server) reclaimQuorumLeaders() {
	for _, vh := range s.Vhosts() {
		for _, q := range vh.Queues() {
			h, ok := q.quorumHandle()
			if !ok {
				continue
			}
			h.mu.Lock()
			starting, p := h.starting, h.place
			h.mu.Unlock()
			if !starting {
				continue
			}
			np := p
			np.Epoch, np.Version = p.Epoch+1, p.Version+1
			if _, err := s.propose(ElectQueueLeader{Vhost: vh.name, Name: q.name, Placement: np}); err != nil {
				s.log.Info("quorum queue leadership not reclaimed; following the cluster's placement", "queue", q.name, "err", err)
			}
		}
	}
}
