package replica

import (
	"fmt"
	"sync"
	"time"
)

// FailureHandler is optionally implemented by a Handler that wants to know
// when its replica stopped because its log failed (a full or broken disk):
// records appended since the last Committed will never be committed by
// this replica.
type FailureHandler interface {
	Failed(err error)
}

// replica is one queue's replica on this node. Append (any goroutine)
// assigns offsets under mu and hands the records to the replica's goroutine,
// which alone uses the Log: it appends each batch, syncs it once (group
// commit) and reports commits to the Handler in order.
type replica struct {
	m     *manager
	queue string
	log   Log
	h     Handler

	mu      sync.Mutex // guards the fields below; never held across Log calls
	p       Placement
	next    uint64   // offset the next Append gets (leader)
	pending []Record // assigned, not yet given to the log
	compact uint64   // highest Compact asked for
	epoch   uint64   // epoch of the last record assigned an offset
	closed  bool
	failErr error
	st      Status // LastOffset, DurableOffset and HW as the goroutine last saw them

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

func newReplica(m *manager, queue string, p Placement, log Log, h Handler) *replica {
	r := &replica{m: m, queue: queue, log: log, h: h, p: p,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	r.st.LastOffset, r.st.DurableOffset = log.LastOffset(), log.DurableOffset()
	r.next = r.st.LastOffset + 1
	if h := log.Epochs(); len(h) > 0 {
		r.epoch = h[len(h)-1].Epoch
	}
	r.becomeLocked(p)
	return r
}

// becomeLocked applies p's leadership: a leader of a newer epoch than its
// log's last starts the epoch with a KindEpochStart record. Caller holds mu
// or owns r exclusively.
func (r *replica) becomeLocked(p Placement) {
	r.p = p
	r.st.Leader, r.st.Epoch = p.Leader == r.m.cfg.Node, p.Epoch
	if !r.st.Leader {
		return
	}
	if r.epoch < p.Epoch {
		r.pending = append(r.pending, Record{Offset: r.next, Epoch: p.Epoch, Kind: KindEpochStart})
		r.next++
		r.epoch = p.Epoch
	}
}

func (r *replica) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *replica) Append(data ...[]byte) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return 0, ErrClosed
	case r.failErr != nil:
		return 0, r.failErr
	case !r.st.Leader:
		return 0, ErrNotLeader
	case len(data) == 0:
		return r.next - 1, nil
	}
	for _, d := range data {
		r.pending = append(r.pending, Record{Offset: r.next, Epoch: r.p.Epoch, Kind: KindData,
			Data: append([]byte(nil), d...)})
		r.next++
	}
	r.wake()
	return r.next - 1, nil
}

// SetPlacement applies a committed placement. A stale one (lower Version)
// is ignored: placements arrive in order but may be re-delivered.
func (r *replica) SetPlacement(p Placement) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.Version < r.p.Version || checkPlacement(p) != nil {
		return
	}
	if p.Epoch > r.p.Epoch {
		r.becomeLocked(p)
	} else {
		r.p = p
	}
	r.wake()
}

func (r *replica) Compact(off uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if off > r.compact {
		r.compact = off
		r.wake()
	}
}

func (r *replica) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

// Close stops the replica's goroutine and waits for it. Records appended but
// not yet written are dropped (never committed); the log stays open.
func (r *replica) Close() error {
	r.mu.Lock()
	already := r.closed
	r.closed = true
	r.mu.Unlock()
	if !already {
		close(r.stop)
	}
	<-r.done
	return nil
}

// run is the replica's goroutine (owner: the manager, stop: r.stop, waited
// by manager.wg and Close). It retries the commit check every heartbeat, so
// a lease that comes back or a placement that regains MinISR commits what is
// durable without a new append.
func (r *replica) run() {
	defer r.m.wg.Done()
	defer close(r.done)
	defer r.m.remove(r.queue, r)
	t := time.NewTicker(r.m.cfg.Heartbeat)
	defer t.Stop()
	for {
		r.step()
		select {
		case <-r.stop:
			return
		case <-r.kick:
		case <-t.C:
		}
	}
}

// step writes and syncs what is pending, reclaims what Compact allows and
// reports a new high watermark.
func (r *replica) step() {
	r.mu.Lock()
	batch := r.pending
	r.pending = nil
	compact, p, failed := r.compact, r.p, r.failErr != nil
	r.mu.Unlock()
	if failed {
		return
	}
	if len(batch) > 0 {
		err := r.log.Append(batch...)
		if err == nil {
			err = r.log.Sync()
		}
		if err != nil {
			r.fail(fmt.Errorf("replica: queue %s: %w", r.queue, err))
			return
		}
	}
	durable, last := r.log.DurableOffset(), r.log.LastOffset()
	r.mu.Lock()
	hw := r.st.HW
	if r.st.Leader && len(p.ISR) >= p.MinISR && r.m.lease() && durable > hw {
		hw = durable
	}
	drop := min(compact, hw+1)
	r.st.LastOffset, r.st.DurableOffset = last, durable
	advanced := hw > r.st.HW
	r.st.HW = hw
	r.mu.Unlock()
	if advanced {
		r.h.Committed(hw)
	}
	if drop > 1 && drop > r.log.FirstOffset() {
		if err := r.log.DropBefore(drop); err != nil {
			r.fail(fmt.Errorf("replica: queue %s: compact before %d: %w", r.queue, drop, err))
		}
	}
}

// fail stops the replica's appends after a log error and tells the handler.
func (r *replica) fail(err error) {
	r.mu.Lock()
	r.failErr = err
	r.pending = nil
	r.mu.Unlock()
	if fh, ok := r.h.(FailureHandler); ok {
		fh.Failed(err)
	}
}
