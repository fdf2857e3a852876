package cluster

import (
	"fmt"
	"testing"
	"time"
)

// checkFormed waits until every node sees the same configuration of all
// nodes with voters voters, and checks that exactly one node bootstrapped.
func checkFormed(t *testing.T, nodes []*testNode, voters int, timeout time.Duration) {
	t.Helper()
	waitLeader(t, nodes, timeout)
	eventually(t, timeout, func() string {
		for _, n := range nodes {
			st := n.Status()
			if len(st.Voters)+len(st.NonVoters) != len(nodes) || len(st.Voters) != voters {
				return fmt.Sprintf("%s: voters %v non-voters %v, want %d of %d", n.Name(), st.Voters, st.NonVoters, voters, len(nodes))
			}
		}
		return ""
	})
	bootstrapped := 0
	for _, n := range nodes {
		if n.Status().Bootstrapped {
			bootstrapped++
		}
	}
	if bootstrapped != 1 {
		t.Fatalf("%d nodes bootstrapped, want exactly 1", bootstrapped)
	}
}

func TestFormationThreeNodes(t *testing.T) {
	nodes := startCluster(t, 3, 3, nil)
	checkFormed(t, nodes, 3, 15*time.Second)
	// Gossip carries each node's identity and, once it has applied its
	// configuration, its Raft flags.
	eventually(t, 10*time.Second, func() string {
		for _, n := range nodes {
			members := n.Members()
			if len(members) != 3 {
				return fmt.Sprintf("%s sees %d members", n.Name(), len(members))
			}
			for _, m := range members {
				if m.State != StateAlive || !m.InRaft || !m.Voter || m.ID == "" || m.BootID == "" || m.Addr == "" {
					return fmt.Sprintf("%s sees member %+v", n.Name(), m)
				}
			}
		}
		return ""
	})
}

// Five nodes: three bootstrap (BootstrapExpect 3), two more join later as
// non-voters and are promoted after PromoteAfter, up to 5 voters (design
// §6.1: 3 voters up to four nodes, 5 from five).
func TestFormationFiveNodesPromotesToFiveVoters(t *testing.T) {
	nodes := startCluster(t, 3, 3, nil)
	checkFormed(t, nodes, 3, 15*time.Second)
	for _, name := range []string{"n4", "n5"} {
		cfg := testConfig(t, name, nil)
		cfg.BootstrapExpect = 3
		cfg.Seeds = []string{nodes[0].Addr()}
		nodes = append(nodes, startNode(t, cfg))
	}
	checkFormed(t, nodes, 5, 20*time.Second)
}
