package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/server"
)

// The runner is the same on every node for the same members, prefers an
// alive home, and when a node goes only the workers it ran move.
func TestRunnerPlacement(t *testing.T) {
	three := []string{"warren@a", "warren@b", "warren@c"}
	two := []string{"warren@a", "warren@c"}
	count := map[string]int{}
	for i := range 3000 {
		key := "shovel\x00/\x00s" + strconv.Itoa(i)
		r3 := runner(three, "", key)
		count[r3]++
		if r3 != runner(slices.Clone(three), "", key) {
			t.Fatalf("%q: not deterministic", key)
		}
		if r2 := runner(two, "", key); r3 != "warren@b" && r2 != r3 {
			t.Fatalf("%q moved from %s to %s though only warren@b left", key, r3, r2)
		}
	}
	for _, n := range three {
		if count[n] < 800 {
			t.Errorf("node %s runs %d of 3000 workers: %v", n, count[n], count)
		}
	}
	if got := runner(three, "warren@b", "k"); got != "warren@b" {
		t.Errorf("home alive: runner %s, want warren@b", got)
	}
	if got := runner(two, "warren@b", "k"); got != runner(two, "", "k") {
		t.Errorf("home down: runner %s, want the hash's %s", got, runner(two, "", "k"))
	}
}

// placementClusterConfig is a cluster configuration with the short timings
// of package server's in-process cluster tests.
func placementClusterConfig(expect int, seeds ...string) *cluster.Config {
	c := cluster.DefaultConfig()
	c.BindAddr = "127.0.0.1:0"
	c.Secret = "a placement test secret, longer than 16"
	c.ClusterName = "test"
	c.BootstrapExpect = expect
	c.Seeds = seeds
	c.HeartbeatTimeout, c.ElectionTimeout = 500*time.Millisecond, 500*time.Millisecond
	c.LeaderLeaseTimeout, c.CommitTimeout = 250*time.Millisecond, 10*time.Millisecond
	c.RPCTimeout, c.HandshakeTimeout = 2*time.Second, time.Second
	c.ReconnectInterval, c.PromoteAfter = 500*time.Millisecond, 500*time.Millisecond
	c.ReconcileInterval, c.ProposeTimeout = 100*time.Millisecond, 3*time.Second
	g := memberlist.DefaultLocalConfig()
	g.ProbeInterval, g.ProbeTimeout = 200*time.Millisecond, 100*time.Millisecond
	g.GossipInterval, g.SuspicionMult = 50*time.Millisecond, 2
	g.PushPullInterval, g.TCPTimeout = time.Second, time.Second
	c.Gossip = g
	c.Logger = fedTestLogger()
	if os.Getenv("WARREN_TEST_DEBUG") == "" {
		// Raft and gossip log every peer that stops as an error.
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 4}))
	}
	return c
}

// startPlacementCluster starts three cluster members, each with its
// shovel and federation runners as run wires them, and waits until all
// three see each other and the cluster's definitions.
func startPlacementCluster(t *testing.T) []*fedBroker {
	t.Helper()
	nodes := make([]*fedBroker, 3)
	for i := range nodes {
		var seeds []string
		if i > 0 {
			seeds = []string{nodes[0].cc.BindAddr}
		}
		b := &fedBroker{t: t, name: fmt.Sprintf("n%d", i+1), dataDir: t.TempDir(), cc: placementClusterConfig(3, seeds...)}
		b.start()
		t.Cleanup(b.stop)
		nodes[i] = b
	}
	for _, n := range nodes {
		fedWait(t, 30*time.Second, n.name+" to see the cluster", func() bool {
			return len(n.srv.AliveNodes()) == 3 && n.srv.Vhost("/") != nil
		})
	}
	return nodes
}

// shovelRunners is the nodes whose runner has shovel name.
func shovelRunners(nodes []*fedBroker, name string) []string {
	var out []string
	for _, n := range nodes {
		if n.srv == nil {
			continue
		}
		for _, s := range n.shovels.ShovelStatus() {
			if s["name"] == name {
				out = append(out, n.name)
			}
		}
	}
	return out
}

