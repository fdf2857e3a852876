package replica

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// checkHandler calls check at every commit (on the replica's goroutine).
type checkHandler struct {
	recHandler
	check func(hw uint64)
}

func (h *checkHandler) Committed(hw uint64) {
	if h.check != nil {
		h.check(hw)
	}
	h.recHandler.Committed(hw)
}

type q3 struct {
	c    *tcluster
	logs map[string]*MemLog
	hs   map[string]*checkHandler
	rs   map[string]Replica
	mu   sync.Mutex
	bad  []string
}

// openQ3 opens queue "q" on n1..n3 with n1 leading and all in sync; every
// commit reported anywhere is checked against every in-sync log's durable
// offset at that moment (the commit rule seen from outside).
func openQ3(t *testing.T, c *tcluster) *q3 {
	q := &q3{c: c, logs: map[string]*MemLog{}, hs: map[string]*checkHandler{}, rs: map[string]Replica{}}
	c.ctl.placements["q"] = Placement{Replicas: []string{"n1", "n2", "n3"}, Leader: "n1", Epoch: 1,
		ISR: []string{"n1", "n2", "n3"}, MinISR: 2, Version: 1}
	for _, n := range []string{"n1", "n2", "n3"} {
		q.logs[n] = NewMemLog()
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		q.openOn(t, n)
	}
	return q
}

func (q *q3) openOn(t *testing.T, n string) {
	h := &checkHandler{}
	h.check = func(hw uint64) {
		p := q.c.ctl.placement("q")
		if p.Leader != n {
			return // a mirror's commit is the leader's, capped by its own durable (checked below)
		}
		for _, m := range p.ISR {
			if d := q.logs[m].DurableOffset(); d < hw {
				q.mu.Lock()
				q.bad = append(q.bad, fmt.Sprintf("%s committed %d, in-sync %s durable %d", n, hw, m, d))
				q.mu.Unlock()
			}
		}
		if d := q.logs[n].DurableOffset(); d < hw {
			q.mu.Lock()
			q.bad = append(q.bad, fmt.Sprintf("%s reports %d above its durable %d", n, hw, d))
			q.mu.Unlock()
		}
	}
	q.hs[n] = h
	q.rs[n] = q.c.ctl.open(n, "q", q.logs[n], h)
}

func (q *q3) checkOK(t *testing.T) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.bad) > 0 {
		t.Fatalf("commit rule broken: %v", q.bad[:min(5, len(q.bad))])
	}
}

func (q *q3) appendN(t *testing.T, node string, n int, tag string) uint64 {
	t.Helper()
	var last uint64
	for i := range n {
		var err error
		last, err = q.rs[node].Append([]byte(fmt.Sprintf("%s-%d", tag, i)))
		if err != nil {
			t.Fatalf("append on %s: %v", node, err)
		}
	}
	return last
}

func TestReplicaClusterCommitsWhenAllInSyncDurable(t *testing.T) {
	c := newTCluster(t, 3)
	q := openQ3(t, c)
	last := q.appendN(t, "n1", 500, "a")
	waitFor(t, "leader commit", 10*time.Second, func() bool { return q.hs["n1"].hw() == last })
	for _, n := range []string{"n2", "n3"} {
		waitFor(t, n+" commit", 10*time.Second, func() bool { return q.hs[n].hw() == last })
		if bad := sameLog(t, q.logs["n1"], q.logs[n], last); bad != 0 {
			t.Fatalf("%s differs from the leader at %d", n, bad)
		}
	}
	q.checkOK(t)
	if st := q.rs["n1"].Status(); !st.Leader || st.HW != last || len(st.Mirrors) != 2 || !st.Mirrors["n2"].InSync {
		t.Fatalf("leader status %+v", st)
	}
	if _, err := q.rs["n2"].Append([]byte("x")); err != ErrNotLeader {
		t.Fatalf("append on a mirror: %v", err)
	}
}

// A mirror that cannot be reached holds commits back until the controller
// takes it out of the in-sync set; then commits go on without it.
func TestReplicaClusterShrinkThenExpand(t *testing.T) {
	c := newTCluster(t, 3)
	q := openQ3(t, c)
	first := q.appendN(t, "n1", 10, "a")
	waitFor(t, "commit", 10*time.Second, func() bool { return q.hs["n1"].hw() == first })
	c.cut("n1", "n3")
	last := q.appendN(t, "n1", 100, "b")
	waitFor(t, "commit without n3", 10*time.Second, func() bool { return q.hs["n1"].hw() == last })
	if p := c.ctl.placement("q"); slices.Contains(p.ISR, "n3") {
		t.Fatalf("committed %d with n3 cut but still in the in-sync set %v", last, p.ISR)
	}
	q.checkOK(t)
	c.heal("n1", "n3")
	waitFor(t, "n3 back in sync", 10*time.Second, func() bool { return slices.Contains(c.ctl.placement("q").ISR, "n3") })
	last = q.appendN(t, "n1", 10, "c")
	waitFor(t, "n3 commit", 10*time.Second, func() bool { return q.hs["n3"].hw() == last })
	if bad := sameLog(t, q.logs["n1"], q.logs["n3"], last); bad != 0 {
		t.Fatalf("n3 differs from the leader at %d", bad)
	}
	q.checkOK(t)
}

