package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testSecret = "a test secret of more than sixteen characters"

// fileFSM is the test FSM: entries in memory and appended to a file that is
// fsynced per batch, so a restarted node really replays from disk. Data
// starting with "refuse:" is refused deterministically.
type fileFSM struct {
	path string

	mu       sync.Mutex
	entries  []Entry
	applied  uint64
	replays  int // entries handed in at or below applied: must stay 0
	restored int // Restore calls
}

func openFileFSM(t *testing.T, dir string) *fileFSM {
	t.Helper()
	f := &fileFSM{path: filepath.Join(dir, "fsm.log")}
	b, err := os.ReadFile(f.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := f.load(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fileFSM) load(r io.Reader) error {
	var entries []Entry
	var applied uint64
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		parts := strings.Fields(sc.Text())
		if len(parts) != 3 {
			return fmt.Errorf("bad fsm line %q", sc.Text())
		}
		idx, _ := strconv.ParseUint(parts[0], 10, 64)
		term, _ := strconv.ParseUint(parts[1], 10, 64)
		data, err := hex.DecodeString(strings.TrimPrefix(parts[2], "x"))
		if err != nil {
			return err
		}
		entries = append(entries, Entry{Index: idx, Term: term, Data: data})
		applied = idx
	}
	f.mu.Lock()
	f.entries, f.applied = entries, applied
	f.mu.Unlock()
	return sc.Err()
}

func line(e Entry) string {
	return fmt.Sprintf("%d %d x%s\n", e.Index, e.Term, hex.EncodeToString(e.Data))
}

func (f *fileFSM) ApplyBatch(entries []Entry) []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var buf strings.Builder
	results := make([]error, len(entries))
	for i, e := range entries {
		if e.Index <= f.applied {
			f.replays++
			continue
		}
		if rest, ok := strings.CutPrefix(string(e.Data), "refuse:"); ok {
			results[i] = fmt.Errorf("refused %s", rest)
		}
		buf.WriteString(line(e))
		f.entries = append(f.entries, Entry{Index: e.Index, Term: e.Term, Data: bytes.Clone(e.Data)})
		f.applied = e.Index
	}
	file, err := os.OpenFile(f.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err == nil {
		_, err = file.WriteString(buf.String())
		if err == nil {
			err = file.Sync()
		}
		file.Close()
	}
	if err != nil {
		panic(err) // a node that cannot apply must stop
	}
	return results
}

func (f *fileFSM) AppliedIndex() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

func (f *fileFSM) Snapshot(w io.Writer) error {
	f.mu.Lock()
	var buf strings.Builder
	for _, e := range f.entries {
		buf.WriteString(line(e))
	}
	f.mu.Unlock()
	_, err := io.WriteString(w, buf.String())
	return err
}

func (f *fileFSM) Restore(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if err := os.WriteFile(f.path+".tmp", b, 0o640); err != nil {
		return err
	}
	if err := os.Rename(f.path+".tmp", f.path); err != nil {
		return err
	}
	f.mu.Lock()
	f.restored++
	f.mu.Unlock()
	return f.load(bytes.NewReader(b))
}

// data returns the applied entries' data in order.
func (f *fileFSM) data() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.entries))
	for i, e := range f.entries {
		out[i] = string(e.Data)
	}
	return out
}

func (f *fileFSM) restores() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restored
}

func (f *fileFSM) replayed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.replays
}

// testNode is a node with its directory and FSM, restartable.
type testNode struct {
	*Node
	cfg *Config
	fsm *fileFSM
}

