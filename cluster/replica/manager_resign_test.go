package replica

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// isrStays fails the test if the placement's in-sync set loses a member
// within d (an observation window: the fault under test must not cause a
// shrink).
func isrStays(t *testing.T, c *tcluster, n int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if p := c.ctl.placement("q"); len(p.ISR) != n {
			t.Fatalf("in-sync set shrank to %v", p.ISR)
		}
		time.Sleep(time.Millisecond)
	}
}

// The leader's own fsync hangs for twice the lag timeout (400 ms): its
// mirrors are not to blame, so none is shrunk out (KIP-537); the leader
// reports that it should resign while it is stuck, and commits go on once
// the disk answers.
func TestReplicaClusterStalledLeaderResignsWithoutShrinking(t *testing.T) {
	c := newTCluster(t, 3)
	q := openQ3(t, c)
	first := q.appendN(t, "n1", 10, "a")
	waitFor(t, "commit", 10*time.Second, func() bool { return q.hs["n3"].hw() == first })
	release := q.logs["n1"].StallSyncs()
	defer release()
	start := time.Now()
	last := q.appendN(t, "n1", 10, "b")
	waitFor(t, "resign reported", 5*time.Second, func() bool { return len(q.hs["n1"].resigned()) > 0 })
	if r := q.hs["n1"].resigned(); !errors.Is(r[0], ErrLeaderStalled) {
		t.Fatalf("resign reason %v", r[0])
	}
	if took := time.Since(start); took < 400*time.Millisecond {
		t.Fatalf("resign reported after %v, before the lag timeout", took)
	}
	if st := q.rs["n1"].Status(); !errors.Is(st.Blocked, ErrLeaderStalled) {
		t.Fatalf("status of the stalled leader: blocked %v", st.Blocked)
	}
	isrStays(t, c, 3, time.Until(start.Add(800*time.Millisecond)))
	release()
	waitFor(t, "commit after the stall", 10*time.Second, func() bool { return q.hs["n1"].hw() == last })
	waitFor(t, "stall cleared", 5*time.Second, func() bool { return q.rs["n1"].Status().Blocked == nil })
	isrStays(t, c, 3, 600*time.Millisecond) // the lag timeout and more: no shrink for the stall's lag
	if n := len(q.hs["n1"].resigned()); n != 1 {
		t.Fatalf("ShouldResign called %d times for one stall", n)
	}
	q.checkOK(t)
}

// The leader's disk fills (ENOSPC): it stops taking appends and reports
// that it should resign, but keeps its mirrors in sync; the controller
// elects a mirror, which commits what was committed and takes new appends.
func TestReplicaClusterLeaderDiskFullResigns(t *testing.T) {
	c := newTCluster(t, 3)
	q := openQ3(t, c)
	first := q.appendN(t, "n1", 10, "a")
	waitFor(t, "commit", 10*time.Second, func() bool { return q.hs["n3"].hw() == first })
	q.logs["n1"].FailAppends(fmt.Errorf("write segment: %w", syscall.ENOSPC))
	q.appendN(t, "n1", 1, "b") // accepted, then refused by the log
	waitFor(t, "resign reported", 5*time.Second, func() bool { return len(q.hs["n1"].resigned()) > 0 })
	r := q.hs["n1"].resigned()[0]
	if !errors.Is(r, ErrDiskFull) || !errors.Is(r, syscall.ENOSPC) {
		t.Fatalf("resign reason %v", r)
	}
	if _, err := q.rs["n1"].Append([]byte("c")); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("append on a full leader: %v", err)
	}
	if st := q.rs["n1"].Status(); !errors.Is(st.Blocked, ErrDiskFull) || !st.Leader {
		t.Fatalf("status of the full leader: %+v", st)
	}
	q.hs["n1"].mu.Lock()
	failed := q.hs["n1"].failed
	q.hs["n1"].mu.Unlock()
	if failed != nil {
		t.Fatalf("disk full failed the replica: %v", failed)
	}
	isrStays(t, c, 3, 500*time.Millisecond)
	logs := map[string]Log{}
	for n, l := range q.logs {
		logs[n] = l
	}
	np := c.ctl.elect("q", func(string) bool { return true }, logs)
	if np.Leader == "n1" {
		t.Fatalf("elected the full leader: %+v", np)
	}
	waitFor(t, "new leader leads", 5*time.Second, func() bool {
		st := q.rs[np.Leader].Status()
		return st.Leader && st.Epoch == np.Epoch
	})
	last := q.appendN(t, np.Leader, 10, "d")
	waitFor(t, "new leader commits", 10*time.Second, func() bool { return q.hs[np.Leader].hw() == last })
	if bad := sameLog(t, q.logs["n2"], q.logs["n3"], last); bad != 0 {
		t.Fatalf("mirrors differ at %d", bad)
	}
	q.checkOK(t)
}
