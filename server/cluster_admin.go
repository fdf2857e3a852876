package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/cluster"
)

// The cluster as the management API and warrenctl see it: members from
// gossip (state, alarm bits, version), this node's Raft view, and what
// only a member itself knows (uptime, memory) asked of it over the rpc
// plane.

// methodNodeInfo is the rpc method a member answers with its NodeStats.
const methodNodeInfo = "warren.node-info"

// nodeInfoTimeout bounds the fan-out of ClusterStatus to each member.
const nodeInfoTimeout = time.Second

// NodeStats is what a member reports of itself.
type NodeStats struct {
	UptimeMillis int64  `json:"uptime"`
	MemoryUsed   uint64 `json:"mem_used"`
	MemoryLimit  uint64 `json:"mem_limit"`
	DiskLimit    uint64 `json:"disk_free_limit"`
}

// ClusterMember is one node of the cluster.
type ClusterMember struct {
	Name, Addr, State      string // State: alive, dead, left
	Running                bool
	Self, Voter, Leader    bool
	MemoryAlarm, DiskAlarm bool // gossiped alarm bits
	Version                string
	Stats                  *NodeStats // nil when the member did not answer
	StatsError             string
}

// ClusterStatus is this node's view of the cluster.
type ClusterStatus struct {
	ClusterName, Node, RaftState, Leader string
	Term, CommitIndex, AppliedIndex      uint64
	Voters, NonVoters                    []string
	JoinError                            string
	Members                              []ClusterMember
}

// IsCluster reports whether the node is a member of a cluster.
func (s *Server) IsCluster() bool { return s.cluster != nil }

// ClusterConfigName is the configured cluster name, "" on a standalone
// node.
func (s *Server) ClusterConfigName() string {
	if s.cluster == nil {
		return ""
	}
	return s.cluster.cfg.ClusterName
}

// ClusterStatus returns the cluster's members and Raft state; ok is false
// on a standalone node. The members' own figures are asked in parallel,
// each within nodeInfoTimeout.
func (s *Server) ClusterStatus(ctx context.Context) (st ClusterStatus, ok bool) {
	if s.cluster == nil || s.cluster.node == nil {
		return st, false
	}
	node := s.cluster.node
	rs := node.Status()
	st = ClusterStatus{
		ClusterName: s.cluster.cfg.ClusterName, Node: rs.Name, RaftState: rs.RaftState, Leader: rs.Leader,
		Term: rs.Term, CommitIndex: rs.CommitIndex, AppliedIndex: rs.AppliedIndex,
		Voters: rs.Voters, NonVoters: rs.NonVoters, JoinError: rs.JoinError,
	}
	st.Members = make([]ClusterMember, len(rs.Members))
	var wg sync.WaitGroup
	for i, m := range rs.Members {
		cm := ClusterMember{
			Name: m.Name, Addr: m.Addr, State: m.State.String(), Running: m.State == cluster.StateAlive,
			Self: m.Name == rs.Name, Voter: slices.Contains(rs.Voters, m.Name), Leader: m.Name == rs.Leader,
			MemoryAlarm: m.Alarms&cluster.AlarmMemory != 0, DiskAlarm: m.Alarms&cluster.AlarmDisk != 0,
			Version: m.Version,
		}
		st.Members[i] = cm
		switch {
		case cm.Self:
			stats := s.nodeStats()
			st.Members[i].Stats = &stats
		case cm.Running:
			wg.Add(1)
			go func(i int, addr string) {
				defer wg.Done()
				st.Members[i].Stats, st.Members[i].StatsError = s.askNodeStats(ctx, addr)
			}(i, m.Addr)
		}
	}
	wg.Wait()
	return st, true
}

func (s *Server) askNodeStats(ctx context.Context, addr string) (*NodeStats, string) {
	ctx, cancel := context.WithTimeout(ctx, nodeInfoTimeout)
	defer cancel()
	out, err := s.cluster.node.CallRPC(ctx, addr, methodNodeInfo, nil)
	if err != nil {
		return nil, err.Error()
	}
	var ns NodeStats
	if err := json.Unmarshal(out, &ns); err != nil {
		return nil, err.Error()
	}
	return &ns, ""
}

func (s *Server) nodeStats() NodeStats {
	return NodeStats{
		UptimeMillis: time.Since(s.started).Milliseconds(), MemoryUsed: MemoryUsed(),
		MemoryLimit: s.watermark.Load(), DiskLimit: s.diskLimit.Load(),
	}
}

// handleNodeInfo answers methodNodeInfo.
func (s *Server) handleNodeInfo(context.Context, string, []byte) ([]byte, error) {
	return json.Marshal(s.nodeStats())
}

// gossipAlarms publishes this node's alarm bits when they changed since
// the last call (the resource monitor calls it after each check).
func (s *Server) gossipAlarms(last *cluster.Alarms) {
	if s.cluster == nil || s.cluster.node == nil {
		return
	}
	var a cluster.Alarms
	if s.MemoryAlarm() {
		a |= cluster.AlarmMemory
	}
	if s.DiskAlarm() {
		a |= cluster.AlarmDisk
	}
	if a == *last {
		return
	}
	if err := s.cluster.node.SetAlarms(a); err != nil {
		s.log.Warn("gossiping the resource alarms", "err", err)
		return
	}
	*last = a
}

