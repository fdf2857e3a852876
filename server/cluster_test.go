package server

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster"
)

const clusterTestSecret = "a cluster test secret, longer than 16"

// clusterTestConfig is a cluster configuration with short timings for
// in-process clusters on a loaded 2-core machine (those of package
// cluster's own tests).
func clusterTestConfig(expect int, seeds ...string) *cluster.Config {
	c := cluster.DefaultConfig()
	c.BindAddr = "127.0.0.1:0"
	c.Secret = clusterTestSecret
	c.ClusterName = "test"
	c.BootstrapExpect = expect
	c.Seeds = seeds
	c.HeartbeatTimeout = 500 * time.Millisecond
	c.ElectionTimeout = 500 * time.Millisecond
	c.LeaderLeaseTimeout = 250 * time.Millisecond
	c.CommitTimeout = 10 * time.Millisecond
	c.RPCTimeout = 2 * time.Second
	c.HandshakeTimeout = time.Second
	c.ReconnectInterval = 500 * time.Millisecond
	c.PromoteAfter = 500 * time.Millisecond
	c.ReconcileInterval = 100 * time.Millisecond
	c.ProposeTimeout = 3 * time.Second
	g := memberlist.DefaultLocalConfig()
	g.ProbeInterval = 200 * time.Millisecond
	g.ProbeTimeout = 100 * time.Millisecond
	g.GossipInterval = 50 * time.Millisecond
	g.SuspicionMult = 2
	g.PushPullInterval = time.Second
	g.TCPTimeout = time.Second
	c.Gossip = g
	level := slog.LevelError + 4 // silent; WARREN_TEST_DEBUG shows it
	if os.Getenv("WARREN_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	return c
}

// clusterNode is one broker of an in-process cluster, with what a restart
// needs: its data directory and its cluster port.
type clusterNode struct {
	*testServer
	name, dir string
	cc        *cluster.Config
}

// startClusterNode starts a broker named name on dir with cluster config
// cc; cc.BindAddr is fixed to the port it got, so a restart keeps it.
func startClusterNode(t testing.TB, name, dir string, cc *cluster.Config) *clusterNode {
	t.Helper()
	ts := startServer(t, func(c *Config) {
		c.NodeName, c.DataDir, c.Cluster = name, dir, cc
		c.LoopbackUsers = nil
	})
	cc.BindAddr = ts.ClusterNode().Addr()
	return &clusterNode{testServer: ts, name: name, dir: dir, cc: cc}
}

// restart closes the broker and starts it again on its data and ports.
func (n *clusterNode) restart(t testing.TB) *clusterNode {
	t.Helper()
	must(t, n.Close())
	return startClusterNode(t, n.name, n.dir, n.cc)
}

// startTestCluster starts size brokers, all seeded with the first one's
// cluster address, bootstrapping with expect, and waits until every node
// has applied the seed entry (guest can log in everywhere).
func startTestCluster(t testing.TB, size, expect int) []*clusterNode {
	t.Helper()
	nodes := make([]*clusterNode, size)
	for i := range nodes {
		var seeds []string
		if i > 0 {
			seeds = []string{nodes[0].cc.BindAddr}
		}
		nodes[i] = startClusterNode(t, fmt.Sprintf("warren@n%d", i+1), t.TempDir(), clusterTestConfig(expect, seeds...))
	}
	for _, n := range nodes {
		waitFor(t, 20*time.Second, n.name+" to have the cluster's definitions", func() bool {
			return hasUser(n.Server, "guest") && n.Vhost("/") != nil
		})
	}
	return nodes
}

// TestClusterDefinitionsOnEveryNode: three brokers form a cluster with
// bootstrap-expect 3; an exchange, a queue and a binding declared over AMQP
// on a follower, a user and a policy set on it through the server's API,
// are in every node's definitions (the queue with its home node), survive
// a restart of another node, and the next command on the declaring
// connection sees them (the declare returned after this node applied it).
func TestClusterDefinitionsOnEveryNode(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	follower := nodes[0]
	for _, n := range nodes {
		if !n.ClusterNode().IsLeader() {
			follower = n
			break
		}
	}
	_, ch := follower.channel(t)
	must(t, ch.ExchangeDeclare("x1", "direct", true, false, false, false, nil))
	mustDeclareDurable(t, ch, "q1")
	must(t, ch.QueueBind("q1", "k", "x1", false, nil))
	// Read-your-writes on the same connection: a passive declare right after.
	if _, err := ch.QueueDeclarePassive("q1", true, false, false, false, nil); err != nil {
		t.Fatalf("passive declare after declare: %v", err)
	}
	must(t, follower.users.put("alice", HashPassword("secret"), []string{"management"}, false))
	_, err := follower.PutPolicy(Policy{Vhost: "/", Name: "p1", Pattern: "^q", ApplyTo: "queues",
		Definition: map[string]any{"max-length": int64(10)}}, false)
	must(t, err)

	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.name+" to apply the definitions", func() bool { return hasClusterDefs(n, follower.name) == nil })
	}
	// The bootstrapping node made the cluster's id, once: every node has it.
	id := nodes[0].InternalClusterID()
	for _, n := range nodes {
		if got := n.InternalClusterID(); got == "" || got != id {
			t.Fatalf("%s has internal cluster id %q, %s has %q: want one id for the cluster", n.name, got, nodes[0].name, id)
		}
	}
	c := nodes[2]
	if c == follower {
		c = nodes[1]
	}
	c = c.restart(t)
	if err := hasClusterDefs(c, follower.name); err != nil {
		t.Fatalf("after a restart of %s: %v", c.name, err)
	}
	waitFor(t, 10*time.Second, "the restarted node back in Raft", func() bool {
		st := c.ClusterNode().Status()
		return st.Leader != "" && st.AppliedIndex >= follower.ClusterNode().Status().AppliedIndex
	})
}

