package server

import (
	"context"
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
	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.name+" to have the redeclared ad", func() bool {
			q := n.Vhost("/").queue("ad")
			return q != nil && q.instance == second.instance
		})
	}
	// What removeQueueInCluster proposed for the first queue, late.
	if _, err := a.propose(DeleteQueue{Vhost: "/", Name: "ad", Owner: first.ownerRef, Instance: first.instance}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.name+" to apply the late delete", func() bool { return n.AppliedIndex() >= a.AppliedIndex() })
		if q := n.Vhost("/").queue("ad"); q == nil || q.instance != second.instance {
			t.Fatalf("%s: the late delete of the first ad removed the redeclared one", n.name)
		}
	}
}

// TestClusterSeedAfterCrashBeforeSeed: a node that bootstrapped a cluster
// and stopped before proposing its seed (the default user and vhost) had
// left the cluster without them for good, since only the process that
// bootstrapped proposed it. Now the leader proposes the seed whenever none
// was applied, so the restarted node seeds it.
func TestClusterSeedAfterCrashBeforeSeed(t *testing.T) {
	reached := make(chan struct{}, 1)
	testHookBeforeSeed = func(*Server) bool {
		select {
		case reached <- struct{}{}:
		default:
		}
		return false
	}
	t.Cleanup(func() { testHookBeforeSeed = nil })
	dir := t.TempDir()
	n := startClusterNode(t, "warren@seed", dir, clusterTestConfig(1))
	select {
	case <-reached:
	case <-time.After(20 * time.Second):
		t.Fatal("the node never came to propose its seed")
	}
	must(t, n.Close())
	if hasUser(n.Server, "guest") {
		t.Fatal("the seed was applied before the crash point")
	}
	testHookBeforeSeed = nil
	back := startClusterNode(t, "warren@seed", dir, n.cc)
	waitFor(t, 20*time.Second, "the restarted bootstrapper to seed the cluster", func() bool {
		return hasUser(back.Server, "guest") && back.Vhost("/") != nil
	})
}

// TestClusterSecondSeedIsSkipped: a seed entry after the first (a
// bootstrapper that proposed again, not knowing its first had committed)
// changes nothing.
func TestClusterSecondSeedIsSkipped(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	before := userHash(t, nodes[0].Server, "guest")
	if _, err := nodes[1].proposeEntry(context.Background(), true, []Command{
		PutUser{Name: "guest", PasswordHash: HashPassword("other"), Tags: []string{"administrator"}},
		DeclareVhost{Name: "second-seed"},
	}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.name+" to apply the second seed", func() bool { return n.AppliedIndex() >= nodes[1].AppliedIndex() })
		if userHash(t, n.Server, "guest") != before || n.Vhost("second-seed") != nil {
			t.Fatalf("%s applied a second seed", n.name)
		}
	}
}

func userHash(t *testing.T, s *Server, name string) string {
	t.Helper()
	for _, u := range s.userHashes() {
		if u.Name == name {
			return u.PasswordHash
		}
	}
	t.Fatalf("no user %s", name)
	return ""
}
