package server

import "errors"

// A quorum queue records acks, rejects and requeues without waiting for
// their commit (the design's cheap path for consumers), but a tx.commit-ok
// promises the transaction's acks survive a crash, and for a quorum queue
// a crash of the leader is a failover to a mirror that has only what was
// committed. So a tx.commit covering acks of a quorum queue waits until the
// leader's log has committed every record appended before it (locally in
// txCommit, or on the leader answering a remote mark in handleSettle).

var errSettlesNotCommitted = errors.New("the quorum queue's log did not commit the settlements (leader moved, log closed or 30 s passed)")

// syncSettled waits until the log has committed every record this
// leader appended so far. A node that does not lead the queue has nothing
// here: its settlements went to the leader, whose answer to the commit's
// mark covers them.
func (h *quorumQueue) syncSettled() error {
	h.mu.Lock()
	off, lead := h.appended, h.fwd == nil && h.r != nil && !h.starting
	due := off > h.committed
	h.mu.Unlock()
	if !lead || !due {
		return nil
	}
	done := make(chan bool, 1)
	t := &confirmTracker{notify: func(_ uint64, ack bool) { done <- ack }}
	h.whenDurable(off, t.expect(1, 1)) // completes at commit, or false at step-down, close, 30 s
	if !<-done {
		return errSettlesNotCommitted
	}
	return nil
}

// syncQuorumSettled runs syncSettled on every quorum queue of vh this node
// leads with records not yet committed: a remote tx.commit's mark may
// follow its settlements in an earlier batch, so the batch alone does not
// name every queue the commit covers.
func syncQuorumSettled(vh *Vhost) error {
	for _, q := range vh.Queues() {
		if h, ok := q.quorumHandle(); ok {
			if err := h.syncSettled(); err != nil {
				return err
			}
		}
	}
	return nil
}
