package cluster

import (
	"fmt"
	"testing"
	"time"
)

// TestRefusedStoppedNotCut: the Raft leader reports a follower whose
// process stopped (nothing listens on its port) as refused, and not one
// merely cut off by a partition; the follower restarted on its port is no
// longer refused.
func TestRefusedStoppedNotCut(t *testing.T) {
	faults := NewFaults()
	nodes := startCluster(t, 3, 3, faults)
	leader := waitLeader(t, nodes, 15*time.Second)
	var others []*testNode
	for _, n := range nodes {
		if n != leader {
			others = append(others, n)
		}
	}
	cut, stopped := others[0], others[1]

	faults.Partition([]string{cut.Addr()}, []string{leader.Addr(), stopped.Addr()})
	if err := stopped.Shutdown(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() string {
		if !leader.Refused(stopped.Name()) {
			return fmt.Sprintf("the stopped %s not refused on the leader", stopped.Name())
		}
		return ""
	})
	// The leader kept dialing the cut node all along (and lost its
	// leadership: no majority): a cut is never a refusal.
	if leader.Refused(cut.Name()) {
		t.Fatalf("the partitioned %s reported refused", cut.Name())
	}
	faults.Heal()
	back := stopped.restart(t)
	eventually(t, 15*time.Second, func() string {
		for _, n := range []*testNode{leader, cut} {
			if n.Refused(back.Name()) {
				return fmt.Sprintf("%s still refused on %s after its restart", back.Name(), n.Name())
			}
		}
		return ""
	})
}
