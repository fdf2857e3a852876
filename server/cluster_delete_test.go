package server

import (
	"testing"
	"time"
)

// TestClusterRemoteDeleteCommitsOnce: queue.delete on a node other than
// the queue's home is one definition change: one Raft entry. It was two
// (the home's own delete, then the asking node's delete by name), and
// warren-chaos -scope cluster saw what that does: a declare of the same
// name committed between the two (from another client) was deleted by the
// second, so a queue declared after the delete vanished and the history
// was not linearizable (delete on w2 ok at .425, declare on w1 ok at .427,
// w1 reporting the queue missing at .518 with no delete after the declare).
func TestClusterRemoteDeleteCommitsOnce(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	home, other := nodes[0], nodes[1]
	_, hch := home.channel(t)
	mustDeclareDurable(t, hch, "dq")
	waitFor(t, 10*time.Second, "dq on every node", func() bool {
		for _, n := range nodes {
			if n.Vhost("/").queue("dq") == nil {
				return false
			}
		}
		return true
	})
	before := other.AppliedIndex()
	_, och := other.channel(t)
	if _, err := och.QueueDelete("dq", false, false, false); err != nil {
		t.Fatal(err)
	}
	// The delete-ok came after this node applied the delete; wait for the
	// other nodes to apply everything it has, so a second entry would show.
	after := other.AppliedIndex()
	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.name+" to apply the delete", func() bool { return n.AppliedIndex() >= after })
	}
	_, pch := home.channel(t)
	mustDeclareDurable(t, pch, "barrier") // commits after anything still in flight
	if got := home.AppliedIndex() - before; got != 2 {
		t.Fatalf("the remote delete and one declare made %d Raft entries, want 2", got)
	}
	for _, n := range nodes {
		if n.Vhost("/").queue("dq") != nil {
			t.Fatalf("dq still on %s", n.name)
		}
	}
}
