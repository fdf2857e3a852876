package server

import (
	"slices"
	"strings"

	"github.com/warrenmq/warren/cluster"
)

// What the plugin runners (shovels, federation links) need to run each of
// their workers on one node of a cluster: the members gossip sees alive,
// and a call when that set changes. A queue's home is Queue.HomeNode. The
// runners decide from these alone, so every node reaches the same answer
// without asking the others.

// AliveNodes returns the names of the cluster members gossip sees alive,
// sorted, this node among them; a standalone node is alone. It is empty
// while this node sees no majority of the Raft voters alive (just
// started, before gossip merged, or on the minority side of a partition):
// the majority side may be running every worker then, so this node runs
// none rather than run them twice.
func (s *Server) AliveNodes() []string {
	self := s.NodeName()
	if s.cluster == nil || s.cluster.node == nil {
		return []string{self}
	}
	node := s.cluster.node
	out := []string{self}
	for _, m := range node.Members() {
		if m.Name != self && m.State == cluster.StateAlive {
			out = append(out, m.Name)
		}
	}
	voters := node.Status().Voters
	seen := 0
	for _, v := range voters {
		if slices.Contains(out, v) {
			seen++
		}
	}
	if 2*seen <= len(voters) {
		return nil
	}
	slices.Sort(out)
	return out
}

// OnMembershipChange registers f to be called when the set AliveNodes
// returns changes (seen within a reap interval, a second). f must return
// at once without calling into the server: the runners only wake their
// own goroutine. A standalone node never calls it.
func (s *Server) OnMembershipChange(f func()) {
	s.admin.pmu.Lock()
	s.admin.memberObservers = append(s.admin.memberObservers, f)
	s.admin.pmu.Unlock()
}

// noteAliveNodes calls the membership observers when the alive set
// differs from the one it saw last (the reap loop's goroutine only).
func (s *Server) noteAliveNodes() {
	alive := strings.Join(s.AliveNodes(), "\x00")
	if alive == s.cluster.alive {
		return
	}
	s.cluster.alive = alive
	s.admin.pmu.RLock()
	observers := s.admin.memberObservers
	s.admin.pmu.RUnlock()
	for _, f := range observers {
		f()
	}
}
