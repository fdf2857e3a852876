package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/cluster"
)

// A node with Config.Cluster is a member of a cluster: its definitions are
// the state of the metadata Raft group (package cluster). Server.apply
// proposes each command (propose) and returns once this node's FSM has
// applied the committed entry, with the same result and local value the
// standalone apply gives; the FSM (metaFSM) applies committed entries
// through ApplyCommitted's batch apply on every node. A standalone node
// (Config.Cluster nil) never reaches this file: s.cluster is nil and apply
// takes the direct path.

// clusterMember is the cluster side of a Server.
type clusterMember struct {
	cfg  cluster.Config
	node *cluster.Node // set by startCluster
	// started is node once startCluster set it, for goroutines that may
	// run before (a recovered quorum queue's replica dialling its peers).
	started atomic.Pointer[cluster.Node]
	// peers carries the remote-queue plane over node's rpc; made with the
	// server so definitions replayed while the node starts get proxies.
	peers *clusterPeers

	// lost is the members noteLostNodes last saw not alive; only the reap
	// loop's goroutine uses it.
	lost map[string]bool
	// alive is the sorted alive member names noteAliveNodes last saw;
	// only the reap loop's goroutine uses it.
	alive string

	// seq numbers this node's proposals; waiting maps the sequence of a
	// proposal in flight to the slot its apply on this node fills, so the
	// proposer gets its command's local value (a declared *Queue, the
	// messages a delete dropped). Only proposals being waited for have a
	// slot, so the map is bounded by the callers in flight.
	seq     atomic.Uint64
	mu      sync.Mutex
	waiting map[uint64]*applyResult

	// restores counts the definitions snapshots installed (apply_restore.go).
	restores atomic.Uint64
}

// applyResult is what the apply of one proposal gave on this node.
type applyResult struct {
	done bool
	val  any
	err  error
}

// proposal is the data of one metadata log entry: the commands, applied
// in order in one transaction, and who proposed it (so the proposer can
// take its local value).
type proposal struct {
	From     string            `json:"from"`
	Seq      uint64            `json:"seq"`
	Commands []json.RawMessage `json:"commands"`
	// Seed marks the cluster's first definitions (cluster_boot.go): applied
	// only if no seed entry was before it, so a seed proposed twice (by a
	// bootstrapper that crashed before it knew its seed committed) is
	// applied once.
	Seed bool `json:"seed,omitempty"`
}

func newClusterMember(cfg *Config) *clusterMember {
	c := *cfg.Cluster
	if c.NodeName == "" {
		c.NodeName = cfg.NodeName
	}
	if c.DataDir == "" {
		c.DataDir = filepath.Join(cfg.DataDir, "cluster")
	}
	if c.Version == "" {
		c.Version = cfg.ProductVersion
	}
	if c.Logger == nil {
		c.Logger = cfg.Logger
	}
	return &clusterMember{cfg: c, waiting: make(map[uint64]*applyResult)}
}

// StartCluster starts the cluster node of a cluster member, if it is not
// started yet: its port, gossip, and the Raft group whose FSM is this
// server's definitions. Raft replays the log entries meta.db does not have
// before the node serves clients. Start calls it; a caller that changes
// definitions before Start (the load-definitions import) calls it first,
// since a cluster member's changes are proposed through the node. A
// standalone node has nothing to start.
func (s *Server) StartCluster() error {
	if s.cluster == nil || s.cluster.node != nil {
		return nil
	}
	return s.startCluster()
}

func (s *Server) startCluster() error {
	cm := s.cluster
	node, err := cluster.New(&cm.cfg, metaFSM{s})
	if err != nil {
		return fmt.Errorf("server: starting the cluster node: %w", err)
	}
	cm.node = node
	cm.started.Store(node)
	cm.peers.bind(node)
	node.HandleRPC(methodNodeInfo, s.handleNodeInfo)
	if err := s.serveReplication(node); err != nil {
		node.Shutdown()
		return fmt.Errorf("server: serving queue replication: %w", err)
	}
	s.log.Info("cluster node started", "cluster_addr", node.Addr(), "cluster", cm.cfg.ClusterName)
	s.goFunc(s.seedLoop)
	s.goFunc(s.reapLoop)
	return nil
}

// stopCluster leaves Raft and gossip running no longer; the node's place
// in the cluster is kept (it resumes it on restart).
func (s *Server) stopCluster() {
	if s.cluster == nil || s.cluster.node == nil {
		return
	}
	if err := s.cluster.node.Shutdown(); err != nil {
		s.log.Error("stopping the cluster node", "err", err)
	}
}

