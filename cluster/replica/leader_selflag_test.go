package replica

import (
	"slices"
	"testing"
	"time"
)

// leaderWithLaggingMirrors is a leader of n1..n3 whose mirrors followed and
// were sent records they never acknowledged.
func leaderWithLaggingMirrors(t *testing.T, now time.Time) *Leader {
	t.Helper()
	tm := Timing{LagTimeout: 5 * time.Second, Heartbeat: 250 * time.Millisecond, RejoinAfter: time.Second, WindowRecords: 64, WindowBytes: 1 << 20}
	p := Placement{Replicas: []string{"n1", "n2", "n3"}, Leader: "n1", Epoch: 1, ISR: []string{"n1", "n2", "n3"}, MinISR: 2, Version: 1}
	l, err := NewLeader("n1", p, NewMemLog(), tm, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n2", "n3"} {
		l.OnFollow(Msg{Type: MsgFollow, From: n, To: "n1", Epoch: 1})
	}
	if _, err := l.Append([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if len(l.Pump(now)) == 0 {
		t.Fatal("nothing sent")
	}
	return l
}

// A leader whose own send backlog is older than the lag timeout shrinks no
// mirror for lag or for a lost connection (KIP-537); without that backlog
// the same lag shrinks.
func TestReplicaLeaderSelfLagShrinksNoMirror(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	later := now.Add(6 * time.Second)

	l := leaderWithLaggingMirrors(t, now)
	if pr := l.Tick(later); pr == nil || len(pr.ISR) != 1 {
		t.Fatalf("healthy leader, mirrors 6 s behind: proposal %+v, want a shrink to n1", pr)
	}

	l = leaderWithLaggingMirrors(t, now)
	l.SetSelfLag(6 * time.Second)
	if pr := l.Tick(later); pr != nil {
		t.Fatalf("stalled leader proposed %+v", pr)
	}
	l.OnDisconnect("n2", later)
	if pr := l.Tick(later.Add(6 * time.Second)); pr != nil {
		t.Fatalf("stalled leader proposed %+v after a disconnect", pr)
	}
	l.SetSelfLag(0)
	pr := l.Tick(later.Add(7 * time.Second))
	if pr == nil || slices.Contains(pr.ISR, "n2") {
		t.Fatalf("after the stall: proposal %+v, want n2 out", pr)
	}
}

// sendBacklog is this node's: it counts only while every peer of the queue
// has something unwritten, and is then the youngest of their ages.
func TestReplicaManagerSendBacklog(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Node = "n1"
	mi, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := mi.(*manager)
	defer func() {
		m.mu.Lock()
		clear(m.peers) // the fake connections below have no sockets to close
		m.mu.Unlock()
		mi.Shutdown()
	}()
	now := time.Now()
	pcs := map[string]*pconn{}
	for _, n := range []string{"n2", "n3"} {
		pcs[n] = &pconn{}
		m.peers[n] = &peer{m: m, node: n, cur: pcs[n]}
	}
	nodes := []string{"n1", "n2", "n3"}
	pcs["n2"].writingAt = now.Add(-9 * time.Second)
	if d := m.sendBacklog(nodes, now); d != 0 {
		t.Fatalf("one slow peer counted as this node's backlog: %v", d)
	}
	pcs["n3"].queuedAt = now.Add(-6 * time.Second)
	if d := m.sendBacklog(nodes, now); d != 6*time.Second {
		t.Fatalf("backlog %v, want 6s", d)
	}
	m.peers["n3"].cur = nil
	if d := m.sendBacklog(nodes, now); d != 0 {
		t.Fatalf("backlog %v with n3 disconnected", d)
	}
}
