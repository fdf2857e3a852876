package server

import (
	"slices"
	"sort"
	"sync/atomic"
	"time"
)

// ReplicatedQueue is one replicated queue (a quorum queue, or once mirrors
// exist a mirrored classic queue, which shares the handle) as this node
// sees it, for the health checks and the metrics. The mgmt packages may
// not import cluster/replica, so the replica's Status is copied here.
type ReplicatedQueue struct {
	Vhost, Name string
	// Type is "quorum", or "classic" for a mirrored classic queue.
	Type string
	// Leader, Members and ISR are the committed placement; Online the
	// members this node sees up.
	Leader               string
	Members, ISR, Online []string
	// Elections is the number of leader elections the placement went
	// through: its epoch grows by one with each, from 1 at declare.
	Elections uint64
	// Local is set when this node holds a replica; the fields below are
	// its replica's and zero otherwise.
	Local   bool
	Leading bool // the replica leads the current epoch
	Epoch   uint64
	// LastOffset is the last record written here, DurableOffset the last
	// synced one, CommitOffset the commit index (HW) as known here.
	LastOffset, DurableOffset, CommitOffset uint64
	// Mirrors is, on the leader, what it knows of each other member.
	Mirrors []MirrorReplica
}

// MirrorReplica is the leader's view of one mirror.
type MirrorReplica struct {
	Node             string
	Written, Durable uint64
	InSync           bool
	Lag              time.Duration // age of its oldest unacknowledged record
}

// ReplicatedQueues lists every replicated queue of every vhost, by vhost
// and name. It takes each handle's lock in turn, no server-wide one.
func (s *Server) ReplicatedQueues() []ReplicatedQueue {
	var out []ReplicatedQueue
	for _, vh := range s.Vhosts() {
		for _, q := range vh.Queues() {
			h, ok := q.quorumHandle()
			if !ok {
				continue
			}
			out = append(out, h.replicatedStatus(s, vh.name, q.name))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Vhost != out[j].Vhost {
			return out[i].Vhost < out[j].Vhost
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func (h *quorumQueue) replicatedStatus(s *Server, vhost, name string) ReplicatedQueue {
	h.mu.Lock()
	p, r := h.place, h.r
	h.mu.Unlock()
	rq := ReplicatedQueue{Vhost: vhost, Name: name, Type: h.typeName(), Leader: p.Leader,
		Members: slices.Clone(p.Replicas), ISR: slices.Clone(p.ISR), Online: s.onlineNodes(p.Replicas)}
	if p.Epoch > 1 {
		rq.Elections = p.Epoch - 1
	}
	if r == nil {
		return rq
	}
	st := r.Status() // with h.mu released: the replica's goroutine may hold its own lock
	rq.Local, rq.Leading, rq.Epoch = true, st.Leader, st.Epoch
	rq.LastOffset, rq.DurableOffset, rq.CommitOffset = st.LastOffset, st.DurableOffset, st.HW
	for n, m := range st.Mirrors {
		rq.Mirrors = append(rq.Mirrors, MirrorReplica{Node: n, Written: m.Written, Durable: m.Durable, InSync: m.InSync, Lag: m.Lag})
	}
	sort.Slice(rq.Mirrors, func(i, j int) bool { return rq.Mirrors[i].Node < rq.Mirrors[j].Node })
	return rq
}

// Clustered reports whether this node runs in a cluster (RabbitMQ's
// health checks answer "single node cluster" otherwise).
func (s *Server) Clustered() bool { return s.cluster != nil }

// QuorumCritical lists the quorum queues with a member on this node that
// would lose their majority if this node stopped, by RabbitMQ 3.10's rule
// (filter_quorum_critical): members up <= len(members)/2+1. A member is
// up when its node is up and it is in the in-sync set, because only
// in-sync members count towards Warren's commits.
func (s *Server) QuorumCritical() []ReplicatedQueue {
	var out []ReplicatedQueue
	for _, rq := range s.ReplicatedQueues() {
		if rq.Type == "quorum" && slices.Contains(rq.Members, s.cfg.NodeName) && quorumCritical(rq) {
			out = append(out, rq)
		}
	}
	return out
}

func quorumCritical(rq ReplicatedQueue) bool {
	up := 0
	for _, n := range rq.Online {
		if slices.Contains(rq.ISR, n) {
			up++
		}
	}
	return up <= len(rq.Members)/2+1
}

// MirrorSyncCritical lists the mirrored classic queues led here with no
// synchronised mirror online (RabbitMQ 3.10's
// list_local_mirrored_classic_without_synchronised_mirrors): stopping this
// node would lose what only the leader holds.
func (s *Server) MirrorSyncCritical() []ReplicatedQueue {
	var out []ReplicatedQueue
	for _, rq := range s.ReplicatedQueues() {
		if rq.Type == "classic" && rq.Leader == s.cfg.NodeName && len(rq.Members) > 1 && !hasSyncedMirrorOnline(rq) {
			out = append(out, rq)
		}
	}
	return out
}

func hasSyncedMirrorOnline(rq ReplicatedQueue) bool {
	for _, n := range rq.Online {
		if n != rq.Leader && slices.Contains(rq.ISR, n) {
			return true
		}
	}
	return false
}

// CommitLatencyBuckets are the upper bounds, in seconds, of the commit
// latency histogram: an fsync on every in-sync member is milliseconds on
// an SSD, seconds on a stalled disk or a lost mirror (the lag timeout).
var CommitLatencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// commitLatency is a histogram of publish-to-commit times of this node's
// quorum queue leaders, kept with atomics: Committed observes it on the
// replica's goroutine and a scrape reads it without a lock.
type commitLatency struct {
	counts [16]atomic.Uint64 // per bucket of CommitLatencyBuckets, then +Inf
	sumNs  atomic.Uint64
}

func (c *commitLatency) observe(d time.Duration) {
	s := d.Seconds()
	i, _ := slices.BinarySearch(CommitLatencyBuckets, s)
	c.counts[i].Add(1)
	c.sumNs.Add(uint64(max(d, 0)))
}

// CommitLatencyHistogram is a snapshot of the commit latency histogram.
type CommitLatencyHistogram struct {
	// Counts are per bucket of CommitLatencyBuckets (not cumulative),
	// then the count above the last bound.
	Counts []uint64
	Sum    time.Duration
}

// QuorumCommitLatency is the histogram of the times from a confirmed
// publish's append on this node's quorum queue leaders to its commit.
func (s *Server) QuorumCommitLatency() CommitLatencyHistogram {
	h := CommitLatencyHistogram{Counts: make([]uint64, len(CommitLatencyBuckets)+1)}
	for i := range h.Counts {
		h.Counts[i] = s.commitLatency.counts[i].Load()
	}
	h.Sum = time.Duration(s.commitLatency.sumNs.Load())
	return h
}
