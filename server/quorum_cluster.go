package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/cluster/replica"
)

// Quorum queues in a cluster. Every node knows each quorum queue's
// placement (its replicas, leader, epoch and in-sync set): it is carried
// by the DeclareQueue command, changed only by the AlterQueueISR and
// ElectQueueLeader commands through the metadata Raft group, and stored
// with the queue's definition. Each node applies every placement to its
// handle (quorumQueue.applyPlacement): the leader rebuilds the queue from
// its log and serves it; a mirror follows the leader's log; a node holding
// no replica, and a mirror for its clients, forwards to the leader through
// the remote-queue proxy.

// AlterQueueISR is a quorum queue leader's in-sync set change, a
// compare-and-set on the placement's epoch and version
// (replica.CheckAlterISR).
type AlterQueueISR struct {
	Vhost   string   `json:"vhost"`
	Name    string   `json:"name"`
	Epoch   uint64   `json:"epoch"`
	Version uint64   `json:"version"`
	ISR     []string `json:"isr"`
}

// ElectQueueLeader is a new leader for a quorum queue whose leader's node
// is down, chosen by the metadata leader (replica.ElectLeader); applied
// only if the placement is still the one it was chosen from.
type ElectQueueLeader struct {
	Vhost     string            `json:"vhost"`
	Name      string            `json:"name"`
	Placement replica.Placement `json:"placement"`
}

func (c AlterQueueISR) writes(*metaBatch) error    { return nil }
func (c ElectQueueLeader) writes(*metaBatch) error { return nil }

func init() {
	for _, c := range []Command{AlterQueueISR{}, ElectQueueLeader{}} {
		t := reflect.TypeOf(c)
		commandTypes[t.Name()] = t
	}
}

// staleText marks the refusal of a placement change that lost its
// compare-and-set, so the controller maps it back to ErrStalePlacement.
const staleText = "stale quorum queue placement"

// prepareQuorumPlacement is the prepare of both placement commands: find
// the queue, compute the new placement from the current one, store it
// with the queue's definition and hand it to the queue.
func (s *Server) prepareQuorumPlacement(c Command) (prepared, error) {
	var vhost, name string
	switch c := c.(type) {
	case AlterQueueISR:
		vhost, name = c.Vhost, c.Name
	case ElectQueueLeader:
		vhost, name = c.Vhost, c.Name
	case ChangeQueueReplicas:
		vhost, name = c.Vhost, c.Name
	}
	vh, err := s.applyVhost(vhost, methodQueueDeclare)
	if err != nil {
		return noop, err
	}
	q := vh.queue(name)
	h, ok := q.quorumHandle()
	if !ok {
		return noop, refusef(amqp.NotFound, methodQueueDeclare, "no quorum %s", describeQueue(name, vhost))
	}
	cur := h.placement()
	var np replica.Placement
	switch c := c.(type) {
	case AlterQueueISR:
		if err := replica.CheckAlterISR(cur, c.Epoch, c.Version, c.ISR); err != nil {
			return noop, refusef(amqp.PreconditionFailed, methodQueueDeclare, "%s: %v", staleText, err)
		}
		np = cur
		np.ISR = slices.Clone(c.ISR)
		np.Version++
	case ElectQueueLeader:
		np = c.Placement
		if np.Epoch != cur.Epoch+1 || np.Version != cur.Version+1 || !slices.Contains(cur.ISR, np.Leader) {
			return noop, refusef(amqp.PreconditionFailed, methodQueueDeclare, "%s: election from epoch %d version %d, queue at %d/%d",
				staleText, np.Epoch-1, np.Version-1, cur.Epoch, cur.Version)
		}
	case ChangeQueueReplicas:
		var ok bool
		if np, ok = changedReplicas(cur, c); !ok || !h.mirrored {
			return noop, refusef(amqp.PreconditionFailed, methodQueueDeclare, "%s: replicas %v from version %d, queue at %d led by %s",
				staleText, c.Replicas, c.Version, cur.Version, cur.Leader)
		}
	}
	rec := DeclareQueue{Vhost: vhost, Name: name, Durable: true, AutoDelete: q.autoDelete,
		Arguments: tableBytes(q.args), Node: np.Leader, Placement: &np}
	return prepared{records: []Command{rec}, install: func() (any, error) {
		h.applyPlacement(s, np)
		return nil, nil
	}}, nil
}

// quorumHandle is q's quorum queue handle, if q is a quorum queue.
func (q *Queue) quorumHandle() (*quorumQueue, bool) {
	if q == nil {
		return nil, false
	}
	h, ok := q.h.(*quorumQueue)
	return h, ok
}

// quorumController is the replica manager's Controller: it proposes a
// leader's in-sync set change through Raft.
type quorumController struct{ s *Server }

func (c quorumController) AlterISR(ctx context.Context, queue string, epoch, version uint64, isr []string) error {
	vhost, name, ok := strings.Cut(queue, "\x00")
	if !ok {
		return fmt.Errorf("quorum controller: bad queue key %q", queue)
	}
	_, err := c.s.proposeCtx(ctx, AlterQueueISR{Vhost: vhost, Name: name, Epoch: epoch, Version: version, ISR: isr})
	var r *CommandRefused
	if errors.As(err, &r) && strings.Contains(r.Text, staleText) {
		return replica.ErrStalePlacement
	}
	return err
}

