package server

import (
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// quorumPlacementOn is node n's view of the queue's placement.
func quorumPlacementOn(n *clusterNode, name string) (leader string, epoch uint64, replicas []string) {
	q := n.Vhost("/").queue(name)
	h, ok := q.quorumHandle()
	if !ok {
		return "", 0, nil
	}
	p := h.placement()
	return p.Leader, p.Epoch, p.Replicas
}

// TestClusterQuorumQueueFailover: a quorum queue declared on one node of
// three has a replica on each, led by the declaring node. 2,000 persistent
// messages published with confirms on another node (forwarded to the
// leader) are all confirmed; the leader's node is then shut without any
// handoff, a mirror is elected, and every confirmed message is delivered
// from it, nothing that was not published, a duplicate only redelivered.
// Then a mirror restarts and catches up with what was published meanwhile.
func TestClusterQuorumQueueFailover(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	leader := nodes[0]
	_, lch := leader.channel(t)
	declareQuorum(t, lch, "qq", nil)
	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.name+" to know the queue", func() bool {
			l, _, rs := quorumPlacementOn(n, "qq")
			return l == leader.name && len(rs) == 3
		})
	}
	pub := nodes[1]
	_, pch := pub.channel(t)
	const n = 2000
	publishConfirmedBodies(t, pch, "qq", n, func(i int) string { return "m" + strconv.Itoa(i) })
	// A consumer on the third node holds 10 deliveries of the old leader.
	_, och := nodes[2].channel(t)
	must(t, och.Qos(10, 0, false))
	ods, err := och.Consume("qq", "old", false, false, false, false, nil)
	must(t, err)
	var held []amqp091.Delivery
	for range 10 {
		held = append(held, recv(t, ods))
	}

	// Abrupt for the queue: no leadership handoff exists, the node stops.
	must(t, leader.Close())
	survivors := nodes[1:]
	var newLeader *clusterNode
	waitFor(t, 30*time.Second, "a new quorum queue leader", func() bool {
		for _, s := range survivors {
			l, epoch, _ := quorumPlacementOn(s, "qq")
			if epoch < 2 {
				return false
			}
			for _, c := range survivors {
				if c.name == l {
					newLeader = c
				}
			}
		}
		return newLeader != nil
	})
	consumeNode := survivors[0]
	if consumeNode == newLeader {
		consumeNode = survivors[1] // consume through the forwarding too
	}
	conn := consumeNode.dial(t)
	var ds <-chan amqp091.Delivery
	waitFor(t, 15*time.Second, "a consumer on the new leader", func() bool {
		c, err := conn.Channel()
		if err != nil {
			return false
		}
		must(t, c.Qos(200, 0, false))
		d, err := c.Consume("qq", "", false, false, false, false, nil)
		if err != nil {
			return false
		}
		ds = d
		return true
	})
	// The old leader's deliveries acked now settle nothing on the new
	// leader: the first new deliveries, held, can still be requeued.
	var fresh []amqp091.Delivery
	for range 10 {
		fresh = append(fresh, recv(t, ds))
	}
	for _, d := range held {
		must(t, d.Ack(false))
	}
	must(t, och.Qos(10, 0, false)) // a round trip: the acks were handled
	nlq := newLeader.Vhost("/").queue("qq")
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if st := nlq.Info(); st.Unacked < 10 {
			t.Fatalf("acks of the old leader's deliveries settled %d of the new leader's", 10-st.Unacked)
		}
		time.Sleep(20 * time.Millisecond) // bounded: the acks must never land
	}
	for _, d := range fresh {
		must(t, d.Nack(false, true))
	}
	seen := make(map[string]bool)
	timeout := time.After(60 * time.Second)
	for len(seen) < n {
		select {
		case d, ok := <-ds:
			if !ok {
				t.Fatalf("consumer closed after %d of %d", len(seen), n)
			}
			body := string(d.Body)
			i, err := strconv.Atoi(body[1:])
			if body[0] != 'm' || err != nil || i < 0 || i >= n {
				t.Fatalf("delivered %q, never published", body)
			}
			if seen[body] && !d.Redelivered {
				t.Fatalf("duplicate %q without redelivered", body)
			}
			seen[body] = true
			must(t, d.Ack(false))
		case <-timeout:
			t.Fatalf("only %d of %d confirmed messages delivered after failover", len(seen), n)
		}
	}

	// A mirror restarts and catches up with what was published since.
	var mirror *clusterNode
	for _, s := range survivors {
		if s != newLeader {
			mirror = s
		}
	}
	mirror = mirror.restart(t)
	_, nch := newLeader.channel(t)
	publishConfirmedBodies(t, nch, "qq", 100, func(i int) string { return "after" + strconv.Itoa(i) })
	lh, _ := newLeader.Vhost("/").queue("qq").quorumHandle()
	want := lh.r.Status().LastOffset
	waitFor(t, 30*time.Second, "the restarted mirror to catch up", func() bool {
		h, ok := mirror.Vhost("/").queue("qq").quorumHandle()
		if !ok {
			return false
		}
		h.mu.Lock()
		l := h.log
		h.mu.Unlock()
		return l != nil && l.DurableOffset() >= want
	})

	// The old leader restarts: it does not serve what it held (acked
	// since on the new leader) but follows the cluster's placement.
	old := startClusterNode(t, leader.name, leader.dir, leader.cc)
	// At once, before it has the cluster's log: no stale message, only a
	// refusal (the leader is not known yet) or one from the new leader.
	_, sch := old.channel(t)
	if d, ok, err := sch.Get("qq", false); err == nil && ok && !strings.HasPrefix(string(d.Body), "after") {
		t.Fatalf("the restarted old leader served %q, settled on the new leader", d.Body)
	} else if err != nil && amqpCode(err) != 404 {
		t.Fatalf("get on the restarting old leader: %v", err)
	}
	waitFor(t, 30*time.Second, "the old leader to follow", func() bool {
		q := old.Vhost("/")
		if q == nil || q.queue("qq") == nil {
			return false
		}
		l, epoch, _ := quorumPlacementOn(old, "qq")
		return epoch >= 2 && l == newLeader.name
	})
	_, rch := old.channel(t)
	d, ok, err := rch.Get("qq", false)
	must(t, err)
	if !ok || string(d.Body) != "after0" {
		t.Fatalf("get on the restarted old leader: %q %v, want after0 from the new leader", d.Body, ok)
	}
}

