package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// The cluster as separate broker processes (issue 14): the warren binary
// started three times on loopback ports with the cluster flags of the
// README, each on its own data directory, killed with SIGKILL and started
// again on its data.

// procNode is one warren process of the test and the ports it keeps
// across restarts.
type procNode struct {
	name, dir, log  string
	amqp, mgmt, clu string
	args            []string

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has been reaped
}

// freeLoopbackPort returns a port free on 127.0.0.1 for TCP and UDP (the
// cluster port carries gossip packets on UDP under the same number).
func freeLoopbackPort(t *testing.T, udp bool) string {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		if !udp {
			l.Close()
			return addr
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err == nil {
			u.Close()
			return addr
		}
	}
	t.Fatal("no free loopback port for TCP and UDP")
	return ""
}

// buildWarrenBinary builds cmd/warren once for the test.
func buildWarrenBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "warren")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func (n *procNode) start(t *testing.T, bin string) {
	t.Helper()
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	n.cmd = exec.Command(bin, n.args...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := n.cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	n.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		cmd.Wait() // the exit is the test's doing: SIGKILL or the cleanup's
		logf.Close()
		close(done)
	}(n.cmd, n.done)
}

// kill9 kills the process with SIGKILL and waits until it is reaped.
func (n *procNode) kill9(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	<-n.done
}

func (n *procNode) running() bool {
	select {
	case <-n.done:
		return false
	default:
		return n.cmd != nil
	}
}

// startProcCluster starts three cluster nodes with bootstrap-expect 3.
func startProcCluster(t *testing.T, bin string) []*procNode {
	t.Helper()
	nodes := make([]*procNode, 3)
	var seeds []string
	for i := range nodes {
		dir := t.TempDir()
		nodes[i] = &procNode{name: fmt.Sprintf("warren@p%d", i+1), dir: dir, log: filepath.Join(dir, "warren.log"),
			amqp: freeLoopbackPort(t, false), mgmt: freeLoopbackPort(t, false), clu: freeLoopbackPort(t, true)}
		seeds = append(seeds, nodes[i].clu)
	}
	for _, n := range nodes {
		n.args = []string{"--node-name", n.name, "--data-dir", filepath.Join(n.dir, "data"),
			"--amqp-listen", n.amqp, "--mgmt-listen", n.mgmt, "--metrics-listen", "",
			"--cluster-listen", n.clu, "--cluster-seeds", strings.Join(seeds, ","),
			"--cluster-bootstrap-expect", "3", "--cluster-secret", "process-test-secret-0123456789"}
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		for _, n := range nodes {
			if n.running() {
				n.cmd.Process.Kill()
				wg.Add(1)
				go func(n *procNode) { defer wg.Done(); <-n.done }(n)
			}
		}
		wg.Wait()
		if t.Failed() {
			for _, n := range nodes {
				if b, err := os.ReadFile(n.log); err == nil {
					t.Logf("%s log (last 3000 bytes):\n%s", n.name, tail(b, 3000))
				}
			}
		}
	})
	return nodes
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// pollUntil polls f every 200 ms until it returns nil or the deadline.
func pollUntil(t *testing.T, timeout time.Duration, what string, f func() error) time.Duration {
	t.Helper()
	start := time.Now()
	var err error
	for time.Since(start) < timeout {
		if err = f(); err == nil {
			return time.Since(start)
		}
		time.Sleep(200 * time.Millisecond) // poll until the deadline
	}
	t.Fatalf("%s: not within %v: %v", what, timeout, err)
	return 0
}

// onChannel runs f on a fresh connection to n.
func (n *procNode) onChannel(f func(*amqp091.Channel) error) error {
	c, err := amqp091.DialConfig("amqp://guest:guest@"+n.amqp+"/", amqp091.Config{Dial: amqp091.DefaultDial(3 * time.Second)})
	if err != nil {
		return err
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		return err
	}
	return f(ch)
}

func (n *procNode) declare(q string) error {
	return n.onChannel(func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclare(q, true, false, false, false, nil)
		return err
	})
}

// has reports whether n knows every queue (a passive declare, answered
// from n's own definitions).
func (n *procNode) has(qs ...string) error {
	return n.onChannel(func(ch *amqp091.Channel) error {
		for _, q := range qs {
			if _, err := ch.QueueDeclarePassive(q, true, false, false, false, nil); err != nil {
				return fmt.Errorf("%s: %s: %w", n.name, q, err)
			}
		}
		return nil
	})
}

