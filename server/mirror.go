package server

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"sort"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/cluster/replica"
)

// Mirrored classic queues (ha-* policies) in a cluster. A durable,
// non-exclusive classic queue matched at declare by a policy with ha-mode
// is placed like a quorum queue (its DeclareQueue carries the placement)
// and runs the quorum queue's code over a replicated log (quorum_*.go),
// with the classic queue's argument, consume and delete rules: the
// classic queue's own files (queueindex and the vhost store) do not run
// under replication. Its placement follows the policy: the metadata
// leader reconciles every mirrored queue's replicas with its policy each
// reapInterval (ChangeQueueReplicas through Raft); an added mirror catches
// up from the leader's log and joins the in-sync set through the leader's
// AlterQueueISR, a removed one drops its log. What differs from RabbitMQ
// is in doc.go.

// mirrorPolicy is what an ha-* policy asks of a classic queue.
type mirrorPolicy struct {
	mode   string   // "all", "exactly" or "nodes"
	count  int      // exactly's ha-params
	nodes  []string // nodes' ha-params
	minISR int      // ha-min-isr (Warren's key), 1 when absent
}

// mirrorPolicyOf reads the ha-* keys of a merged policy definition; ok is
// false when it sets no ha-mode, or ha-params do not fit it (validated
// when the policy was set, so only a definition older than the
// validation gets here).
func mirrorPolicyOf(def map[string]any) (mp mirrorPolicy, ok bool) {
	mode, _ := def["ha-mode"].(string)
	mp = mirrorPolicy{mode: mode, minISR: 1}
	if n, isInt := haCount(def["ha-min-isr"]); isInt && n > 0 {
		mp.minISR = int(min(n, 1<<16))
	}
	switch mode {
	case "all":
		return mp, true
	case "exactly":
		n, isInt := haCount(def["ha-params"])
		mp.count = int(min(n, 1<<16))
		return mp, isInt && n > 0
	case "nodes":
		list, _ := def["ha-params"].([]any)
		for _, v := range list {
			if s, isStr := v.(string); isStr {
				mp.nodes = append(mp.nodes, s)
			}
		}
		return mp, len(mp.nodes) > 0
	}
	return mp, false
}