// hasClusterDefs checks n has the definitions TestClusterDefinitionsOnEveryNode made.
func hasClusterDefs(n *clusterNode, home string) error {
	d, err := n.ExportDefinitions("")
	if err != nil {
		return err
	}
	vh := n.Vhost("/")
	switch {
	case !slices.ContainsFunc(d.Exchanges, func(x ExchangeDefinition) bool { return x.Name == "x1" && x.Durable }):
		return errors.New("no exchange x1")
	case !slices.ContainsFunc(d.Queues, func(q QueueDefinition) bool { return q.Name == "q1" }):
		return errors.New("no queue q1")
	case vh.queue("q1").HomeNode(n.name) != home:
		return fmt.Errorf("q1's home is %s, want %s", vh.queue("q1").HomeNode(n.name), home)
	case !slices.ContainsFunc(d.Bindings, func(b BindingInfo) bool { return b.Source == "x1" && b.Destination == "q1" && b.RoutingKey == "k" }):
		return errors.New("no binding x1 -> q1")
	case !slices.ContainsFunc(d.Users, func(u UserDefinition) bool { return u.Name == "alice" }):
		return errors.New("no user alice")
	case !slices.ContainsFunc(d.Policies, func(p Policy) bool { return p.Name == "p1" }):
		return errors.New("no policy p1")
	}
	return nil
}

// TestClusterWithoutMajorityRefusesChanges: with two of three nodes
// stopped, a declare on the survivor fails within the propose timeout with
// 541 INTERNAL_ERROR and Khepri's wording, and nothing is declared.
func TestClusterWithoutMajorityRefusesChanges(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	survivor := nodes[1]
	must(t, nodes[0].Close())
	must(t, nodes[2].Close())
	conn, ch := survivor.channel(t)
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	start := time.Now()
	err := ch.ExchangeDeclare("x-minority", "fanout", true, false, false, false, nil)
	took := time.Since(start)
	expectCode(t, err, 541)
	want := "INTERNAL_ERROR - failed to declare exchange 'x-minority' in vhost '/' because the operation timed out"
	if e := waitClose(t, closed); e == nil || !strings.HasPrefix(e.Reason, want) {
		t.Fatalf("connection closed with %v, want a reason starting %q", e, want)
	}
	if bound := survivor.cc.ProposeTimeout + 2*time.Second; took > bound {
		t.Fatalf("the refusal took %v, more than %v", took, bound)
	}
	if survivor.Vhost("/").exchange("x-minority") != nil {
		t.Fatal("the exchange was declared without a majority")
	}
	if _, err := survivor.PutPolicy(Policy{Vhost: "/", Name: "p", Pattern: ".", ApplyTo: "queues", Definition: map[string]any{"max-length": int64(1)}}, false); !errors.Is(err, ErrClusterUnavailable) {
		t.Fatalf("PutPolicy without a majority: %v, want ErrClusterUnavailable", err)
	}
}