// ClusterNode returns the node's cluster membership, nil on a standalone
// node (for the management API and tests).
func (s *Server) ClusterNode() *cluster.Node {
	if s.cluster == nil {
		return nil
	}
	return s.cluster.node
}

// propose replicates cmds as one log entry and returns, once this node
// applied it, the local value and result of the last command (the only
// one, except for the seed entry).
func (s *Server) propose(cmds ...Command) (any, error) {
	return s.proposeCtx(context.Background(), cmds...)
}

// proposeCtx is propose bounded by ctx as well as the propose timeout.
func (s *Server) proposeCtx(parent context.Context, cmds ...Command) (any, error) {
	return s.proposeEntry(parent, false, cmds)
}

// proposeEntry proposes cmds as one entry, a seed entry with seed.
func (s *Server) proposeEntry(parent context.Context, seed bool, cmds []Command) (any, error) {
	cm := s.cluster
	p := proposal{From: cm.cfg.NodeName, Seq: cm.seq.Add(1), Seed: seed}
	for _, c := range cmds {
		if d, ok := c.(DeclareQueue); ok && d.Instance == "" {
			d.Instance = newQueueInstance()
			c = d
		}
		raw, err := EncodeCommand(c)
		if err != nil {
			return nil, err
		}
		p.Commands = append(p.Commands, raw)
	}
	data, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("server: encoding a proposal: %w", err)
	}
	slot := &applyResult{}
	cm.mu.Lock()
	cm.waiting[p.Seq] = slot
	cm.mu.Unlock()
	defer func() {
		cm.mu.Lock()
		delete(cm.waiting, p.Seq)
		cm.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(parent, cm.cfg.ProposeTimeout)
	defer cancel()
	result, err := cm.node.Propose(ctx, data)
	if err != nil {
		what := "read the cluster's definitions" // a barrier: no commands
		if len(cmds) > 0 {
			what = describeCommand(cmds[len(cmds)-1])
		}
		return nil, &ClusterUnavailableError{What: what, Timeout: cm.cfg.ProposeTimeout, Err: err}
	}
	cm.mu.Lock()
	got := *slot
	cm.mu.Unlock()
	if got.done {
		return got.val, got.err
	}
	// Applied, but not by this process's slot (cannot happen for a fresh
	// proposal; kept for safety): the FSM's result, without a value.
	return nil, result
}

// deliver hands the apply's value and result of this node's proposal seq
// to its waiting proposer, if it still waits.
func (cm *clusterMember) deliver(seq uint64, val any, err error) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	if slot := cm.waiting[seq]; slot != nil {
		*slot = applyResult{done: true, val: val, err: err}
	}
}

// ErrClusterUnavailable is the sentinel of ClusterUnavailableError.
var ErrClusterUnavailable = errors.New("cluster metadata unavailable")

// ClusterUnavailableError is a definition change that could not be
// committed in time: no Raft majority answered within the propose timeout
// (or this node could not apply the committed entry in time). Nothing
// diverges: the change either never commits or commits everywhere.
type ClusterUnavailableError struct {
	What    string // "declare queue 'q' in vhost '/'"
	Timeout time.Duration
	Err     error
}

func (e *ClusterUnavailableError) Error() string { return e.Reason() + ": " + e.Err.Error() }

// Reason is the text a client gets: RabbitMQ's (Khepri's) words for a
// metadata change that timed out, and why. It fits an AMQP reply text.
func (e *ClusterUnavailableError) Reason() string {
	return fmt.Sprintf("failed to %s because the operation timed out (%s: no Raft majority within %s)",
		e.What, clusterUnavailableText, e.Timeout)
}

// clusterUnavailableText marks the reply text of a ClusterUnavailableError.
const clusterUnavailableText = "cluster metadata unavailable"

func (e *ClusterUnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrClusterUnavailable) true.
func (e *ClusterUnavailableError) Is(target error) bool { return target == ErrClusterUnavailable }

// metaFSM is the metadata Raft group's state machine: this server's
// definitions (cluster.FSM).
type metaFSM struct{ s *Server }

// ApplyBatch applies each committed entry with its index: its commands in
// one meta.db transaction recording the index (applyCommitted). A storage
// failure stops the node: serving state meta.db does not hold would
// diverge from the cluster.
func (f metaFSM) ApplyBatch(entries []cluster.Entry) []error {
	out := make([]error, len(entries))
	for i, e := range entries {
		out[i] = f.s.applyEntry(e)
	}
	return out
}