func putShovel(t *testing.T, srv *server.Server, name string, def map[string]any) {
	t.Helper()
	if _, err := srv.PutParameter(server.Parameter{Component: shovelComponent, Vhost: "/", Name: name, Value: def}, "guest"); err != nil {
		t.Fatalf("put shovel %s: %v", name, err)
	}
}

// publishIDs publishes persistent messages from..to-1 (message ids) to
// queue and waits for every confirm.
func publishIDs(t *testing.T, b *fedBroker, queue string, from, to int) {
	t.Helper()
	ch := b.channel()
	fedMust(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, to-from))
	for i := from; i < to; i++ {
		fedMust(t, ch.Publish("", queue, false, false, amqp091.Publishing{MessageId: strconv.Itoa(i), DeliveryMode: 2, Body: []byte("m")}))
	}
	for i := from; i < to; i++ {
		if c := <-confirms; !c.Ack {
			t.Fatalf("message %d nacked", c.DeliveryTag)
		}
	}
}

// drainIDs gets the queue's messages until want distinct ids arrived (or
// the deadline passes) and returns how often each id came.
func drainIDs(t *testing.T, b *fedBroker, queue string, want int, within time.Duration) map[string]int {
	t.Helper()
	ch := b.channel()
	seen := map[string]int{}
	fedWait(t, within, fmt.Sprintf("%d distinct messages in %s", want, queue), func() bool {
		for _, m := range getAll(t, ch, queue) {
			seen[m.MessageId]++
		}
		return len(seen) >= want
	})
	return seen
}

// In a three-node cluster a shovel between two other brokers runs on one
// node and moves each message once; the node running it stopped in the
// middle of a transfer, another takes it over and every confirmed message
// arrives (on-confirm). A shovel whose source is a local queue runs on
// that queue's home.
func TestClusterShovelRunsOnOneNode(t *testing.T) {
	src, dest := startFedBroker(t, "src"), startFedBroker(t, "dest")
	for _, b := range []*fedBroker{src, dest} {
		_, err := b.channel().QueueDeclare("q", true, false, false, false, nil)
		fedMust(t, err)
	}
	nodes := startPlacementCluster(t)
	putShovel(t, nodes[0].srv, "mover", map[string]any{"src-uri": src.url, "src-queue": "q", "dest-uri": dest.url,
		"dest-queue": "q", "ack-mode": "on-confirm", "src-prefetch-count": json1(50), "reconnect-delay": json1(1)})
	fedWait(t, 15*time.Second, "the shovel running", func() bool { return len(shovelRunners(nodes, "mover")) > 0 })
	publishIDs(t, src, "q", 0, 2000)
	seen := drainIDs(t, dest, "q", 2000, 30*time.Second)
	if r := shovelRunners(nodes, "mover"); len(r) != 1 {
		t.Fatalf("shovel runs on %v, want one node", r)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("message %s moved %d times, want once", id, n)
		}
	}

	// Stop the runner while a second batch is moving.
	first := shovelRunners(nodes, "mover")[0]
	publishIDs(t, src, "q", 2000, 6000)
	for _, n := range nodes {
		if n.name == first {
			n.stop()
		}
	}
	fedWait(t, 20*time.Second, "another node taking the shovel over", func() bool {
		r := shovelRunners(nodes, "mover")
		return len(r) == 1 && r[0] != first
	})
	seen = drainIDs(t, dest, "q", 4000, 60*time.Second)
	for i := 2000; i < 6000; i++ {
		if seen[strconv.Itoa(i)] == 0 {
			t.Fatalf("message %d lost after the runner %s stopped", i, first)
		}
	}

	// A shovel reading a local queue runs on the queue's home.
	var alive []*fedBroker
	for _, n := range nodes {
		if n.srv != nil {
			alive = append(alive, n)
		}
	}
	// Home it on the node the hash would not pick, so only the home rule
	// puts the shovel there.
	hashed := runner(alive[0].srv.AliveNodes(), "", "shovel\x00/\x00local")
	home := alive[0]
	if home.srv.NodeName() == hashed {
		home = alive[1]
	}
	_, err := home.channel().QueueDeclare("local", true, false, false, false, nil)
	fedMust(t, err)
	putShovel(t, alive[0].srv, "local", map[string]any{"src-uri": "amqp://", "src-queue": "local", "dest-uri": dest.url, "dest-queue": "q"})
	fedWait(t, 15*time.Second, "the local shovel on its queue's home "+home.name, func() bool {
		r := shovelRunners(nodes, "local")
		return len(r) == 1 && r[0] == home.name
	})
}

