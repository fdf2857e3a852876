package server

import (
	"math/rand/v2"
	"time"

	"github.com/warrenmq/warren/cluster/replica"
)

// startReplicas creates the node's replica manager, which every quorum
// queue's replica of this node runs in. A standalone node's placements
// have one replica, which needs no connections.
func (s *Server) startReplicas() error {
	cfg := replica.DefaultConfig()
	cfg.Node = s.cfg.NodeName
	if s.cluster != nil {
		s.clusterReplicaConfig(&cfg)
	}
	m, err := replica.NewManager(cfg)
	if err != nil {
		return err
	}
	s.replicas = m
	return nil
}

// quorumDrainTime bounds how long a stopping node waits for each quorum
// queue's last records to be written.
const quorumDrainTime = 2 * time.Second

// drainQuorumQueues writes what the quorum queues led here still hold
// unwritten, before their replicas stop.
func (s *Server) drainQuorumQueues() {
	for _, vh := range s.Vhosts() {
		for _, q := range vh.Queues() {
			if h, ok := q.quorumHandle(); ok && h.leading() {
				h.drain(quorumDrainTime)
			}
		}
	}
}

// stopReplicas stops every replica of this node; the queues' logs are
// closed with the storage (shutdownStorage).
func (s *Server) stopReplicas() {
	if s.replicas == nil {
		return
	}
	if err := s.replicas.Shutdown(); err != nil {
		s.log.Error("stopping the queue replicas", "err", err)
	}
}

// closeQuorumQueues closes the logs of vh's quorum queues (shutdown).
func closeQuorumQueues(vh *Vhost) {
	for _, q := range vh.Queues() {
		if h, ok := q.h.(*quorumQueue); ok {
			if err := h.close(); err != nil {
				vh.log.Error("closing a quorum queue's log", "queue", q.name, "err", err)
			}
		}
	}
}

// placeQuorum gives a quorum queue's declaration its placement, chosen
// here, on the declaring node, before the command is applied or proposed:
// every node then applies the same placement. Other commands, and
// declarations that carry one, pass unchanged.
func (s *Server) placeQuorum(c Command) Command {
	d, ok := c.(DeclareQueue)
	if !ok || d.Placement != nil {
		return c
	}
	args, err := bytesTable(d.Arguments)
	if err != nil {
		return c // refused by the apply
	}
	if args["x-queue-type"] != "quorum" {
		if md, ok := s.placeMirrored(d, args); ok {
			return md
		}
		return c
	}
	if !d.Durable || d.Exclusive || d.AutoDelete {
		return c // refused by the apply
	}
	size := defaultQuorumGroupSize
	if n, ok := intArg(args["x-quorum-initial-group-size"]); ok && n > 0 {
		size = int(min(n, 1<<16))
	}
	locator, _ := args["x-queue-leader-locator"].(string)
	p := s.quorumPlacement(size, locator)
	d.Placement = &p
	if d.Node == "" {
		d.Node = p.Leader
	}
	return d
}

// quorumPlacement places a new quorum queue of size replicas
// (rabbit_queue_location:select_leader_and_followers): this node and the
// cluster members holding the fewest replicas, alive ones first
// (quorumCandidates), each node once; the leader is this node
// (client-local, the default) or, for balanced (and its 3.10 aliases
// random and least-leaders), the replica leading the fewest quorum queues
// while the node has fewer than quorumRandomLeaderFrom queues, else a
// random replica. All are in sync at epoch 1 (every log is empty): a
// member that does not follow within the lag timeout is shrunk out by the
// leader. (Starting members gossip did not yet see alive outside the set
// left them to the expansion, which under steady publishing did not add
// them within 10 s in bench/cluster-compare.sh, and the queue could not
// fail over.) A majority must stay in sync for commits.
func (s *Server) quorumPlacement(size int, locator string) replica.Placement {
	self := s.cfg.NodeName
	nodes := []string{self}
	if s.cluster != nil {
		nodes = append(nodes, s.quorumCandidates(size-1)...)
	}
	leader := self
	switch locator {
	case "balanced", "random", "least-leaders":
		leader = s.balancedLeader(nodes)
	}
	return replica.Placement{Replicas: nodes, Leader: leader, Epoch: 1,
		ISR: append([]string(nil), nodes...), MinISR: len(nodes)/2 + 1, Version: 1}
}

// quorumRandomLeaderFrom is RabbitMQ's queue_count_start_random_selection:
// from this many queues on, balanced picks a random leader instead of
// counting each node's leaders.
const quorumRandomLeaderFrom = 1000

// balancedLeader is the balanced locator's choice among replicas.
func (s *Server) balancedLeader(replicas []string) string {
	leaders := make(map[string]int, len(replicas))
	count := 0
	for _, vh := range s.Vhosts() {
		for _, q := range vh.Queues() {
			count++
			if h, ok := q.quorumHandle(); ok {
				leaders[h.placement().Leader]++
			}
		}
	}
	if count >= quorumRandomLeaderFrom {
		return replicas[rand.IntN(len(replicas))]
	}
	best := replicas[0]
	for _, n := range replicas[1:] {
		if leaders[n] < leaders[best] {
			best = n
		}
	}
	return best
}

// setQuorumPlacement gives a quorum queue being built its placement.
func setQuorumPlacement(q *Queue, p *replica.Placement) {
	if h, ok := q.h.(*quorumQueue); ok && p != nil {
		h.mu.Lock()
		h.place = *p
		h.mu.Unlock()
	}
}

// onlineNodes is the nodes among nodes that are up: this one, and in a
// cluster the members its membership sees alive.
func (s *Server) onlineNodes(nodes []string) []string {
	var out []string
	for _, n := range nodes {
		if n == s.cfg.NodeName || s.nodeAlive(n) {
			out = append(out, n)
		}
	}
	return out
}
