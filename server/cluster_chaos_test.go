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

// ingressKeys are the keys node n names its consumers of remote queues by.
func ingressKeys(n *clusterNode) []uint64 {
	r := n.remote
	r.mu.Lock()
	defer r.mu.Unlock()
	var keys []uint64
	for k := range r.consumers {
		keys = append(keys, k)
	}
	return keys
}

// TestClusterIngressKeysDifferAcrossRestarts: a node restarted before its
// peers notice (a kill -9 and a restart within gossip's ~7 s suspicion)
// must not name its new remote consumers with the keys of the old
// process's, which the home still holds: the home would push the old
// consumer's deliveries to the new one (maybe on another queue) and take
// its acks for them. warren-chaos -scope cluster restarts nodes so.
func TestClusterIngressKeysDifferAcrossRestarts(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	home := nodes[0]
	_, hch := home.channel(t)
	mustDeclareDurable(t, hch, "kq")
	ingress := nodes[1]
	waitFor(t, 10*time.Second, "kq on "+ingress.name, func() bool { return ingress.Vhost("/").queue("kq") != nil })
	_, ch := ingress.channel(t)
	_, err := ch.Consume("kq", "", false, false, false, false, nil)
	must(t, err)
	first := ingressKeys(ingress)
	if len(first) != 1 {
		t.Fatalf("consumer keys %v, want one", first)
	}
	ingress = ingress.restart(t)
	r := ingress.remote
	r.mu.Lock()
	next := r.nextKey // the new process's keys are next+1, next+2, ...
	r.mu.Unlock()
	if next < first[0] && first[0] <= next+1_000_000 {
		t.Fatalf("the restarted node's next consumer keys (from %d) reach %d, the key of the old process's consumer", next+1, first[0])
	}
}