// noteRemoteAlarms blocks this node's publishers for the alarms other
// running members gossip, and unblocks them when those clear or their
// node stops running (RabbitMQ forgets a down node's alarms). The resource
// monitor calls it at each check, so a remote alarm takes effect within a
// check interval of its gossip arriving.
func (s *Server) noteRemoteAlarms() {
	if s.cluster == nil || s.cluster.node == nil {
		return
	}
	var kinds map[string]bool
	var from []string
	for _, a := range s.remoteAlarms() {
		if kinds == nil {
			kinds = make(map[string]bool)
		}
		kinds[a.Resource] = true
		from = append(from, a.Resource+"@"+a.Node)
	}
	if s.alarms.setRemote(kinds) {
		if len(kinds) > 0 {
			s.log.Warn("resource alarm on another cluster node: blocking publishers", "alarms", strings.Join(from, ","))
		} else {
			s.log.Info("resource alarms of other cluster nodes cleared")
		}
	}
}

// remoteAlarms lists the alarms gossiped by the other running members.
func (s *Server) remoteAlarms() []Alarm {
	var out []Alarm
	for _, m := range s.cluster.node.Members() {
		if m.Name == s.cluster.cfg.NodeName || m.State != cluster.StateAlive {
			continue
		}
		if m.Alarms&cluster.AlarmMemory != 0 {
			out = append(out, Alarm{m.Name, alarmMemory})
		}
		if m.Alarms&cluster.AlarmDisk != 0 {
			out = append(out, Alarm{m.Name, alarmDisk})
		}
	}
	return out
}

// IsClusterUnavailable reports whether err is a definition change that
// failed for want of a Raft majority, also once turned into the AMQP error
// a client gets (asAMQP), for the management API's 503.
func IsClusterUnavailable(err error) bool {
	if errors.Is(err, ErrClusterUnavailable) {
		return true
	}
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.InternalError && strings.Contains(ae.Text, clusterUnavailableText)
}

// ErrNotClustered is returned by the membership operations of a standalone
// node.
var ErrNotClustered = errors.New("server: this node is not a cluster member (cluster-listen is not set)")

// JoinCluster joins the gossip of the nodes at addrs (host:port of their
// cluster ports); a node without Raft state then asks to be added. A node
// with definitions of its own was refused at start, so joining cannot
// merge two sets of definitions.
func (s *Server) JoinCluster(addrs []string) error {
	if s.cluster == nil || s.cluster.node == nil {
		return ErrNotClustered
	}
	if len(addrs) == 0 {
		return fmt.Errorf("%w: no node address to join", ErrInvalid)
	}
	_, err := s.cluster.node.Join(addrs...)
	return err
}

// LeaveCluster leaves the cluster gracefully: leadership is handed over,
// the node leaves the Raft group and gossip, and its cluster side stops.
// The broker keeps serving what it has, but changes nothing any more;
// stop it and empty its data directory before it joins a cluster again
// (its data is the old cluster's).
func (s *Server) LeaveCluster(ctx context.Context) error {
	if s.cluster == nil || s.cluster.node == nil {
		return ErrNotClustered
	}
	return membershipError("leave the cluster", s.cluster.cfg.ProposeTimeout, s.cluster.node.Leave(ctx))
}

// membershipError marks a membership change that found no Raft majority
// as ErrClusterUnavailable.
func membershipError(what string, timeout time.Duration, err error) error {
	if errors.Is(err, cluster.ErrNoQuorum) || errors.Is(err, cluster.ErrNotApplied) {
		return &ClusterUnavailableError{What: what, Timeout: timeout, Err: err}
	}
	return err
}

// ForgetClusterNode removes a node that is down from the cluster (its Raft
// membership and gossip), so a wiped node may come back under its name. A
// live node is refused, as rabbitmqctl forget_cluster_node refuses one.
func (s *Server) ForgetClusterNode(ctx context.Context, name string) error {
	if s.cluster == nil || s.cluster.node == nil {
		return ErrNotClustered
	}
	err := s.cluster.node.Forget(ctx, name)
	switch {
	case errors.Is(err, cluster.ErrUnknownMember):
		return fmt.Errorf("%w: node %q is not a cluster member", ErrNotFound, name)
	case errors.Is(err, cluster.ErrMemberAlive):
		return fmt.Errorf("%w: node %q is running; stop it before forgetting it", ErrInvalid, name)
	}
	return membershipError("forget node '"+name+"'", s.cluster.cfg.ProposeTimeout, err)
}

// Alarm is a resource alarm ("memory" or "disk") in effect on a node.
type Alarm struct{ Node, Resource string }

// ResourceAlarms returns the alarms in effect on this node and, unless
// local or on a standalone node, those the other members last gossiped (as
// rabbit_alarm:get_alarms/0 reports the whole cluster's), by node.
func (s *Server) ResourceAlarms(local bool) []Alarm {
	var out []Alarm
	add := func(node string, memory, disk bool) {
		if memory {
			out = append(out, Alarm{node, alarmMemory})
		}
		if disk {
			out = append(out, Alarm{node, alarmDisk})
		}
	}
	add(s.NodeName(), s.MemoryAlarm(), s.DiskAlarm())
	if local || s.cluster == nil || s.cluster.node == nil {
		return out
	}
	rs := s.cluster.node.Status()
	for _, m := range rs.Members {
		if m.Name != rs.Name && m.State == cluster.StateAlive {
			add(m.Name, m.Alarms&cluster.AlarmMemory != 0, m.Alarms&cluster.AlarmDisk != 0)
		}
	}
	return out
}
