package replica

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// waitStorageIDs waits until the placement records every in-sync member's
// current StorageID (the leader fills in what the first placement lacked).
func waitStorageIDs(t *testing.T, q *q3) {
	t.Helper()
	waitFor(t, "storage ids recorded", 10*time.Second, func() bool {
		p := q.c.ctl.placement("q")
		for _, n := range p.ISR {
			if p.StorageIDs[n] != q.logs[n].StorageID() {
				return false
			}
		}
		return len(p.ISR) == 3
	})
}

// A mirror whose log is wiped while it is down comes back under a new
// StorageID: the leader takes it out of the in-sync set, it catches up
// from zero and is added back under the new ID.
func TestReplicaClusterWipedMirrorRejoinsUnderNewStorageID(t *testing.T) {
	c := newTCluster(t, 3)
	q := openQ3(t, c)
	first := q.appendN(t, "n1", 100, "a")
	waitFor(t, "commit", 10*time.Second, func() bool { return q.hs["n3"].hw() == first })
	waitStorageIDs(t, q)
	old := q.logs["n3"].StorageID()
	c.mgr("n3").Shutdown()
	c.ctl.forget("n3", "q")
	q.logs["n3"].Wipe()
	q.logs["n3"].Reopen()
	c.start("n3")
	q.openOn(t, "n3")
	waitFor(t, "wiped n3 out of the in-sync set", 10*time.Second, func() bool {
		return !slices.Contains(c.ctl.placement("q").ISR, "n3")
	})
	last := q.appendN(t, "n1", 50, "b")
	waitFor(t, "n3 back under its new id", 10*time.Second, func() bool {
		p := c.ctl.placement("q")
		return slices.Contains(p.ISR, "n3") && p.StorageIDs["n3"] == q.logs["n3"].StorageID() && q.hs["n3"].hw() >= last
	})
	if q.logs["n3"].StorageID() == old {
		t.Fatal("wipe kept the storage id")
	}
	if bad := sameLog(t, q.logs["n1"], q.logs["n3"], last); bad != 0 {
		t.Fatalf("n3 differs from the leader at %d", bad)
	}
	q.checkOK(t)
}

// A wiped node still named in sync (it was down with nothing outstanding)
// must not lead: the only live member, elected by a controller that does
// not know its new StorageID, refuses (ErrStorageMismatch) instead of
// making an empty log the queue's; a controller that knows it elects no one.
func TestReplicaClusterWipedNodeRefusesToLead(t *testing.T) {
	c := newTCluster(t, 3)
	q := openQ3(t, c)
	last := q.appendN(t, "n1", 100, "a")
	waitFor(t, "commit", 10*time.Second, func() bool { return q.hs["n3"].hw() == last })
	waitStorageIDs(t, q)
	for _, n := range []string{"n3", "n1", "n2"} {
		c.mgr(n).Shutdown()
		c.ctl.forget(n, "q")
	}
	q.logs["n3"].Wipe()
	q.logs["n3"].Reopen()
	if p := c.ctl.placement("q"); !slices.Contains(p.ISR, "n3") {
		t.Fatalf("n3 left the in-sync set %v with nothing outstanding", p.ISR)
	}
	live := func(n string) bool { return n == "n3" }
	p := c.ctl.placement("q")
	if _, ok := ElectLeaderStorage(p, live, nil, map[string]string{"n3": q.logs["n3"].StorageID()}); ok {
		t.Fatal("ElectLeaderStorage elected a wiped node")
	}
	np, ok := ElectLeader(p, live, nil)
	if !ok || np.Leader != "n3" {
		t.Fatalf("ElectLeader: %v %+v", ok, np)
	}
	c.ctl.mu.Lock()
	c.ctl.placements["q"] = np
	c.ctl.mu.Unlock()
	c.start("n3")
	q.openOn(t, "n3")
	waitFor(t, "n3 blocked", 5*time.Second, func() bool {
		return errors.Is(q.rs["n3"].Status().Blocked, ErrStorageMismatch)
	})
	if _, err := q.rs["n3"].Append([]byte("x")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append on the wiped node: %v", err)
	}
	if q.logs["n3"].LastOffset() != 0 {
		t.Fatalf("wiped node wrote %d records", q.logs["n3"].LastOffset())
	}
}
