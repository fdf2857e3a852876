package replica

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recHandler records Committed calls and checks they only grow.
type recHandler struct {
	mu      sync.Mutex
	hws     []uint64
	failed  error
	resigns []error // ShouldResign's reasons
	bad     string
}

func (h *recHandler) ShouldResign(reason error, last uint64) {
	h.mu.Lock()
	h.resigns = append(h.resigns, reason)
	h.mu.Unlock()
}

// resigned returns the reasons ShouldResign was given.
func (h *recHandler) resigned() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.resigns...)
}

func (h *recHandler) Committed(hw uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.hws); n > 0 && hw <= h.hws[n-1] {
		h.bad = fmt.Sprintf("Committed(%d) after Committed(%d)", hw, h.hws[n-1])
	}
	h.hws = append(h.hws, hw)
}

func (h *recHandler) Failed(err error) {
	h.mu.Lock()
	h.failed = err
	h.mu.Unlock()
}

func (h *recHandler) hw() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bad != "" {
		panic(h.bad)
	}
	if len(h.hws) == 0 {
		return 0
	}
	return h.hws[len(h.hws)-1]
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}

func single(node string) Placement {
	return Placement{Replicas: []string{node}, Leader: node, Epoch: 1, ISR: []string{node}, MinISR: 1, Version: 1}
}

func newSingleManager(t *testing.T, lease func() bool) Manager {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Node = "n1"
	cfg.Lease = lease
	cfg.Heartbeat = 5 * time.Millisecond
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown() })
	return m
}

func TestReplicaSingleCommitsDurableInOrder(t *testing.T) {
	m := newSingleManager(t, nil)
	log := NewMemLog()
	h := &recHandler{}
	r, err := m.Open("q", single("n1"), log, h)
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range 200 {
		last, err = r.Append([]byte(fmt.Sprintf("m%d", i)), []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
	}
	// Offset 1 is the epoch's KindEpochStart; 400 data records follow.
	if last != 401 {
		t.Fatalf("last offset %d, want 401", last)
	}
	waitFor(t, "commit of 401", 5*time.Second, func() bool { return h.hw() == last })
	// Everything committed survives a power cut.
	log.PowerCut()
	if got := log.LastOffset(); got != last {
		t.Fatalf("after power cut last offset %d, want %d", got, last)
	}
	var n int
	err = log.Read(1, 1<<20, func(rec Record) bool {
		n++
		if rec.Offset == 1 && rec.Kind != KindEpochStart {
			t.Errorf("offset 1 kind %d, want KindEpochStart", rec.Kind)
		}
		if rec.Offset == 2 && !bytes.Equal(rec.Data, []byte("m0")) {
			t.Errorf("offset 2 data %q", rec.Data)
		}
		return true
	})
	if err != nil || n != 401 {
		t.Fatalf("read %d records, err %v", n, err)
	}
	if st := r.Status(); !st.Leader || st.HW != last || st.DurableOffset != last {
		t.Fatalf("status %+v", st)
	}
}

func TestReplicaSingleNoCommitWithoutLeaseOrMinISR(t *testing.T) {
	var lease atomic.Bool
	m := newSingleManager(t, lease.Load)
	h := &recHandler{}
	log := NewMemLog()
	r, err := m.Open("q", single("n1"), log, h)
	if err != nil {
		t.Fatal(err)
	}
	last, err := r.Append([]byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "durable", 5*time.Second, func() bool { return r.Status().DurableOffset == last })
	// Durable but the lease is gone: a few heartbeats must not commit it.
	for range 5 {
		time.Sleep(5 * time.Millisecond) // lets heartbeat ticks pass; nothing to poll for
		if hw := h.hw(); hw != 0 {
			t.Fatalf("committed %d without a lease", hw)
		}
	}
	lease.Store(true)
	waitFor(t, "commit after lease", 5*time.Second, func() bool { return h.hw() == last })

	// A placement asking for 2 in-sync replicas stops commits.
	p := single("n1")
	p.MinISR, p.Version = 2, 2
	r.SetPlacement(p)
	last2, _ := r.Append([]byte("b"))
	waitFor(t, "durable b", 5*time.Second, func() bool { return r.Status().DurableOffset == last2 })
	time.Sleep(20 * time.Millisecond) // heartbeats pass; the absence of a commit is the point
	if hw := h.hw(); hw != last {
		t.Fatalf("committed %d with MinISR 2 over one replica", hw)
	}
	p.MinISR, p.Version = 1, 3
	r.SetPlacement(p)
	waitFor(t, "commit b", 5*time.Second, func() bool { return h.hw() == last2 })
}

func TestReplicaSingleReopenCommitsTailWithNewEpoch(t *testing.T) {
	m := newSingleManager(t, nil)
	log := NewMemLog()
	h := &recHandler{}
	r, err := m.Open("q", single("n1"), log, h)
	if err != nil {
		t.Fatal(err)
	}
	last, _ := r.Append([]byte("a"), []byte("b"))
	waitFor(t, "commit", 5*time.Second, func() bool { return h.hw() == last })
	r.Close()
	// Records written by a previous incarnation but never reported committed.
	if err := log.Append(Record{Offset: last + 1, Epoch: 1, Kind: KindData, Data: []byte("tail")}); err != nil {
		t.Fatal(err)
	}
	p := single("n1")
	p.Epoch, p.Version = 2, 2
	h2 := &recHandler{}
	r2, err := m.Open("q", p, log, h2)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "commit of the new epoch's start", 5*time.Second, func() bool { return h2.hw() == last+2 })
	if e := log.Epochs(); len(e) != 2 || e[1] != (EpochStart{Epoch: 2, Start: last + 2}) {
		t.Fatalf("epochs %v", e)
	}
	r2.Compact(last + 1)
	waitFor(t, "compaction", 5*time.Second, func() bool { return log.FirstOffset() == last+1 })
	if _, err := r2.Append(); err != nil {
		t.Fatal(err)
	}
}