// TestClusterQuorumQueuePlacement: a group size is capped at the cluster's
// size; the mirrors are the members holding the fewest replicas; a node
// holding no replica serves the queue by forwarding to its leader.
func TestClusterQuorumQueuePlacement(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	_, ch := nodes[0].channel(t)
	declareQuorum(t, ch, "big", amqp091.Table{"x-quorum-initial-group-size": int32(7)})
	declareQuorum(t, ch, "qa", amqp091.Table{"x-quorum-initial-group-size": int32(2)})
	declareQuorum(t, ch, "qb", amqp091.Table{"x-quorum-initial-group-size": int32(2)})
	var members [2][]string
	for i, name := range []string{"qa", "qb"} {
		waitFor(t, 10*time.Second, "placements everywhere", func() bool {
			for _, n := range nodes {
				if _, _, rs := quorumPlacementOn(n, name); len(rs) != 2 {
					return false
				}
			}
			return true
		})
		_, _, members[i] = quorumPlacementOn(nodes[0], name)
	}
	if _, _, rs := quorumPlacementOn(nodes[0], "big"); len(rs) != 3 {
		t.Fatalf("group size 7 on 3 nodes: replicas %v", rs)
	}
	if members[0][0] != nodes[0].name || members[1][0] != nodes[0].name || members[0][1] == members[1][1] {
		t.Fatalf("qa on %v, qb on %v: want both led by %s, mirrored on different nodes", members[0], members[1], nodes[0].name)
	}
	// The node without a replica of qb publishes and consumes through its leader.
	var outside *clusterNode
	for _, n := range nodes {
		if n.name != members[1][0] && n.name != members[1][1] {
			outside = n
		}
	}
	oconn, och := outside.channel(t)
	publishConfirmedBodies(t, och, "qb", 10, func(i int) string { return "b" + strconv.Itoa(i) })
	cch, err := oconn.Channel()
	must(t, err)
	ds, err := cch.Consume("qb", "", false, false, false, false, nil)
	must(t, err)
	for i := range 10 {
		d := recv(t, ds)
		if string(d.Body) != "b"+strconv.Itoa(i) {
			t.Fatalf("delivery %d through the leader: %q", i, d.Body)
		}
		must(t, d.Ack(false))
	}
	h, _ := outside.Vhost("/").queue("qb").quorumHandle()
	if h.r != nil || h.forward() == nil {
		t.Fatalf("%s holds no replica of qb but has one open, or no proxy", outside.name)
	}
}

// TestClusterQuorumLeaderLocator: three quorum queues declared on one
// node with x-queue-leader-locator balanced get a leader on each of the
// three nodes (the replica leading the fewest), each with three distinct
// replicas, and serve a publish and a get through the declaring node;
// client-local keeps the leader on the declaring node.
func TestClusterQuorumLeaderLocator(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	_, ch := nodes[0].channel(t)
	leaders := make(map[string]bool)
	for i := range 3 {
		name := "bal" + strconv.Itoa(i)
		declareQuorum(t, ch, name, amqp091.Table{"x-queue-leader-locator": "balanced"})
		waitFor(t, 10*time.Second, name+" placed", func() bool {
			l, _, rs := quorumPlacementOn(nodes[0], name)
			return l != "" && len(rs) == 3
		})
		l, _, rs := quorumPlacementOn(nodes[0], name)
		if rs[0] == rs[1] || rs[1] == rs[2] || rs[0] == rs[2] {
			t.Fatalf("%s: replicas %v, a node twice", name, rs)
		}
		leaders[l] = true
	}
	if len(leaders) != 3 {
		t.Fatalf("balanced leaders %v, want one on each node", leaders)
	}
	declareQuorum(t, ch, "local", amqp091.Table{"x-queue-leader-locator": "client-local"})
	if l, _, _ := quorumPlacementOn(nodes[0], "local"); l != nodes[0].name {
		t.Fatalf("client-local leader %s, want %s", l, nodes[0].name)
	}
	for i := range 3 {
		name := "bal" + strconv.Itoa(i)
		_, pch := nodes[0].channel(t) // a confirm listener per publish run
		publishConfirmedBodies(t, pch, name, 1, func(int) string { return name })
		waitFor(t, 10*time.Second, "a get of "+name, func() bool {
			d, ok, err := ch.Get(name, true)
			must(t, err)
			return ok && string(d.Body) == name
		})
	}
}
