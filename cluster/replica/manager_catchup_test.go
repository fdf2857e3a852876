package replica

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// A mirror's process restarts after a power cut: it follows again, is
// truncated to what it holds, catches up and rejoins the in-sync set.
func TestReplicaClusterMirrorRestartCatchesUp(t *testing.T) {
	c := newTCluster(t, 3)
	q := openQ3(t, c)
	first := q.appendN(t, "n1", 100, "a")
	waitFor(t, "commit", 10*time.Second, func() bool { return q.hs["n3"].hw() == first })
	c.mgr("n3").Shutdown()
	c.ctl.forget("n3", "q")
	q.logs["n3"].PowerCut()
	q.logs["n3"].Reopen()
	mid := q.appendN(t, "n1", 200, "b")
	waitFor(t, "commit without n3", 10*time.Second, func() bool { return q.hs["n1"].hw() == mid })
	c.start("n3")
	q.openOn(t, "n3")
	last := q.appendN(t, "n1", 50, "c")
	waitFor(t, "n3 back in sync", 10*time.Second, func() bool {
		return slices.Contains(c.ctl.placement("q").ISR, "n3") && q.hs["n3"].hw() >= last
	})
	if bad := sameLog(t, q.logs["n1"], q.logs["n3"], last); bad != 0 {
		t.Fatalf("restarted mirror differs from the leader at %d", bad)
	}
	q.checkOK(t)
}

// A mirror 50 MB behind catches up while appends go on, and the queue
// keeps committing throughout (catch-up does not block the live queue).
func TestReplicaClusterFarBehindMirrorCatchesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("50 MB catch-up")
	}
	c := newTCluster(t, 3)
	q := openQ3(t, c)
	c.cut("n1", "n3")
	c.cut("n2", "n3")
	body := make([]byte, 1024)
	const behind = 50 << 10 // records of 1 KiB: 50 MiB
	var last uint64
	for i := 0; i < behind; i += 100 {
		batch := make([][]byte, 100)
		for j := range batch {
			batch[j] = body
		}
		var err error
		if last, err = q.rs["n1"].Append(batch...); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "commit without n3", 30*time.Second, func() bool { return q.hs["n1"].hw() == last })
	if slices.Contains(c.ctl.placement("q").ISR, "n3") {
		t.Fatal("n3 still in sync while cut")
	}
	start := time.Now()
	c.heal("n1", "n3")
	c.heal("n2", "n3")
	// Live appends during the catch-up, bounded, each batch committed.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var liveErr error
	var liveCommits int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 2000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			off, err := q.rs["n1"].Append([]byte(fmt.Sprintf("live-%d", i)))
			if err != nil {
				liveErr = err
				return
			}
			deadline := time.Now().Add(5 * time.Second)
			for q.hs["n1"].hw() < off {
				if time.Now().After(deadline) {
					liveErr = fmt.Errorf("live append %d not committed within 5 s during catch-up", off)
					return
				}
				time.Sleep(time.Millisecond)
			}
			liveCommits++
		}
	}()
	waitFor(t, "n3 has the backlog", 60*time.Second, func() bool { return q.logs["n3"].DurableOffset() >= last })
	copied := time.Since(start)
	waitFor(t, "n3 caught up and in sync", 60*time.Second, func() bool {
		return slices.Contains(c.ctl.placement("q").ISR, "n3") && q.logs["n3"].DurableOffset() >= last
	})
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if liveErr != nil {
		t.Fatal(liveErr)
	}
	t.Logf("copied %d MiB in %v (%.0f MB/s), back in sync after %v, %d live commits meanwhile", behind>>10,
		copied.Round(time.Millisecond), float64(behind<<10)/copied.Seconds()/1e6, took.Round(time.Millisecond), liveCommits)
	if bad := sameLog(t, q.logs["n1"], q.logs["n3"], last); bad != 0 {
		t.Fatalf("caught-up mirror differs at %d", bad)
	}
	q.checkOK(t)
}