// leader asks n's management API for the Raft leader's name.
func (n *procNode) leader() (string, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+n.mgmt+"/api/cluster", nil)
	if err != nil {
		return "", err
	}
	req.SetBasicAuth("guest", "guest")
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		Raft struct {
			Leader string `json:"leader"`
		} `json:"raft"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", err
	}
	if body.Raft.Leader == "" {
		return "", errors.New("no leader known")
	}
	return body.Raft.Leader, nil
}

// TestClusterSeparateProcesses: three warren processes form a cluster; a
// queue declared on one is seen on all; the Raft leader killed with
// SIGKILL, definitions change on the other two; restarted on its data, it
// catches up; two of three killed, the last refuses a change with 541 and
// Khepri's words; the two restarted, all three converge on one history.
func TestClusterSeparateProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three broker processes")
	}
	bin := buildWarrenBinary(t)
	nodes := startProcCluster(t, bin)
	for _, n := range nodes {
		n.start(t, bin)
	}
	byName := map[string]*procNode{}
	for _, n := range nodes {
		byName[n.name] = n
	}
	pollUntil(t, 60*time.Second, "the first declare on p1", func() error { return nodes[0].declare("pq-1") })
	for _, n := range nodes {
		pollUntil(t, 15*time.Second, "pq-1 on "+n.name, func() error { return n.has("pq-1") })
	}

	var leaderName string
	pollUntil(t, 15*time.Second, "a Raft leader", func() (err error) { leaderName, err = nodes[0].leader(); return err })
	leader := byName[leaderName]
	if leader == nil {
		t.Fatalf("leader %q is none of the nodes", leaderName)
	}
	var survivors []*procNode
	for _, n := range nodes {
		if n != leader {
			survivors = append(survivors, n)
		}
	}
	leader.kill9(t)
	took := pollUntil(t, 30*time.Second, "a declare on "+survivors[0].name+" after the leader's kill", func() error { return survivors[0].declare("pq-2") })
	t.Logf("definitions changed again %v after the leader %s was killed", took.Round(time.Millisecond), leaderName)
	if took > 15*time.Second {
		t.Errorf("definition changes came back %v after the leader's kill, want at most 15s", took)
	}
	pollUntil(t, 15*time.Second, "a declare on "+survivors[1].name, func() error { return survivors[1].declare("pq-3") })
	pollUntil(t, 15*time.Second, "pq-2 and pq-3 on "+survivors[0].name, func() error { return survivors[0].has("pq-2", "pq-3") })

	leader.start(t, bin)
	pollUntil(t, 60*time.Second, "the restarted "+leaderName+" catching up", func() error { return leader.has("pq-1", "pq-2", "pq-3") })

	last := survivors[1]
	for _, n := range nodes {
		if n != last {
			n.kill9(t)
		}
	}
	err := last.onChannel(func(ch *amqp091.Channel) error {
		return ch.ExchangeDeclare("x-minority", "fanout", true, false, false, false, nil)
	})
	want := "INTERNAL_ERROR - failed to declare exchange 'x-minority' in vhost '/' because the operation timed out (cluster metadata unavailable: no Raft majority within 10s)"
	var amqpErr *amqp091.Error
	if !errors.As(err, &amqpErr) || amqpErr.Code != 541 || amqpErr.Reason != want {
		t.Fatalf("a declare on the last node: %v, want 541 %q", err, want)
	}

	for _, n := range nodes {
		if n != last {
			n.start(t, bin)
		}
	}
	pollUntil(t, 60*time.Second, "a declare after the restarts", func() error { return nodes[0].declare("pq-4") })
	for _, n := range nodes {
		pollUntil(t, 30*time.Second, "every queue on "+n.name, func() error { return n.has("pq-1", "pq-2", "pq-3", "pq-4") })
	}
	// The refused declare's outcome is unknown to its client: the entry may
	// have reached the last node's log and commit once the others return
	// (Raft never loses a committed entry, and this one was not). Every
	// node must agree either way.
	waitAgreeOnExchange(t, nodes, "x-minority")
}

// waitAgreeOnExchange polls until every node reports the same about
// exchange name: all have it, or none.
func waitAgreeOnExchange(t *testing.T, nodes []*procNode, name string) {
	t.Helper()
	var amqpErr *amqp091.Error
	pollUntil(t, 30*time.Second, "every node agreeing on "+name, func() error {
		seen := map[bool][]string{}
		for _, n := range nodes {
			err := n.onChannel(func(ch *amqp091.Channel) error {
				return ch.ExchangeDeclarePassive(name, "fanout", true, false, false, false, nil)
			})
			if err != nil && !(errors.As(err, &amqpErr) && amqpErr.Code == 404) {
				return err
			}
			seen[err == nil] = append(seen[err == nil], n.name)
		}
		if len(seen) > 1 {
			return fmt.Errorf("%s exists on %v and not on %v", name, seen[true], seen[false])
		}
		return nil
	})
}
