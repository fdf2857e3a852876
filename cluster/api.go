package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// IsLeader reports whether this node leads the metadata Raft group (and so
// runs the controller).
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the current leader's node name and cluster address, empty
// when none is known.
func (n *Node) Leader() (name, addr string) {
	a, id := n.raft.LeaderWithID()
	name, _ = splitServerID(id)
	return name, string(a)
}

// LeaderCh delivers true when this node becomes leader and false when it
// stops; it holds only the latest value, so a slow reader sees the current
// state, not every transition.
func (n *Node) LeaderCh() <-chan bool { return n.leaderCh }

// Members returns every node gossip knows, sorted by name; dead and left
// nodes stay listed until forgotten. (memberlist's suspect state is not
// reported by its events, so a suspect node shows alive until declared
// dead.)
func (n *Node) Members() []Member { return n.mem.list() }

// Events delivers membership changes. It is bounded: when the reader lags,
// events are dropped (DroppedEvents counts them) and Members is the truth.
func (n *Node) Events() <-chan Event { return n.mem.events }

// DroppedEvents counts events dropped because Events was full.
func (n *Node) DroppedEvents() uint64 { return n.mem.dropped.Load() }

// SetAlarms sets this node's resource alarm bits and gossips them.
func (n *Node) SetAlarms(a Alarms) error {
	return n.mem.update(func(m *localMeta) { m.alarms = a }, n.cfg.RPCTimeout)
}

// Status is a point-in-time view of the node for operators.
type Status struct {
	Name, ID, Addr string
	RaftState      string // Leader, Follower, Candidate, Shutdown
	Leader         string // leader's node name, empty if unknown
	LeaderAddr     string
	Term           uint64
	LastIndex      uint64
	CommitIndex    uint64
	AppliedIndex   uint64 // by this node's FSM
	SnapshotIndex  uint64 // of this node's newest Raft snapshot; its log starts after it less TrailingLogs
	Voters         []string
	NonVoters      []string
	Members        []Member
	AuthFailures   uint64 // inbound connections refused by authentication
	JoinError      string // why the leader last refused to add this node
	DroppedEvents  uint64
	Bootstrapped   bool // this process bootstrapped the Raft group
}

// Status returns the node's view of the cluster.
func (n *Node) Status() Status {
	leader, leaderAddr := n.Leader()
	st := Status{
		Name: n.cfg.NodeName, ID: n.id, Addr: n.Addr(),
		RaftState: n.raft.State().String(), Leader: leader, LeaderAddr: leaderAddr,
		Term: n.raft.CurrentTerm(), LastIndex: n.raft.LastIndex(), CommitIndex: n.raft.CommitIndex(),
		AppliedIndex: n.fsm.appliedIndex(), Members: n.Members(),
		AuthFailures: n.trans.AuthFailures(), DroppedEvents: n.DroppedEvents(),
		Bootstrapped: n.bootstrapped.Load(),
	}
	st.SnapshotIndex, _ = strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	if servers, err := n.servers(); err == nil {
		for _, s := range servers {
			name, _ := splitServerID(s.ID)
			if s.Suffrage == raft.Voter {
				st.Voters = append(st.Voters, name)
			} else {
				st.NonVoters = append(st.NonVoters, name)
			}
		}
	}
	n.mu.Lock()
	if n.joinErr != nil {
		st.JoinError = n.joinErr.Error()
	}
	n.mu.Unlock()
	return st
}

// HandleStream registers the handler of a stream connection class
// (ClassReplication, ClassCatchup) for the planes built on this package.
// The handler owns the authenticated connection and must return when it is
// closed; Shutdown closes it.
func (n *Node) HandleStream(class byte, handler func(conn net.Conn, fromNode string)) error {
	if class != ClassReplication && class != ClassCatchup {
		return fmt.Errorf("cluster: class %d is not a stream class", class)
	}
	n.trans.Handle(class, func(conn net.Conn, from peerInfo) { handler(conn, from.name) })
	return nil
}

// DialStream opens an authenticated connection of a stream class to the
// node at addr; the caller owns and closes it.
func (n *Node) DialStream(ctx context.Context, addr string, class byte) (net.Conn, error) {
	if class != ClassReplication && class != ClassCatchup {
		return nil, fmt.Errorf("cluster: class %d is not a stream class", class)
	}
	return n.trans.Dial(ctx, addr, class)
}

// LastMetaContact is when this node last knew itself in contact with the
// metadata group's quorum: now on the leader (Raft steps a leader down
// once it misses a quorum for LeaderLeaseTimeout), the last message from
// the leader on a follower. A replicated queue's leader commits only
// within its lease of this.
func (n *Node) LastMetaContact() time.Time {
	if n.raft.State() == raft.Leader {
		return time.Now()
	}
	return n.raft.LastContact()
}