func (f metaFSM) AppliedIndex() uint64 { return f.s.AppliedIndex() }

// Snapshot writes this node's definitions for a Raft snapshot
// (apply_restore.go).
func (f metaFSM) Snapshot(w io.Writer) error { return f.s.writeSnapshot(w) }

// Restore installs a snapshot into the running node: the difference
// between its definitions and the snapshot's, applied as one batch
// (apply_restore.go).
func (f metaFSM) Restore(r io.Reader) error { return f.s.restoreSnapshot(r) }

// applyEntry applies one committed entry and gives the proposer, when it
// is this node, its local value.
func (s *Server) applyEntry(e cluster.Entry) error {
	var p proposal
	if err := json.Unmarshal(e.Data, &p); err != nil {
		// Deterministic: every node fails to decode the same bytes. The
		// index still advances (an empty batch records it).
		s.recordIndexOnly(e.Index)
		return fmt.Errorf("server: undecodable metadata entry %d: %w", e.Index, err)
	}
	cmds := make([]Command, 0, len(p.Commands))
	var decodeErr error
	for _, raw := range p.Commands {
		c, err := DecodeCommand(raw)
		if err != nil {
			decodeErr = errors.Join(decodeErr, err)
			continue
		}
		cmds = append(cmds, c)
	}
	vals, errs, fatal := s.applyCommittedBatch(e.Index, cmds, p.Seed)
	if fatal != nil {
		s.log.Error("cannot store a committed definition change; stopping the node", "index", e.Index, "err", fatal)
		panic(fmt.Sprintf("server: applying metadata entry %d: %v", e.Index, fatal))
	}
	result := decodeErr
	var val any
	for i := range cmds {
		if errs[i] != nil {
			result = errors.Join(result, errs[i])
		}
		val = vals[i]
	}
	if p.From == s.cluster.cfg.NodeName {
		s.cluster.deliver(p.Seq, val, result)
	}
	return result
}

// applyCommittedBatch is ApplyCommitted with decoded commands and their
// local values. An entry at or below the applied index is skipped, and so
// are the commands of a seed entry after the first.
func (s *Server) applyCommittedBatch(index uint64, cmds []Command, seed bool) ([]any, []error, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if index <= s.appliedIndex {
		return make([]any, len(cmds)), make([]error, len(cmds)), nil
	}
	if seed {
		if s.seeded {
			vals, errs, fatal := s.applyLocked(index, nil)
			return append(vals, make([]any, len(cmds))...), append(errs, make([]error, len(cmds))...), fatal
		}
		s.seeded = true // stored with this entry's index; a failure to store it is fatal
	}
	return s.applyLocked(index, cmds)
}

func (s *Server) recordIndexOnly(index uint64) {
	if _, _, fatal := s.applyCommittedBatch(index, nil, false); fatal != nil {
		panic(fmt.Sprintf("server: recording metadata index %d: %v", index, fatal))
	}
}

// describeCommand names what a command does, for the error a client gets
// when it cannot be committed (RabbitMQ's Khepri wording: "failed to
// declare exchange 'x' in vhost '/' because the operation timed out").
func describeCommand(c Command) string {
	switch c := c.(type) {
	case DeclareExchange:
		return fmt.Sprintf("declare exchange '%s' in vhost '%s'", c.Name, c.Vhost)
	case DeleteExchange:
		return fmt.Sprintf("delete exchange '%s' in vhost '%s'", c.Name, c.Vhost)
	case DeclareQueue:
		return fmt.Sprintf("declare queue '%s' in vhost '%s'", c.Name, c.Vhost)
	case DeleteQueue:
		return fmt.Sprintf("delete queue '%s' in vhost '%s'", c.Name, c.Vhost)
	case Bind:
		return fmt.Sprintf("bind '%s' to %s '%s' in vhost '%s'", c.Source, c.DestinationType, c.Destination, c.Vhost)
	case Unbind:
		return fmt.Sprintf("unbind '%s' from %s '%s' in vhost '%s'", c.Source, c.DestinationType, c.Destination, c.Vhost)
	case DeclareVhost:
		return fmt.Sprintf("declare vhost '%s'", c.Name)
	case DeleteVhost:
		return fmt.Sprintf("delete vhost '%s'", c.Name)
	case PutUser:
		return fmt.Sprintf("put user '%s'", c.Name)
	case DeleteUser:
		return fmt.Sprintf("delete user '%s'", c.Name)
	case SetPolicy:
		return fmt.Sprintf("set policy '%s' in vhost '%s'", c.Policy.Name, c.Policy.Vhost)
	case ClearPolicy:
		return fmt.Sprintf("clear policy '%s' in vhost '%s'", c.Name, c.Vhost)
	}
	return "apply " + commandType(c)
}

