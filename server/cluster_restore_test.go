package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster"
)

// startTestClusterWith is startTestCluster with each node's cluster
// configuration changed by tweak.
func startTestClusterWith(t *testing.T, size, expect int, tweak func(*cluster.Config)) []*clusterNode {
	t.Helper()
	nodes := make([]*clusterNode, size)
	for i := range nodes {
		var seeds []string
		if i > 0 {
			seeds = []string{nodes[0].cc.BindAddr}
		}
		cc := clusterTestConfig(expect, seeds...)
		tweak(cc)
		nodes[i] = startClusterNode(t, fmt.Sprintf("warren@n%d", i+1), t.TempDir(), cc)
	}
	for _, n := range nodes {
		waitFor(t, 20*time.Second, n.name+" to have the cluster's definitions", func() bool {
			return hasUser(n.Server, "guest") && n.Vhost("/") != nil
		})
	}
	return nodes
}

// compactingLog makes Raft snapshot and compact its log after a few
// entries, so a node down for a few changes needs a snapshot.
func compactingLog(c *cluster.Config) {
	c.SnapshotThreshold, c.TrailingLogs, c.SnapshotInterval = 4, 2, 100*time.Millisecond
}

// TestClusterSnapshotInstalledIntoRunningNode: a node that was down while
// the others changed definitions and compacted their log past its applied
// index comes back and receives a Raft snapshot while running. Afterwards
// its definitions are the cluster's (a queue deleted meanwhile is gone
// from it, a redeclared exchange has its new type, users and
// policies follow), its queue that still exists kept its messages, a
// queue declared meanwhile on another node is served from it, and its
// meta.db holds the same (a plain restart changes nothing).
func TestClusterSnapshotInstalledIntoRunningNode(t *testing.T) {
	nodes := startTestClusterWith(t, 3, 3, compactingLog)
	down := nodes[2]
	if down.ClusterNode().IsLeader() {
		down = nodes[1]
	}
	var up []*clusterNode
	for _, n := range nodes {
		if n != down {
			up = append(up, n)
		}
	}
	_, ch := down.channel(t)
	mustDeclareDurable(t, ch, "kept")
	for i := range 3 {
		must(t, ch.Publish("", "kept", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(fmt.Sprint("kept", i))}))
	}
	// A queue homed on a node that is down cannot be deleted (404, as in
	// RabbitMQ), so the one deleted meanwhile is homed on another node.
	_, uch := up[0].channel(t)
	mustDeclareDurable(t, uch, "gone")
	waitFor(t, 10*time.Second, "gone on the node going down", func() bool { return down.Vhost("/").queue("gone") != nil })
	must(t, ch.ExchangeDeclare("changed", "direct", true, false, false, false, nil))
	must(t, ch.QueueBind("kept", "k", "changed", false, nil))
	must(t, down.users.put("leaving", HashPassword("x"), nil, false))
	_, err := down.PutPolicy(Policy{Vhost: "/", Name: "p1", Pattern: "^kept$", ApplyTo: "queues",
		Definition: map[string]any{"max-length": int64(10)}}, false)
	must(t, err)
	waitFor(t, 10*time.Second, "kept's messages stored", func() bool { return readyOf(down.Vhost("/").queue("kept")) == 3 })
	downIndex := down.ClusterNode().Status().AppliedIndex
	must(t, down.Close())

	_, err = uch.QueueDelete("gone", false, false, false)
	must(t, err)
	must(t, uch.ExchangeDelete("changed", false, false))
	must(t, uch.ExchangeDeclare("changed", "fanout", true, false, false, false, nil))
	must(t, uch.QueueBind("kept", "", "changed", false, nil))
	mustDeclareDurable(t, uch, "new-on-up")
	must(t, up[0].users.put("arrived", HashPassword("y"), nil, false))
	must(t, up[0].DeleteUser("leaving"))
	_, err = up[0].PutPolicy(Policy{Vhost: "/", Name: "p1", Pattern: "^kept$", ApplyTo: "queues",
		Definition: map[string]any{"max-length": int64(20)}}, false)
	must(t, err)
	for i := range 12 {
		must(t, uch.ExchangeDeclare(fmt.Sprint("filler-", i), "topic", true, false, false, false, nil))
	}
	waitFor(t, 10*time.Second, "the others to compact their logs past the stopped node", func() bool {
		for _, n := range up {
			if n.ClusterNode().Status().SnapshotIndex <= downIndex+uint64(n.cc.TrailingLogs)+1 {
				return false
			}
		}
		return true
	})

	back := startClusterNode(t, down.name, down.dir, down.cc)
	waitFor(t, 20*time.Second, "the returning node to install a snapshot and catch up", func() bool {
		return back.cluster.restores.Load() > 0 && back.AppliedIndex() >= up[0].AppliedIndex()
	})
	checkSameDefinitions(t, up[0], back)
	if back.Vhost("/").queue("gone") != nil {
		t.Fatal("the queue deleted while the node was down is still there")
	}
	if n := readyOf(back.Vhost("/").queue("kept")); n != 3 {
		t.Fatalf("kept has %d messages after the restore, want 3", n)
	}
	if got := back.Vhost("/").exchange("changed").kind; got != "fanout" {
		t.Fatalf("exchange changed is %s after the restore, want fanout", got)
	}
	// The restored binding routes, and the new queue on the other node is
	// served from the returning node once it sees that node again.
	waitFor(t, 10*time.Second, "the returning node to see the others", func() bool {
		ms := back.ClusterNode().Members()
		return len(ms) == 3 && !slices.ContainsFunc(ms, func(m cluster.Member) bool { return m.State != cluster.StateAlive })
	})
	_, bch := back.channel(t)
	must(t, bch.Publish("changed", "any", false, false, amqp091.Publishing{Body: []byte("routed")}))
	must(t, bch.Publish("", "new-on-up", false, false, amqp091.Publishing{Body: []byte("forwarded")}))
	waitFor(t, 10*time.Second, "kept to get the routed message", func() bool { return readyOf(back.Vhost("/").queue("kept")) == 4 })
	waitFor(t, 10*time.Second, "new-on-up to get the forwarded message", func() bool {
		m, ok, err := bch.Get("new-on-up", true)
		if err != nil {
			t.Fatalf("basic.get of new-on-up on the returning node: %v", err)
		}
		return ok && string(m.Body) == "forwarded"
	})

	again := back.restart(t)
	checkSameDefinitions(t, up[0], again)
	if n := readyOf(again.Vhost("/").queue("kept")); n != 4 {
		t.Fatalf("kept has %d messages after a restart, want 4", n)
	}
}