// haCount reads an integer ha-* value: an int64 as validated, or the
// json.Number a definition read back from its JSON keeps for a key of
// any type (keyAny).
func haCount(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

// mirroredKind is a classic queue mirrored by an ha-* policy: the quorum
// queue's handle with the classic queue's rules.
type mirroredKind struct{}

func (mirroredKind) newHandle(q *Queue) queueHandle {
	q.journal = &quorumJournal{}
	return &quorumQueue{classicQueue: classicQueue{q}, rejected: make(map[uint64]bool), mirrored: true}
}

func (mirroredKind) checkDeclare(*Vhost, string, *amqp.QueueDeclare, *queueArgs) *amqp.Error {
	return nil
}

func (mirroredKind) policyArgs(vh *Vhost, name string, declared amqp.Table, qa queueArgs, def map[string]any) queueArgs {
	return effectiveQueueArgs(name, vh.name, declared, def, qa)
}

// mirrorable reports whether a declaration is a classic queue an ha
// policy can mirror: durable and not exclusive (RabbitMQ never mirrors
// exclusive queues; Warren keeps a non-durable queue on its home node).
func mirrorable(d DeclareQueue, args amqp.Table) bool {
	t, _ := args["x-queue-type"].(string)
	return d.Durable && !d.Exclusive && (t == "" || t == "classic")
}

// placeMirrored gives a classic queue's declaration a placement when an
// ha policy matches it in a cluster. A standalone node keeps a single copy
// (a plain classic queue; the API lists no mirrors).
func (s *Server) placeMirrored(d DeclareQueue, args amqp.Table) (DeclareQueue, bool) {
	if s.cluster == nil || s.cluster.started.Load() == nil || !mirrorable(d, args) {
		return d, false
	}
	vh := s.Vhost(d.Vhost)
	if vh == nil {
		return d, false
	}
	_, _, def := vh.adm.policySet().match(queueTarget(args), d.Name)
	mp, ok := mirrorPolicyOf(def)
	if !ok {
		return d, false
	}
	self := s.cfg.NodeName
	nodes := s.mirrorReplicas(mp, replica.Placement{Leader: self, Replicas: []string{self}, ISR: []string{self}})
	isr := []string{self}
	for _, n := range nodes[1:] {
		if s.nodeAlive(n) {
			isr = append(isr, n)
		}
	}
	p := replica.Placement{Replicas: nodes, Leader: self, Epoch: 1, ISR: isr, MinISR: min(mp.minISR, len(nodes)), Version: 1}
	d.Placement = &p
	d.Node = self
	return d, true
}

// mirrorReplicas is the replica set policy mp asks for a queue placed as
// cur, its leader first and kept. Mirrors that are down stay (a restart
// resumes, it does not re-copy); exactly N drops the extra mirrors out of
// sync first and adds the alive members holding the fewest replicas.
// With no policy (mp.mode "") it is the leader alone.
func (s *Server) mirrorReplicas(mp mirrorPolicy, cur replica.Placement) []string {
	leader := cur.Leader
	members := s.clusterMemberNames()
	isMemberNode := func(n string) bool { return slices.Contains(members, n) }
	var others []string
	switch mp.mode {
	case "all":
		for _, n := range cur.Replicas {
			if n != leader && isMemberNode(n) {
				others = append(others, n)
			}
		}
		for _, n := range members {
			if n != leader && s.nodeAlive(n) && !slices.Contains(others, n) {
				others = append(others, n)
			}
		}
	case "nodes":
		for _, n := range mp.nodes {
			if n != leader && isMemberNode(n) && !slices.Contains(others, n) {
				others = append(others, n)
			}
		}
	case "exactly":
		for _, n := range cur.Replicas {
			if n != leader && isMemberNode(n) {
				others = append(others, n)
			}
		}
		// In sync first, then alive: those are the ones worth keeping.
		rank := func(n string) int {
			switch {
			case slices.Contains(cur.ISR, n):
				return 0
			case s.nodeAlive(n):
				return 1
			}
			return 2
		}
		sort.SliceStable(others, func(i, j int) bool { return rank(others[i]) < rank(others[j]) })
		want := max(mp.count-1, 0)
		if len(others) > want {
			others = others[:want]
		}
		for _, n := range s.quorumCandidates(len(members)) {
			if len(others) >= want {
				break
			}
			if n != leader && !slices.Contains(others, n) {
				others = append(others, n)
			}
		}
	}
	sort.Strings(others)
	return append([]string{leader}, others...)
}

// clusterMemberNames is every member of the cluster that has not left.
func (s *Server) clusterMemberNames() []string {
	cn := s.cluster.started.Load()
	if cn == nil {
		return []string{s.cfg.NodeName}
	}
	var out []string
	for _, m := range cn.Members() {
		if m.State != cluster.StateLeft {
			out = append(out, m.Name)
		}
	}
	return out
}

// ChangeQueueReplicas sets a mirrored queue's replicas and MinISR, a
// compare-and-set on the placement's version: the leader stays, the
// in-sync set keeps only remaining replicas, an added one starts out of
// sync and joins once caught up.
type ChangeQueueReplicas struct {
	Vhost    string   `json:"vhost"`
	Name     string   `json:"name"`
	Version  uint64   `json:"version"`
	Replicas []string `json:"replicas"`
	MinISR   int      `json:"min_isr"`
}

func (c ChangeQueueReplicas) writes(*metaBatch) error { return nil }

func init() {
	t := reflect.TypeOf(ChangeQueueReplicas{})
	commandTypes[t.Name()] = t
}

// changedReplicas is the placement c makes of cur; false when c no longer
// applies (the placement moved on, or c would remove the leader).
func changedReplicas(cur replica.Placement, c ChangeQueueReplicas) (replica.Placement, bool) {
	if c.Version != cur.Version || len(c.Replicas) == 0 || c.Replicas[0] != cur.Leader || c.MinISR < 1 {
		return cur, false
	}
	np := cur
	np.Replicas = slices.Clone(c.Replicas)
	np.ISR = nil
	for _, n := range cur.ISR {
		if slices.Contains(np.Replicas, n) {
			np.ISR = append(np.ISR, n)
		}
	}
	np.MinISR = c.MinISR
	np.Version++
	return np, true
}

// reconcileMirrors runs on the metadata leader (reapLoop): each mirrored
// queue whose replicas differ from what its policy asks gets them changed
// through Raft. A queue whose leader is down waits for its election.
func (s *Server) reconcileMirrors() {
	for _, vh := range s.Vhosts() {
		for _, q := range vh.Queues() {
			h, ok := q.quorumHandle()
			if !ok || !h.mirrored {
				continue
			}
			p := h.placement()
			if p.Leader != s.cfg.NodeName && !s.nodeAlive(p.Leader) {
				continue
			}
			_, _, def := vh.policyNames(queueTarget(q.declaredArgs()), q.name)
			mp, _ := mirrorPolicyOf(def) // no ha policy: the leader alone
			want := s.mirrorReplicas(mp, p)
			minISR := min(mp.minISR, len(want))
			if slices.Equal(want, sortedReplicas(p)) && minISR == p.MinISR {
				continue
			}
			c := ChangeQueueReplicas{Vhost: vh.name, Name: q.name, Version: p.Version, Replicas: want, MinISR: minISR}
			if _, err := s.propose(c); err != nil {
				s.log.Warn("could not change a mirrored queue's replicas", "vhost", vh.name, "queue", q.name, "err", err)
				continue
			}
			s.log.Info("mirrored queue replicas changed", "vhost", vh.name, "queue", q.name, "from", p.Replicas, "to", want)
		}
	}
}

// sortedReplicas is p's replicas as mirrorReplicas orders them: the
// leader, then the others by name.
func sortedReplicas(p replica.Placement) []string {
	var others []string
	for _, n := range p.Replicas {
		if n != p.Leader {
			others = append(others, n)
		}
	}
	sort.Strings(others)
	return append([]string{p.Leader}, others...)
}

// joinReplica starts this node's new replica of a mirrored queue whose
// placement now names it (ChangeQueueReplicas): an empty log, whatever an
// earlier membership left behind, as a mirror that catches up from the
// leader's log; its clients keep going to the leader.
func (h *quorumQueue) joinReplica(srv *Server, p replica.Placement) {
	q := h.q
	vh := q.vhost
	if vh.storage != nil {
		if err := os.RemoveAll(vh.storage.quorumDir(q.name)); err != nil {
			vh.log.Error("mirrored queue: cannot clear an old log; no replica here", "queue", q.name, "err", err)
			return
		}
	}
	h.setForward(srv, p.Leader)
	l, dir, err := openQuorumLog(vh, q.name)
	if err != nil {
		vh.log.Error("mirrored queue: cannot open a new replica's log", "queue", q.name, "err", err)
		return
	}
	r, err := srv.replicas.Open(replicaKey(vh.name, q.name), p, l, h)
	if err != nil {
		vh.log.Error("mirrored queue: cannot start a new replica", "queue", q.name, "err", err)
		if cerr := l.Close(); cerr != nil {
			vh.log.Error("closing a mirrored queue's log", "queue", q.name, "err", cerr)
		}
		return
	}
	h.mu.Lock()
	h.log, h.dir, h.r, h.committed = l, dir, r, 0
	h.mu.Unlock()
	vh.log.Info("mirrored queue replica added here", "queue", q.name, "leader", p.Leader)
}

// leaveReplica stops this node's replica of a mirrored queue whose
// placement no longer names it and drops its log; its clients keep going
// to the leader.
func (h *quorumQueue) leaveReplica(srv *Server, p replica.Placement) {
	q := h.q
	vh := q.vhost
	h.mu.Lock()
	r, l, dir := h.r, h.log, h.dir
	h.r, h.log, h.dir = nil, nil, ""
	h.mu.Unlock()
	h.setForward(srv, p.Leader)
	var err error
	if r != nil {
		err = r.Close()
	}
	if l != nil {
		err = errors.Join(err, l.Close())
	}
	if dir != "" {
		err = errors.Join(err, os.RemoveAll(dir))
	}
	if err != nil {
		vh.log.Error("mirrored queue: dropping a removed replica", "queue", q.name, "err", err)
	}
	vh.log.Info("mirrored queue replica removed here", "queue", q.name, "leader", p.Leader)
}