// removeQueueInCluster proposes the delete of q by auto-delete, exclusive
// cleanup or x-expires. Only the queue's home node proposes it (the other
// nodes' copies have no consumers and no expiry of their own), and an
// exclusive queue's delete names its owner, so a later queue of the same
// name is left alone.
func (vh *Vhost) removeQueueInCluster(q *Queue, why string) {
	if vh.queue(q.name) != q || !q.homedHere() {
		return
	}
	if _, err := vh.srv.propose(DeleteQueue{Vhost: vh.name, Name: q.name, Owner: q.ownerRef, Instance: q.instance}); err != nil {
		vh.log.Error("could not delete a queue", "queue", q.name, "reason", why, "err", err)
	}
}

// proposable is the command as proposed: a queue.delete with if-unused or
// if-empty is checked here, against the queue's home (its consumers and
// messages are not replicated state, so the nodes' applies could disagree),
// and proposed unconditional.
func (s *Server) proposable(c Command) (Command, error) {
	d, ok := c.(DeleteQueue)
	if !ok || !(d.IfUnused || d.IfEmpty) {
		return c, nil
	}
	if vh := s.Vhost(d.Vhost); vh != nil {
		if q := vh.queue(d.Name); q != nil {
			if aerr := queueDeletable(q, d.IfUnused, d.IfEmpty); aerr != nil {
				return nil, refusal(aerr)
			}
		}
	}
	d.IfUnused, d.IfEmpty = false, false
	return d, nil
}

// reapInterval is how often the Raft leader looks for queues that died
// with their node.
const reapInterval = time.Second

// reapLoop runs on every cluster node; while it leads the metadata group,
// it deletes, through Raft, the exclusive and non-durable queues whose home
// node gossip reports dead or gone: RabbitMQ drops them when their node
// goes down, and no other node can serve them. (The home node itself
// deletes them when their connection closes; this is for a node that
// crashed or was cut off.)
func (s *Server) reapLoop() {
	t := time.NewTicker(reapInterval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		s.noteLostNodes()
		s.reclaimQuorumLeaders()
		s.noteAliveNodes()
		if s.cluster.node.IsLeader() {
			s.reapDeadQueues()
			s.electQuorumLeaders()
			s.reconcileMirrors()
		}
	}
}

// noteLostNodes tells the remote-queue plane, once per loss, of each member
// gossip no longer sees alive (NodeDown: consumers of its queues cancelled
// here, what it held of this node's queues requeued); a member seen alive
// again may be lost again later.
func (s *Server) noteLostNodes() {
	cm := s.cluster
	for _, m := range cm.node.Members() {
		if m.Name == cm.cfg.NodeName {
			continue
		}
		alive := m.State == cluster.StateAlive
		if cm.lost[m.Name] == !alive {
			continue
		}
		if cm.lost == nil {
			cm.lost = make(map[string]bool)
		}
		cm.lost[m.Name] = !alive
		if !alive {
			s.log.Warn("cluster node lost: its queues are unavailable here until it returns", "node", m.Name, "state", m.State.String())
			s.NodeDown(m.Name)
		}
	}
}

func (s *Server) reapDeadQueues() {
	gone := make(map[string]bool)
	for _, m := range s.cluster.node.Members() {
		if m.State != cluster.StateAlive {
			gone[m.Name] = true
		}
	}
	if len(gone) == 0 {
		return
	}
	for _, vh := range s.Vhosts() {
		for _, q := range vh.Queues() {
			if q.home == "" || !gone[q.home] || (q.durable && !q.exclusive) {
				continue
			}
			if _, err := s.propose(DeleteQueue{Vhost: vh.name, Name: q.name, Owner: q.ownerRef, Instance: q.instance}); err != nil {
				s.log.Warn("could not delete a queue of a node that is down", "vhost", vh.name, "queue", q.name, "node", q.home, "err", err)
				return
			}
			s.log.Info("deleted a queue of a node that is down", "vhost", vh.name, "queue", q.name, "node", q.home)
		}
	}
}

// newQueueInstance is a fresh DeclareQueue.Instance: 64 random bits, so
// incarnations differ across nodes and restarts without coordination.
func newQueueInstance() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("server: reading random bytes: %v", err)) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}