// checkSameDefinitions fails unless b's definitions are a's: the same
// export, and every queue with the same home.
func checkSameDefinitions(t *testing.T, a, b *clusterNode) {
	t.Helper()
	da, err := a.ExportDefinitions("")
	must(t, err)
	db, err := b.ExportDefinitions("")
	must(t, err)
	if ja, jb := mustJSON(t, da), mustJSON(t, db); ja != jb {
		t.Fatalf("definitions differ:\n%s: %s\n%s: %s", a.name, ja, b.name, jb)
	}
	for _, q := range a.Vhost("/").Queues() {
		qb := b.Vhost("/").queue(q.name)
		if qb == nil || qb.HomeNode(b.name) != q.HomeNode(a.name) {
			t.Fatalf("queue %s: home on %s %s, on %s %v", q.name, a.name, q.HomeNode(a.name), b.name, qb)
		}
	}
	if slices.ContainsFunc(db.Users, func(u UserDefinition) bool { return u.Name == "leaving" }) {
		t.Fatal("a deleted user is still there")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	return string(b)
}

// TestSnapshotRestoreDeletesLocalQueuesAndReadsHomes: restoring into a
// running node a snapshot whose definitions lack one of the node's own
// queues deletes that queue with its files; a queue whose record differs
// only in naming its home (a standalone node's record has none) keeps its
// messages; a queue the snapshot adds gets its files here; a plain restart
// afterwards loads the same definitions from meta.db.
func TestSnapshotRestoreDeletesLocalQueuesAndReadsHomes(t *testing.T) {
	const name = "warren@x"
	node := func(t *testing.T) *testServer { return startServer(t, func(c *Config) { c.NodeName = name }) }
	apply := func(ts *testServer, index uint64, cmds ...Command) {
		t.Helper()
		var raw [][]byte
		for _, c := range cmds {
			b, err := EncodeCommand(c)
			must(t, err)
			raw = append(raw, b)
		}
		res, err := ts.ApplyCommitted(index, raw)
		must(t, err)
		for _, e := range res {
			must(t, e)
		}
	}
	x := node(t)
	apply(x, 1, DeclareQueue{Vhost: "/", Name: "mine", Durable: true}, DeclareQueue{Vhost: "/", Name: "both", Durable: true})
	_, ch := x.channel(t)
	must(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 4))
	for _, q := range []string{"mine", "both"} {
		must(t, ch.Publish("", q, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(q)}))
		if c := <-confirms; !c.Ack {
			t.Fatalf("publish to %s nacked", q)
		}
	}
	mineDir := x.Vhost("/").storage.queueDir("mine")
	if _, err := os.Stat(mineDir); err != nil {
		t.Fatalf("mine's directory: %v", err)
	}

	// The snapshot: another meta.db of the same node name, further on.
	y := node(t)
	apply(y, 1, DeclareQueue{Vhost: "/", Name: "both", Durable: true, Node: name})
	apply(y, 2, DeclareQueue{Vhost: "/", Name: "extra", Durable: true})
	var snap bytes.Buffer
	must(t, y.writeSnapshot(&snap))
	must(t, x.restoreSnapshot(&snap))

	if x.AppliedIndex() != 2 {
		t.Fatalf("applied index %d after the restore, want 2", x.AppliedIndex())
	}
	vh := x.Vhost("/")
	if vh.queue("mine") != nil {
		t.Fatal("mine is still declared")
	}
	if _, err := os.Stat(mineDir); !os.IsNotExist(err) {
		t.Fatalf("mine's directory after the restore: %v, want it removed", err)
	}
	if q := vh.queue("both"); q == nil || readyOf(q) != 1 {
		t.Fatalf("both after the restore: declared %v, want it with its message", q != nil)
	}
	if q := vh.queue("extra"); q == nil || !q.homedHere() {
		t.Fatalf("extra after the restore: declared %v, want it homed here", q != nil)
	}
	must(t, x.Close())
	again := startServer(t, func(c *Config) { c.NodeName, c.DataDir = name, x.cfg.DataDir })
	var names []string
	for _, q := range again.Vhost("/").Queues() {
		names = append(names, q.name)
	}
	slices.Sort(names)
	if fmt.Sprint(names) != "[both extra]" || readyOf(again.Vhost("/").queue("both")) != 1 || again.AppliedIndex() != 2 {
		t.Fatalf("after a restart: queues %v, both has %d, applied index %d", names, readyOf(again.Vhost("/").queue("both")), again.AppliedIndex())
	}
}