// TestClusterStandaloneUpgrade: a standalone node with a queue holding
// persistent messages, restarted with cluster-bootstrap-expect 1, becomes
// the first node with its definitions and messages; a fresh node joining
// it gets them from the log (the queue homed on the first node).
func TestClusterStandaloneUpgrade(t *testing.T) {
	dir := t.TempDir()
	solo := startServer(t, func(c *Config) { c.DataDir, c.NodeName = dir, "warren@solo" })
	_, ch := solo.channel(t)
	must(t, ch.ExchangeDeclare("orders", "topic", true, false, false, false, nil))
	mustDeclareDurable(t, ch, "kept")
	must(t, ch.QueueBind("kept", "#", "orders", false, nil))
	for i := range 3 {
		must(t, ch.Publish("orders", "a", false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte(fmt.Sprint(i))}))
	}
	waitFor(t, 5*time.Second, "3 messages in kept", func() bool { return readyOf(solo.Vhost("/").queue("kept")) == 3 })
	must(t, solo.users.put("bob", HashPassword("pw"), nil, false))
	soloID := solo.InternalClusterID()
	must(t, solo.Close())

	first := startClusterNode(t, "warren@solo", dir, clusterTestConfig(1))
	if q := first.Vhost("/").queue("kept"); q == nil || readyOf(q) != 3 {
		t.Fatalf("after the upgrade: queue %v", q)
	}
	joiner := startClusterNode(t, "warren@joiner", t.TempDir(), clusterTestConfig(0, first.cc.BindAddr))
	waitFor(t, 20*time.Second, "the joiner to have the first node's definitions", func() bool {
		vh := joiner.Vhost("/")
		return vh != nil && vh.queue("kept") != nil && hasUser(joiner.Server, "bob") && hasUser(joiner.Server, "guest") &&
			len(vh.Bindings()) > 0 && vh.exchange("orders") != nil
	})
	// The standalone node's id became the cluster's, not a new one.
	if a, b := first.InternalClusterID(), joiner.InternalClusterID(); soloID == "" || a != soloID || b != soloID {
		t.Fatalf("internal cluster id: standalone %q, first node %q, joiner %q: want the standalone's kept", soloID, a, b)
	}
	if home := joiner.Vhost("/").queue("kept").HomeNode(joiner.name); home != "warren@solo" {
		t.Fatalf("kept's home on the joiner is %s", home)
	}
	// The first node's queue still has its messages, the joiner has none of its own.
	if n := readyOf(first.Vhost("/").queue("kept")); n != 3 {
		t.Fatalf("kept has %d messages on its home after the join", n)
	}
	// The joiner serves the queue through its home: the passive declare
	// counts the home's messages, a publish on the joiner reaches the
	// home with its confirm, and basic.get on the joiner takes all four.
	_, jch := joiner.channel(t)
	if q, err := jch.QueueDeclarePassive("kept", true, false, false, false, nil); err != nil || q.Messages != 3 {
		t.Fatalf("passive declare on the joiner: %+v %v", q, err)
	}
	must(t, jch.Confirm(false))
	confirms := jch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	must(t, jch.Publish("orders", "b", false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte("3")}))
	if c := <-confirms; !c.Ack {
		t.Fatal("a publish on the joiner to the home's queue was nacked")
	}
	var got []string
	for range 4 {
		m, ok, err := jch.Get("kept", true)
		must(t, err)
		if !ok {
			t.Fatalf("basic.get on the joiner: empty after %v", got)
		}
		got = append(got, string(m.Body))
	}
	if fmt.Sprint(got) != "[0 1 2 3]" {
		t.Fatalf("the joiner got %v from the home's queue", got)
	}
	if n := readyOf(first.Vhost("/").queue("kept")); n != 0 {
		t.Fatalf("kept has %d messages on its home after the joiner took them", n)
	}
}