// clusterReplicaConfig adds to cfg what a cluster node's replicas need:
// connections to the other nodes through the cluster port (replication
// class), the lease (metadata quorum contact within 5 s) and the
// controller.
func (s *Server) clusterReplicaConfig(cfg *replica.Config) {
	cfg.Dial = func(ctx context.Context, node string) (net.Conn, error) {
		cn := s.cluster.started.Load()
		if cn == nil {
			return nil, errors.New("cluster node not started")
		}
		for _, m := range cn.Members() {
			if m.Name == node {
				return cn.DialStream(ctx, m.Addr, cluster.ClassReplication)
			}
		}
		return nil, fmt.Errorf("no cluster member %s", node)
	}
	cfg.Lease = func() bool {
		cn := s.cluster.started.Load()
		return cn != nil && time.Since(cn.LastMetaContact()) < quorumLease
	}
	cfg.Controller = quorumController{s}
}

// quorumLease is how long a leader may commit without metadata-quorum
// contact (design §6.6).
const quorumLease = 5 * time.Second

// serveReplication takes the cluster port's replication connections.
func (s *Server) serveReplication(node *cluster.Node) error {
	return node.HandleStream(cluster.ClassReplication, func(conn net.Conn, from string) {
		s.replicas.ServeConn(conn, from)
	})
}

// quorumCandidates returns up to n cluster members other than this node to
// hold a new quorum queue's mirrors: the members gossip sees alive first,
// then those it sees dead or does not know yet, each group by the fewest
// quorum replicas held (then by name). The members are the Raft
// configuration's servers and gossip's members, less those that left: a
// node that has just restarted knows its peers from its Raft log before
// gossip has reached them, and a queue it placed on the alive ones only
// would get no mirror at all and could never fail over (issue 15).
// RabbitMQ 3.10 also places a quorum queue on the cluster's members
// whether or not they run.
func (s *Server) quorumCandidates(n int) []string {
	if n <= 0 || s.cluster == nil || s.cluster.started.Load() == nil {
		return nil
	}
	held := make(map[string]int)
	for _, vh := range s.Vhosts() {
		for _, q := range vh.Queues() {
			if h, ok := q.quorumHandle(); ok {
				for _, r := range h.placement().Replicas {
					held[r]++
				}
			}
		}
	}
	cn := s.cluster.started.Load()
	alive := make(map[string]bool)
	left := make(map[string]bool)
	var out []string
	add := func(name string) {
		if name != s.cfg.NodeName && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	for _, m := range cn.Members() {
		alive[m.Name] = m.State == cluster.StateAlive
		left[m.Name] = m.State == cluster.StateLeft
		if !left[m.Name] {
			add(m.Name)
		}
	}
	st := cn.Status()
	for _, name := range append(st.Voters, st.NonVoters...) {
		if !left[name] {
			add(name)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if alive[out[i]] != alive[out[j]] {
			return alive[out[i]]
		}
		if held[out[i]] != held[out[j]] {
			return held[out[i]] < held[out[j]]
		}
		return out[i] < out[j]
	})
	return out[:min(n, len(out))]
}

// nodeAlive reports whether another cluster member is alive.
func (s *Server) nodeAlive(node string) bool {
	if s.cluster == nil || s.cluster.started.Load() == nil {
		return false
	}
	for _, m := range s.cluster.started.Load().Members() {
		if m.Name == node {
			return m.State == cluster.StateAlive
		}
	}
	return false
}

// electQuorumLeaders runs on the metadata leader (reapLoop): each quorum
// queue whose leader's node is not alive gets a new leader from its
// in-sync set, or stays down (no unclean election). A node is not alive
// when gossip marks it dead (4 s of suspicion after its first missed
// probe) or, sooner, when this node's dial to its cluster port was just
// refused (cluster.Node.Refused): no process listens there, so the old
// leader can write nothing more and need not be waited out (design §6.2).
func (s *Server) electQuorumLeaders() {
	cn := s.cluster.started.Load()
	live := func(n string) bool {
		return n == s.cfg.NodeName || (s.nodeAlive(n) && (cn == nil || !cn.Refused(n)))
	}
	for _, vh := range s.Vhosts() {
		for _, q := range vh.Queues() {
			h, ok := q.quorumHandle()
			if !ok {
				continue
			}
			p := h.placement()
			if len(p.Replicas) < 2 || live(p.Leader) {
				continue
			}
			np, ok := replica.ElectLeader(p, live, nil)
			if !ok {
				s.log.Warn("quorum queue down: no live in-sync replica", "vhost", vh.name, "queue", q.name, "isr", p.ISR)
				continue
			}
			if _, err := s.propose(ElectQueueLeader{Vhost: vh.name, Name: q.name, Placement: np}); err != nil {
				s.log.Warn("could not elect a quorum queue leader", "vhost", vh.name, "queue", q.name, "err", err)
				continue
			}
			s.log.Info("quorum queue leader elected", "vhost", vh.name, "queue", q.name, "leader", np.Leader, "epoch", np.Epoch)
		}
	}
}