func TestReplicaSingleLogFailureStopsAppends(t *testing.T) {
	m := newSingleManager(t, nil)
	log := NewMemLog()
	h := &recHandler{}
	r, err := m.Open("q", single("n1"), log, h)
	if err != nil {
		t.Fatal(err)
	}
	log.FailAppends(fmt.Errorf("disk full"))
	if _, err := r.Append([]byte("a")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "failure", 5*time.Second, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.failed != nil
	})
	if _, err := r.Append([]byte("b")); err == nil {
		t.Fatal("append after a log failure succeeded")
	}
	if hw := h.hw(); hw != 0 {
		t.Fatalf("committed %d after the log failed", hw)
	}
}

func TestReplicaManagerRejects(t *testing.T) {
	if _, err := NewManager(DefaultConfig()); err == nil {
		t.Fatal("config without Node accepted")
	}
	m := newSingleManager(t, nil)
	p := single("n1")
	p.Replicas = []string{"n1", "n2"}
	if _, err := m.Open("q", p, NewMemLog(), &recHandler{}); err == nil {
		t.Fatal("multi-replica placement accepted without a network")
	}
	if _, err := m.Open("q", single("n2"), NewMemLog(), &recHandler{}); err == nil {
		t.Fatal("placement without this node accepted")
	}
	if _, err := m.Open("q", single("n1"), NewMemLog(), &recHandler{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open("q", single("n1"), NewMemLog(), &recHandler{}); err == nil {
		t.Fatal("second open of one queue accepted")
	}
}

// A three-replica leader reopened in the epoch it already wrote in (a
// restart) refuses to lead it and says so in Status; a new epoch unblocks it.
func TestReplicaRestartedLeaderNeedsNewEpoch(t *testing.T) {
	c := newTCluster(t, 3)
	p := Placement{Replicas: []string{"n1", "n2", "n3"}, Leader: "n1", Epoch: 1, ISR: []string{"n1", "n2", "n3"}, MinISR: 2, Version: 1}
	c.ctl.placements["q"] = p
	log := NewMemLog()
	r := c.ctl.open("n1", "q", log, &recHandler{})
	r.Close()
	c.ctl.forget("n1", "q")
	r = c.ctl.open("n1", "q", log, &recHandler{})
	if _, err := r.Append([]byte("x")); err != ErrNotLeader {
		t.Fatalf("append on a restarted leader: %v", err)
	}
	if st := r.Status(); !errors.Is(st.Blocked, ErrRestartedLeader) {
		t.Fatalf("status %+v", st)
	}
	// Through the controller, which holds the current placement and
	// publishes it: the first replica may have had an ISR shrink committed
	// before it closed (seen under -race), and an election computed from a
	// stale placement would reuse that version, which replicas ignore.
	np := c.ctl.elect("q", func(n string) bool { return n == "n1" }, nil)
	if np.Leader != "n1" {
		t.Fatalf("re-election of the only live member: %+v", np)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, err := r.Append([]byte("y"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not leading the new epoch after 5s: append %v, status %+v", err, r.Status())
		}
	}
	if st := r.Status(); st.Blocked != nil || st.Epoch != np.Epoch {
		t.Fatalf("status %+v", st)
	}
}
