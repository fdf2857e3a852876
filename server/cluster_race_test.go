package server

import (
	"testing"
	"time"
)

// TestClusterLateAutoDeleteLeavesRedeclaredQueue: an auto-delete queue on
// node A is deleted by its last cancel; node B declares a queue of the same
// name. A delete that A proposed for the first queue and that commits only
// now (as a proposal in flight while the queue was deleted and declared
// again would: here the same proposal replayed) names the first queue's
// instance and leaves B's queue alone on every node.
func TestClusterLateAutoDeleteLeavesRedeclaredQueue(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	a, b := nodes[0], nodes[1]
	_, ach := a.channel(t)
	if _, err := ach.QueueDeclare("ad", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	first := a.Vhost("/").queue("ad")
	if first.instance == "" {
		t.Fatal("a queue declared in a cluster has no instance")
	}
	_, err := ach.Consume("ad", "c1", true, false, false, false, nil)
	must(t, err)
	must(t, ach.Cancel("c1", false))
	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.name+" to auto-delete ad", func() bool { return n.Vhost("/").queue("ad") == nil })
	}
	_, bch := b.channel(t)
	if _, err := bch.QueueDeclare("ad", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	second := b.Vhost("/").queue("ad")
	if second.instance == first.instance {
		t.Fatal("the redeclared queue has the first one's instance")
	}
	// What removeQueueInCluster proposed for the first queue, late.
	if _, err := a.propose(DeleteQueue{Vhost: "/", Name: "ad", Owner: first.ownerRef, Instance: first.instance}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if q := n.Vhost("/").queue("ad"); q == nil || q.instance != second.instance {
			t.Fatalf("%s: the late delete of the first ad removed the redeclared one", n.name)
		}
	}
}