// The leader's process dies (its manager stops, its disk loses what was
// not fsynced); the controller elects an in-sync mirror, which holds every
// committed record and goes on committing.
func TestReplicaClusterLeaderKilled(t *testing.T) {
	c := newTCluster(t, 3)
	q := openQ3(t, c)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // appends race the kill, as publishes do
		defer wg.Done()
		for i := 0; i < 5000; i++ {
			select {
			case <-done:
				return
			default:
			}
			if _, err := q.rs["n1"].Append([]byte(fmt.Sprintf("a-%d", i))); err != nil {
				return
			}
			if i%50 == 0 {
				time.Sleep(time.Millisecond) // paces the load loop so the kill lands mid-stream
			}
		}
	}()
	waitFor(t, "some commits", 10*time.Second, func() bool { return q.hs["n1"].hw() > 200 })
	c.mgr("n1").Shutdown()
	close(done)
	wg.Wait()
	q.logs["n1"].PowerCut()
	committed := q.hs["n1"].hw()
	c.leases["n1"].Store(false)
	c.ctl.forget("n1", "q")
	np := c.ctl.elect("q", func(n string) bool { return n != "n1" }, map[string]Log{"n2": q.logs["n2"], "n3": q.logs["n3"]})
	if np.Leader == "n1" || slices.Contains(np.ISR, "n1") {
		t.Fatalf("election kept the dead leader: %+v", np)
	}
	nl := np.Leader
	if bad := sameLog(t, q.logs["n1"], q.logs[nl], committed); bad != 0 {
		t.Fatalf("new leader %s lacks committed record %d (committed %d)", nl, bad, committed)
	}
	waitFor(t, "new leader accepts appends", 10*time.Second, func() bool {
		_, err := q.rs[nl].Append([]byte("after"))
		return err == nil
	})
	last := q.appendN(t, nl, 20, "b")
	waitFor(t, "commit under the new leader", 10*time.Second, func() bool { return q.hs[nl].hw() >= last })
	q.checkOK(t)
}

// A leader cut off from everyone loses its lease and commits nothing; the
// controller elects on the majority side; on heal the old leader follows
// and its uncommitted tail is gone.
func TestReplicaClusterPartitionedLeaderTruncatedOnHeal(t *testing.T) {
	c := newTCluster(t, 3)
	q := openQ3(t, c)
	first := q.appendN(t, "n1", 50, "a")
	waitFor(t, "commit", 10*time.Second, func() bool { return q.hs["n1"].hw() == first })
	c.cut("n1", "n2")
	c.cut("n1", "n3")
	c.leases["n1"].Store(false) // cut from the metadata majority too
	c.ctl.forget("n1", "q")
	np := c.ctl.elect("q", func(n string) bool { return n != "n1" }, map[string]Log{"n2": q.logs["n2"], "n3": q.logs["n3"]})
	stale := q.appendN(t, "n1", 30, "zombie")
	nl := np.Leader
	waitFor(t, "new leader", 10*time.Second, func() bool { _, err := q.rs[nl].Append([]byte("x")); return err == nil })
	last := q.appendN(t, nl, 40, "b")
	waitFor(t, "majority commits", 10*time.Second, func() bool { return q.hs[nl].hw() >= last })
	time.Sleep(50 * time.Millisecond) // give the zombie time to commit, which it must not
	if hw := q.hs["n1"].hw(); hw != first {
		t.Fatalf("partitioned leader committed %d (before the cut: %d, its tail reached %d)", hw, first, stale)
	}
	c.heal("n1", "n2")
	c.heal("n1", "n3")
	c.leases["n1"].Store(true)
	c.ctl.mu.Lock()
	c.ctl.replicas["q"]["n1"] = q.rs["n1"]
	c.ctl.mu.Unlock()
	c.ctl.publish("q")
	last = q.appendN(t, nl, 10, "c")
	waitFor(t, "old leader follows and commits", 10*time.Second, func() bool { return q.hs["n1"].hw() >= last })
	if bad := sameLog(t, q.logs[nl], q.logs["n1"], last); bad != 0 {
		t.Fatalf("old leader differs from the new one at %d after heal", bad)
	}
	q.checkOK(t)
}

// Compact on the leader reclaims the settled prefix on every replica.
func TestReplicaClusterCompactReachesMirrors(t *testing.T) {
	c := newTCluster(t, 3)
	q := openQ3(t, c)
	last := q.appendN(t, "n1", 100, "a")
	waitFor(t, "commit", 10*time.Second, func() bool { return q.hs["n3"].hw() == last })
	q.rs["n1"].Compact(60)
	for _, n := range []string{"n1", "n2", "n3"} {
		waitFor(t, n+" compacted", 10*time.Second, func() bool { return q.logs[n].FirstOffset() == 60 })
	}
}

// A mirror whose disk is full rejects what it cannot write; the leader has
// it taken out of the in-sync set at once and commits go on without it.
func TestReplicaClusterMirrorDiskFull(t *testing.T) {
	c := newTCluster(t, 3)
	q := openQ3(t, c)
	first := q.appendN(t, "n1", 10, "a")
	waitFor(t, "commit", 10*time.Second, func() bool { return q.hs["n3"].hw() == first })
	q.logs["n3"].FailAppends(fmt.Errorf("no space left on device"))
	start := time.Now()
	last := q.appendN(t, "n1", 10, "b")
	waitFor(t, "commit without n3", 10*time.Second, func() bool { return q.hs["n1"].hw() == last })
	if took := time.Since(start); took >= 400*time.Millisecond {
		t.Fatalf("took %v, the lag timeout: the REJECT did not shrink at once", took)
	}
	if slices.Contains(c.ctl.placement("q").ISR, "n3") {
		t.Fatal("n3 still in sync")
	}
	q.checkOK(t)
}