// TestClusterJoinerWithOwnDefinitionsRefused: a node with a queue of its
// own and no cluster state, started to join a cluster, is refused at start
// with a message naming the definition and the fix.
func TestClusterJoinerWithOwnDefinitionsRefused(t *testing.T) {
	dir := t.TempDir()
	solo := startServer(t, func(c *Config) { c.DataDir = dir })
	_, ch := solo.channel(t)
	mustDeclareDurable(t, ch, "mine")
	must(t, solo.Close())

	cfg := DefaultConfig()
	cfg.AMQPListen, cfg.DataDir, cfg.Cluster = "127.0.0.1:0", dir, clusterTestConfig(0, "127.0.0.1:1")
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 4}))
	s, err := New(cfg)
	if err == nil {
		s.Close()
		t.Fatal("a node with its own definitions was allowed to join")
	}
	if !errors.Is(err, ErrOwnDefinitions) || !strings.Contains(err.Error(), "queue 'mine' in vhost '/'") ||
		!strings.Contains(err.Error(), "rabbitmqctl reset") {
		t.Fatalf("refusal: %v", err)
	}
}

func hasUser(s *Server, name string) bool {
	return slices.ContainsFunc(s.userHashes(), func(u UserInfo) bool { return u.Name == name })
}

func readyOf(q *Queue) int {
	ready, _ := q.counts()
	return ready
}

func mustDeclareDurable(t testing.TB, ch *amqp091.Channel, name string) {
	t.Helper()
	if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
		t.Fatalf("declare %q: %v", name, err)
	}
}

// TestClusterQueuesOfADeadNodeAreDeleted: the exclusive and the transient
// queue of a node are on every node; when the node drops out of the
// cluster without closing its connections (its cluster node stops, as in
// a crash), the leader deletes them everywhere, and keeps its durable one.
func TestClusterQueuesOfADeadNodeAreDeleted(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	victim := nodes[0]
	for _, n := range nodes {
		if !n.ClusterNode().IsLeader() {
			victim = n
			break
		}
	}
	_, ch := victim.channel(t)
	if _, err := ch.QueueDeclare("excl", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("transient", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	mustDeclareDurable(t, ch, "durable")
	var others []*clusterNode
	for _, n := range nodes {
		if n != victim {
			others = append(others, n)
		}
	}
	for _, n := range others {
		waitFor(t, 10*time.Second, n.name+" to have the victim's queues", func() bool {
			vh := n.Vhost("/")
			return vh.queue("excl") != nil && vh.queue("transient") != nil && vh.queue("durable") != nil
		})
	}
	must(t, victim.ClusterNode().Shutdown())
	for _, n := range others {
		waitFor(t, 15*time.Second, n.name+" to drop the dead node's exclusive and transient queues", func() bool {
			vh := n.Vhost("/")
			return vh.queue("excl") == nil && vh.queue("transient") == nil
		})
		if n.Vhost("/").queue("durable") == nil {
			t.Fatalf("%s dropped the dead node's durable queue", n.name)
		}
	}
}

// TestClusterFiveNodes: five brokers with bootstrap-expect 5 form one
// group of five voters, and a queue and binding declared on the last one
// are on every node.
func TestClusterFiveNodes(t *testing.T) {
	nodes := startTestCluster(t, 5, 5)
	last := nodes[4]
	_, ch := last.channel(t)
	mustDeclareDurable(t, ch, "five")
	must(t, ch.QueueBind("five", "k5", "amq.direct", false, nil))
	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.name+" to have queue five and its binding", func() bool {
			vh := n.Vhost("/")
			q := vh.queue("five")
			return q != nil && q.HomeNode(n.name) == last.name &&
				slices.ContainsFunc(vh.Bindings(), func(b BindingInfo) bool { return b.Destination == "five" && b.RoutingKey == "k5" })
		})
	}
	if v := last.ClusterNode().Status().Voters; len(v) != 5 {
		t.Fatalf("voters %v, want 5", v)
	}
}
