package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

const methodPropose = "cluster.propose"

// Propose replicates data as one metadata log entry and returns once this
// node's FSM has applied it, so the caller's next read on this node sees
// it. result is the FSM's deterministic result for the entry; err is a
// failure to get it committed and applied: ErrNoQuorum when no Raft
// majority answered in time (the entry may still commit later, it never
// diverges), ErrShutdown, or ErrNotApplied. Followers forward the entry to
// the leader over RPC. ctx bounds everything; without a deadline
// ProposeTimeout applies.
func (n *Node) Propose(ctx context.Context, data []byte) (result error, err error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.cfg.ProposeTimeout)
		defer cancel()
	}
	index, remote, err := n.commit(ctx, data)
	if err != nil {
		return nil, err
	}
	return n.waitApplied(ctx, index, remote)
}

// commit gets data committed and returns its index and the leader's result.
// It retries only where the entry surely was not appended: no leader known,
// or a leader that answered "not leader".
func (n *Node) commit(ctx context.Context, data []byte) (uint64, error, error) {
	for {
		if n.stopped() {
			return 0, nil, ErrShutdown
		}
		var (
			index  uint64
			result error
			err    error
		)
		addr, _ := n.raft.LeaderWithID()
		switch {
		case n.raft.State() == raft.Leader:
			index, result, err = n.applyLocal(ctx, data)
		case addr != "":
			index, result, err = n.forwardPropose(ctx, string(addr), data)
		default:
			err = ErrNotLeader
		}
		if !errors.Is(err, ErrNotLeader) {
			return index, result, err
		}
		if err := n.waitLeaderChange(ctx, addr); err != nil {
			return 0, nil, err
		}
	}
}

// applyLocal appends data on this leader and waits for its commit.
func (n *Node) applyLocal(ctx context.Context, data []byte) (uint64, error, error) {
	dl, _ := ctx.Deadline()
	wait := time.Until(dl)
	if wait <= 0 { // raft.Apply takes a zero timeout as no timeout
		return 0, nil, fmt.Errorf("%w: deadline passed before the entry was appended", ErrNoQuorum)
	}
	// The future's wait itself ends at the latest when this leader,
	// without majority contact, steps down after LeaderLeaseTimeout.
	f := n.raft.Apply(data, wait)
	err := n.futureError(ctx, f)
	switch {
	case err == nil:
		result, _ := f.Response().(error)
		return f.Index(), result, nil
	case errors.Is(err, raft.ErrNotLeader):
		return 0, nil, ErrNotLeader // never appended: safe to retry
	case errors.Is(err, raft.ErrRaftShutdown):
		return 0, nil, ErrShutdown
	default: // lost leadership or timed out: outcome unknown
		return 0, nil, fmt.Errorf("%w: %v", ErrNoQuorum, err)
	}
}

func (n *Node) forwardPropose(ctx context.Context, leader string, data []byte) (uint64, error, error) {
	resp, err := n.rpc.call(ctx, leader, methodPropose, data)
	switch {
	case errors.Is(err, ErrNotLeader), errors.Is(err, errNotSent),
		errors.Is(err, ErrShutdown) && !n.stopped():
		return 0, nil, ErrNotLeader // the leader moved, is stopping or unreachable: not appended
	case errors.Is(err, ErrNoQuorum):
		return 0, nil, err
	case err != nil:
		if ctx.Err() != nil {
			return 0, nil, fmt.Errorf("%w: leader %s did not answer: %v", ErrNoQuorum, leader, err)
		}
		var re *RemoteError
		if errors.As(err, &re) {
			return 0, nil, err
		}
		// A connection failure: the request may or may not have reached
		// the leader, so do not send it again.
		return 0, nil, fmt.Errorf("%w: forwarding to leader %s: %v", ErrNoQuorum, leader, err)
	case len(resp) < 8:
		return 0, nil, fmt.Errorf("cluster: short propose response from %s", leader)
	}
	index := binary.BigEndian.Uint64(resp)
	var result error
	if len(resp) > 8 {
		result = errors.New(string(resp[8:]))
	}
	return index, result, nil
}

// handlePropose is the leader's side of a forwarded Propose.
func (n *Node) handlePropose(ctx context.Context, from string, data []byte) ([]byte, error) {
	if n.raft.State() != raft.Leader {
		return nil, ErrNotLeader
	}
	index, result, err := n.applyLocal(ctx, data)
	if err != nil {
		return nil, err
	}
	out := binary.BigEndian.AppendUint64(nil, index)
	if result != nil {
		out = append(out, result.Error()...)
	}
	return out, nil
}

// waitApplied waits until this node's FSM has applied index and returns
// its own result for it (the same as the leader's: results are
// deterministic), or the leader's when this node no longer remembers it.
func (n *Node) waitApplied(ctx context.Context, index uint64, leaderResult error) (error, error) {
	for {
		applied, result, known, changed := n.fsm.appliedState(index)
		if applied >= index {
			if known {
				return result, nil
			}
			return leaderResult, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: index %d, applied %d", ErrNotApplied, index, applied)
		case <-n.stop:
			return nil, ErrShutdown
		}
	}
}

// waitLeaderChange waits until Raft reports a leader other than old (or any
// leader if old is empty), polling since hashicorp/raft has no change
// notification for followers; ErrNoQuorum when ctx ends first.
func (n *Node) waitLeaderChange(ctx context.Context, old raft.ServerAddress) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: no raft leader reachable within %v", ErrNoQuorum, time.Since(start).Round(time.Millisecond))
		case <-n.stop:
			return ErrShutdown
		case <-t.C:
		}
		addr, _ := n.raft.LeaderWithID()
		if n.raft.State() == raft.Leader || (addr != "" && addr != old) {
			return nil
		}
		// The same leader that said "not leader" may be right again after
		// an election it won; retry after a heartbeat at the latest.
		if addr != "" && time.Since(start) > n.cfg.HeartbeatTimeout {
			return nil
		}
	}
}

// futureError waits for f, or until ctx ends (the outcome is then unknown:
// ErrNoQuorum) or the node stops (ErrShutdown). With BatchApplyCh a future
// still in raft's buffered apply channel when raft shuts down is never
// answered, and a forwarded proposal waiting for it would keep the rpc
// handler, and so Shutdown, waiting for ever. The goroutine reading such a
// future stays blocked on it: at most the apply channel's buffer of them,
// each left by a proposal cut off by a shutdown.
func (n *Node) futureError(ctx context.Context, f raft.ApplyFuture) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: %v", ErrNoQuorum, ctx.Err())
	case <-n.stop:
		return raft.ErrRaftShutdown
	}
}