// testConfig is a config with short timings for in-process clusters on a
// loaded 2-core machine.
func testConfig(t *testing.T, name string, faults *Faults) *Config {
	cfg := DefaultConfig()
	cfg.NodeName = name
	cfg.DataDir = t.TempDir()
	cfg.BindAddr = "127.0.0.1:0"
	cfg.Secret = testSecret
	cfg.ClusterName = "test"
	cfg.HeartbeatTimeout = 500 * time.Millisecond
	cfg.ElectionTimeout = 500 * time.Millisecond
	cfg.LeaderLeaseTimeout = 250 * time.Millisecond
	cfg.CommitTimeout = 10 * time.Millisecond
	cfg.RPCTimeout = 2 * time.Second
	cfg.HandshakeTimeout = time.Second
	cfg.ReconnectInterval = 500 * time.Millisecond
	cfg.PromoteAfter = 500 * time.Millisecond
	cfg.ReconcileInterval = 100 * time.Millisecond
	cfg.ProposeTimeout = 5 * time.Second
	cfg.Faults = faults
	g := memberlist.DefaultLocalConfig()
	g.ProbeInterval = 200 * time.Millisecond
	g.ProbeTimeout = 100 * time.Millisecond
	g.GossipInterval = 50 * time.Millisecond
	g.SuspicionMult = 2
	g.PushPullInterval = time.Second
	g.TCPTimeout = time.Second
	cfg.Gossip = g
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: testLogLevel()}))
	return cfg
}

func testLogLevel() slog.Level {
	if os.Getenv("CLUSTER_TEST_LOG") != "" {
		return slog.LevelDebug
	}
	return slog.LevelError + 4 // silent: failures are reported by the tests
}

// startNode starts a node from cfg with a file FSM in its DataDir; the node
// is shut down at cleanup.
func startNode(t *testing.T, cfg *Config) *testNode {
	t.Helper()
	fsm := openFileFSM(t, cfg.DataDir)
	n, err := New(cfg, fsm)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.NodeName, err)
	}
	t.Cleanup(func() { n.Shutdown() })
	if cfg.BindAddr == "127.0.0.1:0" { // a restart keeps the port
		cfg.BindAddr = n.Addr()
	}
	return &testNode{Node: n, cfg: cfg, fsm: fsm}
}

// restart shuts the node down (without leaving) and starts it again on the
// same data and port.
func (tn *testNode) restart(t *testing.T) *testNode {
	t.Helper()
	if err := tn.Shutdown(); err != nil {
		t.Fatalf("shutdown %s: %v", tn.Name(), err)
	}
	return startNode(t, tn.cfg)
}

// startCluster starts size nodes that know each other's addresses as
// seeds, with BootstrapExpect expect.
func startCluster(t *testing.T, size, expect int, faults *Faults, change ...func(*Config)) []*testNode {
	t.Helper()
	cfgs := make([]*Config, size)
	for i := range cfgs {
		cfgs[i] = testConfig(t, fmt.Sprintf("n%d", i+1), faults)
		cfgs[i].BootstrapExpect = expect
		for _, c := range change {
			c(cfgs[i])
		}
	}
	nodes := make([]*testNode, size)
	for i, cfg := range cfgs {
		if i > 0 {
			cfg.Seeds = []string{nodes[0].Addr()}
		}
		nodes[i] = startNode(t, cfg)
	}
	nodes[0].cfg.Seeds = []string{nodes[1].Addr()}
	return nodes
}

// eventually polls cond every 20 ms until it returns "" or timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLeader waits until every node of nodes agrees on one leader among
// them and returns it.
func waitLeader(t *testing.T, nodes []*testNode, timeout time.Duration) *testNode {
	t.Helper()
	var leader *testNode
	eventually(t, timeout, func() string {
		leader = nil
		for _, n := range nodes {
			if n.IsLeader() {
				leader = n
			}
		}
		if leader == nil {
			return "no leader"
		}
		for _, n := range nodes {
			if name, _ := n.Leader(); name != leader.Name() {
				return fmt.Sprintf("%s sees leader %q, not %s", n.Name(), name, leader.Name())
			}
		}
		return ""
	})
	return leader
}

// waitSameData waits until every node's FSM holds want.
func waitSameData(t *testing.T, nodes []*testNode, want []string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, func() string {
		for _, n := range nodes {
			if got := n.fsm.data(); !equalStrings(got, want) {
				return fmt.Sprintf("%s has %q, want %q", n.Name(), got, want)
			}
		}
		return ""
	})
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func propose(t *testing.T, n *testNode, data string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	result, err := n.Propose(ctx, []byte(data))
	if err != nil || result != nil {
		t.Fatalf("propose %q on %s: result %v, err %v", data, n.Name(), result, err)
	}
}