// json1 is n as the stored parameters hold numbers.
func json1(n int) any { return json.Number(strconv.Itoa(n)) }

// In a three-node cluster a federated exchange gets each upstream message
// once, not once per node, and a federated queue's link runs on its home.
func TestClusterFederationLinksRunOnOneNode(t *testing.T) {
	up := startFedBroker(t, "up")
	nodes := startPlacementCluster(t)
	fedMust(t, up.channel().ExchangeDeclare("fx", "direct", true, false, false, false, nil))
	down := nodes[1].channel()
	fedMust(t, down.ExchangeDeclare("fx", "direct", true, false, false, false, nil))
	_, err := down.QueueDeclare("fq", true, false, false, false, nil)
	fedMust(t, err)
	fedMust(t, down.QueueBind("fq", "k", "fx", false, nil))
	nodes[0].putUpstream("up", map[string]any{"uri": up.url})
	nodes[0].putPolicy("fed", "^f", "all", map[string]any{"federation-upstream-set": "all"})
	fedWait(t, 20*time.Second, "the exchange link running", func() bool {
		return len(fedRunners(nodes, "fx")) > 0
	})
	ch := up.channel()
	fedMust(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 500))
	for i := range 500 {
		fedMust(t, ch.Publish("fx", "k", false, false, amqp091.Publishing{MessageId: strconv.Itoa(i), DeliveryMode: 2}))
	}
	for range 500 {
		if c := <-confirms; !c.Ack {
			t.Fatal("nack upstream")
		}
	}
	seen := drainIDs(t, nodes[1], "fq", 500, 30*time.Second)
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("message %s arrived %d times, want once", id, n)
		}
	}
	if r := fedRunners(nodes, "fx"); len(r) != 1 {
		t.Fatalf("exchange link runs on %v, want one node", r)
	}
	// fq is federated too (pattern ^f, apply-to all): its link runs on
	// n2, where fq was declared.
	fedWait(t, 20*time.Second, "the queue link on n2", func() bool {
		r := fedQueueRunners(nodes, "fq")
		return len(r) == 1 && r[0] == "n2"
	})
}

// fedRunners is the nodes running a link for exchange name.
func fedRunners(nodes []*fedBroker, name string) []string {
	return linkRunners(nodes, func(l map[string]any) bool { return l["exchange"] == name && l["status"] == "running" })
}

func fedQueueRunners(nodes []*fedBroker, name string) []string {
	return linkRunners(nodes, func(l map[string]any) bool { return l["queue"] == name && l["status"] != "error" })
}

func linkRunners(nodes []*fedBroker, match func(map[string]any) bool) []string {
	var out []string
	for _, n := range nodes {
		if n.srv == nil {
			continue
		}
		if slices.ContainsFunc(n.fed.Links(), match) {
			out = append(out, n.name)
		}
	}
	return out
}

// A node left with no majority of the voters alive runs no shovel, so
// the two sides of a partition never both run one: with two of three
// nodes stopped, the one running the shovel stops it.
func TestClusterMinorityRunsNoShovel(t *testing.T) {
	src, dest := startFedBroker(t, "src"), startFedBroker(t, "dest")
	nodes := startPlacementCluster(t)
	putShovel(t, nodes[0].srv, "mover", map[string]any{"src-uri": src.url, "src-queue": "q", "dest-uri": dest.url, "dest-queue": "q"})
	fedWait(t, 15*time.Second, "the shovel running", func() bool { return len(shovelRunners(nodes, "mover")) == 1 })
	// Keep the runner and stop the other two: it must stop the shovel.
	var survivor *fedBroker
	for _, n := range nodes {
		if n.name == shovelRunners(nodes, "mover")[0] {
			survivor = n
		}
	}
	for _, n := range nodes {
		if n != survivor {
			n.stop()
		}
	}
	fedWait(t, 20*time.Second, survivor.name+", alone, running no shovel", func() bool { return len(shovelRunners(nodes, "mover")) == 0 })
}
