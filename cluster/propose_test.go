package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Every node may propose; Propose returns after the proposing node's own
// FSM has applied the entry (read-your-writes), every node applies the same
// sequence, and a deterministic refusal comes back as the result, not as a
// failure.
func TestProposeOnEveryNodeAppliesEverywhereInOrder(t *testing.T) {
	nodes := startCluster(t, 3, 3, nil)
	checkFormed(t, nodes, 3, 15*time.Second)
	var want []string
	for round := range 3 {
		for _, n := range nodes {
			data := fmt.Sprintf("%s-%d", n.Name(), round)
			propose(t, n, data)
			want = append(want, data)
			if got := n.fsm.data(); len(got) == 0 || got[len(got)-1] != data {
				t.Fatalf("%s: Propose returned before its FSM applied %q (has %q)", n.Name(), data, got)
			}
		}
	}
	follower := nodes[0]
	if follower.IsLeader() {
		follower = nodes[1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leader := waitLeader(t, nodes, 10*time.Second)
	for _, n := range []*testNode{follower, leader} {
		data := "refuse:" + n.Name()
		result, err := n.Propose(ctx, []byte(data))
		if err != nil || result == nil || result.Error() != "refused "+n.Name() {
			t.Fatalf("refused entry on %s: result %v, err %v", n.Name(), result, err)
		}
		want = append(want, data)
	}
	waitSameData(t, nodes, want, 10*time.Second)
}

// A leader killed without leaving: a survivor's Propose succeeds within
// the design's 10 s.
func TestProposeAfterLeaderKilled(t *testing.T) {
	nodes := startCluster(t, 3, 3, nil)
	checkFormed(t, nodes, 3, 15*time.Second)
	leader := waitLeader(t, nodes, 10*time.Second)
	propose(t, leader, "before")
	// Kill the leader while the survivors propose, so the first attempts
	// meet a leader that is going away and must follow the election.
	start := time.Now()
	killed := make(chan error, 1)
	go func() { killed <- leader.Shutdown() }()
	defer func() {
		if err := <-killed; err != nil {
			t.Errorf("shutdown of the leader: %v", err)
		}
	}()
	var survivors []*testNode
	for _, n := range nodes {
		if n != leader {
			survivors = append(survivors, n)
		}
	}
	// A proposal in flight when the leader dies has an unknown outcome
	// (ErrNoQuorum: it may or may not commit); a client retries. Within
	// 10 s of the kill one must succeed.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var committed string
	for attempt := 1; committed == ""; attempt++ {
		data := fmt.Sprintf("after-%d", attempt)
		result, err := survivors[attempt%2].Propose(ctx, []byte(data))
		switch {
		case err == nil && result == nil:
			committed = data
		case errors.Is(err, ErrNoQuorum) && ctx.Err() == nil:
			t.Logf("attempt %d: %v", attempt, err)
		default:
			t.Fatalf("propose after the leader died: result %v, err %v (after %v)", result, err, time.Since(start))
		}
	}
	t.Logf("proposal committed %v after the leader was killed", time.Since(start).Round(time.Millisecond))
	eventually(t, 10*time.Second, func() string {
		a, b := survivors[0].fsm.data(), survivors[1].fsm.data()
		if !equalStrings(a, b) || len(a) < 2 || a[0] != "before" || !contains(a, committed) {
			return fmt.Sprintf("survivors have %q and %q; want before, then %s", a, b, committed)
		}
		return ""
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A node down while entries are committed catches up when restarted on its
// data, and the replay of its log applies nothing twice.
func TestRestartedNodeCatchesUpWithoutReapplying(t *testing.T) {
	nodes := startCluster(t, 3, 3, nil)
	checkFormed(t, nodes, 3, 15*time.Second)
	want := []string{"a", "b", "c"}
	for _, d := range want {
		propose(t, nodes[0], d)
	}
	waitSameData(t, nodes, want, 10*time.Second)
	down := nodes[2]
	if down.IsLeader() {
		down = nodes[1]
	}
	if err := down.Shutdown(); err != nil {
		t.Fatal(err)
	}
	var up []*testNode
	for _, n := range nodes {
		if n != down {
			up = append(up, n)
		}
	}
	for i := range 20 {
		d := fmt.Sprintf("while-down-%d", i)
		propose(t, up[i%2], d)
		want = append(want, d)
	}
	back := down.restart(t)
	waitSameData(t, append(up, back), want, 15*time.Second)
	if r := back.fsm.replayed(); r != 0 {
		t.Fatalf("the restarted node's FSM was handed %d entries it had applied", r)
	}
	propose(t, back, "after-restart")
	waitSameData(t, append(up, back), append(want, "after-restart"), 10*time.Second)
}

// Five nodes split 2 | 3 with the leader on the small side: both minority
// nodes' proposals (the leader's own and a follower's forwarded one) fail
// with ErrNoQuorum within the caller's bound; the majority elects a leader
// and goes on; after healing every node has one history and gossip sees
// everyone alive again.
func TestMinorityPartitionRefusesAndHealsToOneHistory(t *testing.T) {
	faults := NewFaults()
	nodes := startCluster(t, 5, 5, faults)
	checkFormed(t, nodes, 5, 15*time.Second)
	old := waitLeader(t, nodes, 10*time.Second)
	propose(t, old, "before")
	minority := []*testNode{old}
	var majority []*testNode
	for _, n := range nodes {
		switch {
		case n == old:
		case len(minority) < 2:
			minority = append(minority, n)
		default:
			majority = append(majority, n)
		}
	}
	faults.Partition(addrs(minority), addrs(majority))

	refused := make(chan error, len(minority))
	for _, n := range minority {
		go func() {
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, err := n.Propose(ctx, []byte("minority-"+n.Name()))
			switch elapsed := time.Since(start); {
			case !errors.Is(err, ErrNoQuorum):
				refused <- fmt.Errorf("propose on minority %s: %v, want ErrNoQuorum", n.Name(), err)
			case elapsed > 4*time.Second:
				refused <- fmt.Errorf("minority propose on %s took %v, bound 3 s", n.Name(), elapsed)
			default:
				refused <- nil
			}
		}()
	}
	waitLeader(t, majority, 10*time.Second)
	for _, n := range majority {
		propose(t, n, "majority-"+n.Name())
	}
	for range minority {
		if err := <-refused; err != nil {
			t.Fatal(err)
		}
	}

	faults.Heal()
	waitLeader(t, nodes, 15*time.Second)
	// Gossip declared the cut-off nodes dead on both sides; the reconnect
	// loop brings them back.
	eventually(t, 15*time.Second, func() string {
		for _, n := range nodes {
			for _, m := range n.Members() {
				if m.State != StateAlive {
					return fmt.Sprintf("%s sees %s %v after the heal", n.Name(), m.Name, m.State)
				}
			}
		}
		return ""
	})
	want := majority[0].fsm.data()
	waitSameData(t, nodes, want, 15*time.Second)
	for _, d := range want {
		if strings.HasPrefix(d, "minority-") {
			t.Fatalf("a refused minority entry was applied: %q", want)
		}
	}
}

func addrs(nodes []*testNode) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Addr()
	}
	return out
}

// A node that was down while the log was compacted past its position
// catches up from a snapshot installed through the FSM's Restore.
func TestRestartedNodeCatchesUpFromSnapshot(t *testing.T) {
	nodes := startCluster(t, 3, 3, nil, func(c *Config) { c.TrailingLogs = 2 })
	checkFormed(t, nodes, 3, 15*time.Second)
	propose(t, nodes[0], "first")
	waitSameData(t, nodes, []string{"first"}, 10*time.Second)
	down := nodes[2]
	if down.IsLeader() {
		down = nodes[1]
	}
	if err := down.Shutdown(); err != nil {
		t.Fatal(err)
	}
	var up []*testNode
	for _, n := range nodes {
		if n != down {
			up = append(up, n)
		}
	}
	want := []string{"first"}
	for i := range 10 {
		d := fmt.Sprintf("compacted-%d", i)
		propose(t, up[0], d)
		want = append(want, d)
	}
	for _, n := range up {
		if err := n.raft.Snapshot().Error(); err != nil {
			t.Fatalf("snapshot on %s: %v", n.Name(), err)
		}
	}
	back := down.restart(t)
	waitSameData(t, append(up, back), want, 15*time.Second)
	if back.fsm.restores() == 0 {
		t.Fatal("the restarted node caught up without installing a snapshot; the test did not compact its log")
	}
}

// With a majority down, Propose fails with ErrNoQuorum within its bound; a
// Propose waiting when a majority returns follows the election and
// succeeds.
func TestProposeWaitsForAMajorityToReturn(t *testing.T) {
	nodes := startCluster(t, 3, 3, nil)
	checkFormed(t, nodes, 3, 15*time.Second)
	leader := waitLeader(t, nodes, 10*time.Second)
	var rest []*testNode
	for _, n := range nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	alone, down := rest[0], rest[1]
	for _, n := range []*testNode{leader, down} {
		if err := n.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := alone.Propose(ctx, []byte("alone")); !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("propose without a majority: %v, want ErrNoQuorum", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("refusal took %v with a 1 s bound", d)
	}

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		result, err := alone.Propose(ctx, []byte("when-back"))
		if result != nil {
			err = fmt.Errorf("result %v", result)
		}
		done <- err
	}()
	back := down.restart(t)
	if err := <-done; err != nil {
		t.Fatalf("propose waiting for a majority: %v", err)
	}
	waitSameData(t, []*testNode{alone, back}, []string{"when-back"}, 10*time.Second)
}
