package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func memberState(n *testNode, name string) (Member, bool) {
	for _, m := range n.Members() {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

func raftServers(n *testNode) []string {
	st := n.Status()
	return append(append([]string{}, st.Voters...), st.NonVoters...)
}

// A fourth node joins through a seed as a non-voter (3 voters suit four
// nodes); Forget refuses it while alive; it leaves gracefully and is gone
// from the configuration and shown as left.
func TestJoinAsNonVoterAndLeave(t *testing.T) {
	nodes := startCluster(t, 3, 3, nil)
	checkFormed(t, nodes, 3, 15*time.Second)
	cfg := testConfig(t, "n4", nil)
	cfg.Seeds = []string{nodes[1].Addr()}
	n4 := startNode(t, cfg)
	eventually(t, 10*time.Second, func() string {
		st := nodes[0].Status()
		if len(st.NonVoters) != 1 || st.NonVoters[0] != "n4" || len(st.Voters) != 3 {
			return fmt.Sprintf("voters %v non-voters %v", st.Voters, st.NonVoters)
		}
		return ""
	})
	propose(t, n4, "from-n4")
	waitSameData(t, append(nodes, n4), []string{"from-n4"}, 10*time.Second)
	waitEvent(t, nodes[0], EventJoin, "n4", StateAlive)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := nodes[0].Forget(ctx, "n4"); !errors.Is(err, ErrMemberAlive) {
		t.Fatalf("Forget of a live node: %v, want ErrMemberAlive", err)
	}
	if err := n4.Leave(ctx); err != nil {
		t.Fatalf("leave: %v", err)
	}
	eventually(t, 10*time.Second, func() string {
		if s := raftServers(nodes[0]); len(s) != 3 || contains(s, "n4") {
			return fmt.Sprintf("raft servers %v after n4 left", s)
		}
		if m, _ := memberState(nodes[0], "n4"); m.State != StateLeft {
			return fmt.Sprintf("n4 is %v, want left", m.State)
		}
		return ""
	})
	waitEvent(t, nodes[0], EventLeave, "n4", StateLeft)
	propose(t, nodes[2], "after-leave")
}

// waitEvent reads n's membership events until one of kind about name in
// state arrives.
func waitEvent(t *testing.T, n *testNode, kind EventKind, name string, state MemberState) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-n.Events():
			if ev.Kind == kind && ev.Member.Name == name && ev.Member.State == state {
				return
			}
		case <-timeout:
			t.Fatalf("%s: no event %v for %s in state %v", n.Name(), kind, name, state)
		}
	}
}

// The leader leaving hands leadership over first; the rest go on.
func TestLeaderLeaves(t *testing.T) {
	nodes := startCluster(t, 3, 3, nil)
	checkFormed(t, nodes, 3, 15*time.Second)
	leader := waitLeader(t, nodes, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := leader.Leave(ctx); err != nil {
		t.Fatalf("leader leave: %v", err)
	}
	var rest []*testNode
	for _, n := range nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	waitLeader(t, rest, 10*time.Second)
	if s := raftServers(rest[0]); len(s) != 2 || contains(s, leader.Name()) {
		t.Fatalf("raft servers %v after the leader left", s)
	}
	propose(t, rest[0], "after-leader-left")
}

// A dead node is forgotten; a wiped node reusing a member's name is refused
// until the old one is forgotten, then joins.
func TestForgetAndWipedNodeWithReusedName(t *testing.T) {
	nodes := startCluster(t, 3, 3, nil)
	checkFormed(t, nodes, 3, 15*time.Second)
	victim := nodes[2]
	if victim.IsLeader() {
		victim = nodes[1]
	}
	var rest []*testNode
	for _, n := range nodes {
		if n != victim {
			rest = append(rest, n)
		}
	}
	if err := victim.Shutdown(); err != nil {
		t.Fatal(err)
	}
	// Wipe its data and start it again under its name and port.
	if err := os.RemoveAll(victim.cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	wiped := startNode(t, victim.cfg)
	if wiped.ID() == victim.ID() {
		t.Fatal("a wiped node kept its storage id")
	}
	eventually(t, 10*time.Second, func() string {
		if st := wiped.Status(); !strings.Contains(st.JoinError, ErrIdentityConflict.Error()) {
			return fmt.Sprintf("join error %q, want identity conflict", st.JoinError)
		}
		return ""
	})
	if s := raftServers(rest[0]); len(s) != 3 || !contains(s, victim.Name()) {
		t.Fatalf("raft servers %v", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rest[0].Forget(ctx, victim.Name()); !errors.Is(err, ErrMemberAlive) {
		t.Fatalf("Forget while the wiped node runs: %v, want ErrMemberAlive", err)
	}
	if err := wiped.Shutdown(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, func() string {
		if m, _ := memberState(rest[0], victim.Name()); m.State != StateDead {
			return fmt.Sprintf("%s is %v, want dead", victim.Name(), m.State)
		}
		return ""
	})
	if err := rest[1].Forget(ctx, victim.Name()); err != nil {
		t.Fatalf("Forget a dead node: %v", err)
	}
	if err := rest[1].Forget(ctx, victim.Name()); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("Forget twice: %v, want ErrUnknownMember", err)
	}
	back := startNode(t, victim.cfg) // the wiped data, now allowed
	eventually(t, 10*time.Second, func() string {
		if s := raftServers(rest[0]); len(s) != 3 || !contains(s, victim.Name()) {
			return fmt.Sprintf("raft servers %v", s)
		}
		return ""
	})
	propose(t, back, "after-forget")
	waitSameData(t, append(rest, back), []string{"after-forget"}, 10*time.Second)
}

// A node with the wrong secret is refused at every connection: it never
// becomes a member, and the refusals are counted.
func TestWrongSecretCannotJoin(t *testing.T) {
	nodes := startCluster(t, 3, 3, nil)
	checkFormed(t, nodes, 3, 15*time.Second)
	cfg := testConfig(t, "intruder", nil)
	cfg.Secret = "another secret, long enough too"
	cfg.Seeds = []string{nodes[0].Addr()}
	intruder := startNode(t, cfg)
	eventually(t, 10*time.Second, func() string {
		if f := nodes[0].Status().AuthFailures; f == 0 {
			return "no authentication failure counted"
		}
		return ""
	})
	for _, n := range append(nodes, intruder) {
		if len(n.Members()) != 3 && n != intruder {
			t.Errorf("%s sees %d members", n.Name(), len(n.Members()))
		}
		if _, ok := memberState(n, "intruder"); ok && n != intruder {
			t.Errorf("%s lists the intruder", n.Name())
		}
	}
	if len(intruder.Members()) != 1 || len(raftServers(intruder)) != 0 {
		t.Fatalf("intruder sees members %v, raft %v", intruder.Members(), raftServers(intruder))
	}
}

// Alarm bits set on one node reach the others by gossip, and clear again.
func TestAlarmsAreGossiped(t *testing.T) {
	nodes := startCluster(t, 3, 3, nil)
	checkFormed(t, nodes, 3, 15*time.Second)
	alarmsSeen := func(want Alarms) func() string {
		return func() string {
			for _, n := range nodes {
				if m, _ := memberState(n, "n2"); m.Alarms != want {
					return fmt.Sprintf("%s sees n2 alarms %b, want %b", n.Name(), m.Alarms, want)
				}
			}
			return ""
		}
	}
	if err := nodes[1].SetAlarms(AlarmDisk | AlarmMemory); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, alarmsSeen(AlarmDisk|AlarmMemory))
	if err := nodes[1].SetAlarms(0); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, alarmsSeen(0))
}
