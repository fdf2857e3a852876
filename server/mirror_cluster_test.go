package server

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

var (
	errNack      = errors.New("publish nacked")
	errNoConfirm = errors.New("no confirm within 10s")
)

// putHAPolicy sets policy "ha" on queues matching ^ha\. with def, on n.
func putHAPolicy(t *testing.T, n *clusterNode, def map[string]any) {
	t.Helper()
	if _, err := n.PutPolicy(Policy{Vhost: "/", Name: "ha", Pattern: `^ha\.`, ApplyTo: ApplyToQueues, Definition: def}, false); err != nil {
		t.Fatalf("policy %v: %v", def, err)
	}
}

// mirroredOn is node n's view of mirrored queue name: its placement, or
// ok false when n has no mirrored handle for it.
func mirroredOn(n *clusterNode, name string) (leader string, replicas, isr []string, ok bool) {
	vh := n.Vhost("/")
	if vh == nil {
		return "", nil, nil, false
	}
	h, isQ := vh.queue(name).quorumHandle()
	if !isQ || !h.mirrored {
		return "", nil, nil, false
	}
	p := h.placement()
	return p.Leader, p.Replicas, p.ISR, true
}

// waitMirrors waits until every node in nodes sees name with want
// replicas, all of them in sync.
func waitMirrors(t *testing.T, nodes []*clusterNode, name string, want int) {
	t.Helper()
	for _, n := range nodes {
		waitFor(t, 30*time.Second, n.name+" to see "+strconv.Itoa(want)+" in-sync replicas of "+name, func() bool {
			_, rs, isr, ok := mirroredOn(n, name)
			return ok && len(rs) == want && len(isr) == want
		})
	}
}

func nodeNamed(nodes []*clusterNode, name string) *clusterNode {
	for _, n := range nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// TestClusterMirroredQueueFailover: with a policy ha-mode exactly 2, a
// durable classic queue declared on one node of three is placed on two,
// led by the declaring node, and still reports itself classic. 1,000
// persistent messages published with confirms through the third node are
// all confirmed; the leader's node then shuts without handoff, the mirror
// is elected, and every confirmed message is delivered from it, nothing
// else, a duplicate only redelivered.
func TestClusterMirroredQueueFailover(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	leader := nodes[0]
	putHAPolicy(t, leader, map[string]any{"ha-mode": "exactly", "ha-params": int64(2), "ha-sync-mode": "automatic"})
	_, lch := leader.channel(t)
	mustDeclareDurable(t, lch, "ha.q")
	waitMirrors(t, nodes, "ha.q", 2)
	l, rs, _, _ := mirroredOn(leader, "ha.q")
	if l != leader.name || rs[0] != leader.name {
		t.Fatalf("placement %v led by %s, want led by the declaring node %s", rs, l, leader.name)
	}
	mirror := nodeNamed(nodes, rs[1])
	var outside *clusterNode
	for _, n := range nodes {
		if !slices.Contains(rs, n.name) {
			outside = n
		}
	}
	info := leader.Vhost("/").queue("ha.q").Info()
	if typ := leader.Vhost("/").queue("ha.q").h.typeName(); typ != "classic" || !info.Mirrored ||
		!slices.Equal(info.SyncedMirrors, []string{mirror.name}) {
		t.Fatalf("type %s, info mirrored %v synced %v: want a classic queue mirrored on %s", typ, info.Mirrored, info.SyncedMirrors, mirror.name)
	}
	if h, _ := outside.Vhost("/").queue("ha.q").quorumHandle(); h.r != nil || h.forward() == nil {
		t.Fatalf("%s holds no replica but has one open, or no proxy", outside.name)
	}
	// Exclusive and non-durable queues are never mirrored: one copy, on
	// the declaring node, as classic queues.
	if _, err := lch.QueueDeclare("ha.transient", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := lch.QueueDeclare("ha.exclusive", true, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ha.transient", "ha.exclusive"} {
		if _, _, _, ok := mirroredOn(leader, name); ok {
			t.Fatalf("%s is mirrored", name)
		}
	}

	_, pch := outside.channel(t)
	const n = 1000
	publishConfirmedBodies(t, pch, "ha.q", n, func(i int) string { return "m" + strconv.Itoa(i) })

	must(t, leader.Close()) // no leadership handoff exists: the node just stops
	waitFor(t, 30*time.Second, "the mirror to lead", func() bool {
		l, _, _, _ := mirroredOn(mirror, "ha.q")
		return l == mirror.name && mirror.Vhost("/").queue("ha.q").h.(*quorumQueue).leading()
	})
	conn := mirror.dial(t)
	ch, err := conn.Channel()
	must(t, err)
	must(t, ch.Qos(200, 0, false))
	ds, err := ch.Consume("ha.q", "", false, false, false, false, nil)
	must(t, err)
	seen := make(map[string]bool)
	deadline := time.After(60 * time.Second)
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
		case <-deadline:
			t.Fatalf("only %d of %d confirmed messages delivered after failover", len(seen), n)
		}
	}
}

// TestClusterMirroredQueuePolicyChange: a queue mirrored by exactly 2 gets
// a third replica when the policy becomes ha-mode all, while a publisher
// goes on: the new mirror catches up and joins the in-sync set. Removing
// the policy then drops both mirrors (their logs removed); the queue
// keeps every confirmed message on its leader.
func TestClusterMirroredQueuePolicyChange(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	leader := nodes[0]
	putHAPolicy(t, leader, map[string]any{"ha-mode": "exactly", "ha-params": int64(2)})
	_, lch := leader.channel(t)
	mustDeclareDurable(t, lch, "ha.p")
	waitMirrors(t, nodes, "ha.p", 2)
	_, pch := leader.channel(t)
	publishConfirmedBodies(t, pch, "ha.p", 500, func(i int) string { return "a" + strconv.Itoa(i) })

	// A publisher keeps going while the mirror is added.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var published int
	var pubErr error
	_, bch := leader.channel(t)
	wg.Add(1)
	go func() {
		defer wg.Done()
		ch := bch
		if pubErr = ch.Confirm(false); pubErr != nil {
			return
		}
		confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
		for i := 0; i < 20000; i++ { // bounded: the test stops it far sooner
			select {
			case <-stop:
				return
			default:
			}
			pubErr = ch.Publish("", "ha.p", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte("b" + strconv.Itoa(i))})
			if pubErr != nil {
				return
			}
			select {
			case cf := <-confirms:
				if !cf.Ack {
					pubErr = errNack
					return
				}
			case <-time.After(10 * time.Second):
				pubErr = errNoConfirm
				return
			}
			published++
		}
	}()

	putHAPolicy(t, leader, map[string]any{"ha-mode": "all"})
	waitMirrors(t, nodes, "ha.p", 3)
	close(stop)
	wg.Wait()
	if pubErr != nil {
		t.Fatalf("publisher during the change: %v after %d", pubErr, published)
	}
	if published == 0 {
		t.Fatal("nothing was published while the mirror was added")
	}
	lh, _ := leader.Vhost("/").queue("ha.p").quorumHandle()
	want := lh.r.Status().LastOffset
	for _, n := range nodes[1:] {
		waitFor(t, 30*time.Second, n.name+" to hold the whole log", func() bool {
			h, _ := n.Vhost("/").queue("ha.p").quorumHandle()
			h.mu.Lock()
			l := h.log
			h.mu.Unlock()
			return l != nil && l.DurableOffset() >= want
		})
	}
	if info := leader.Vhost("/").queue("ha.p").Info(); len(info.SyncedMirrors) != 2 {
		t.Fatalf("synchronised mirrors %v, want 2", info.SyncedMirrors)
	}

	must(t, leader.DeletePolicy("/", "ha", false))
	for _, n := range nodes {
		waitFor(t, 30*time.Second, n.name+" to see the mirrors dropped", func() bool {
			_, rs, _, ok := mirroredOn(n, "ha.p")
			return ok && len(rs) == 1 && rs[0] == leader.name
		})
	}
	for _, n := range nodes[1:] {
		h, _ := n.Vhost("/").queue("ha.p").quorumHandle()
		dir := n.Vhost("/").storage.quorumDir("ha.p")
		waitFor(t, 10*time.Second, n.name+" to drop its replica and its log", func() bool {
			h.mu.Lock()
			gone := h.r == nil && h.log == nil
			h.mu.Unlock()
			_, err := os.Stat(dir)
			return gone && os.IsNotExist(err)
		})
	}
	// Still served, with every confirmed message, by the leader alone.
	_, ch := leader.channel(t)
	total := 500 + published
	waitFor(t, 10*time.Second, "the queue to hold every confirmed message", func() bool {
		q, err := ch.QueueDeclarePassive("ha.p", true, false, false, false, nil)
		return err == nil && q.Messages == total
	})
	_, ach := nodes[1].channel(t)
	publishConfirmedBodies(t, ach, "ha.p", 10, func(i int) string { return "c" + strconv.Itoa(i) })

	// A restart keeps it a (single-copy) mirrored queue with its messages:
	// the kind comes from the stored placement, not from the policy.
	leader = leader.restart(t)
	_, rch := leader.channel(t)
	waitFor(t, 30*time.Second, "the restarted leader to serve every message", func() bool {
		q, err := rch.QueueDeclarePassive("ha.p", true, false, false, false, nil)
		if err != nil {
			_, rch = leader.channel(t)
			return false
		}
		return q.Messages == total+10
	})
	if _, _, _, ok := mirroredOn(leader, "ha.p"); !ok {
		t.Fatal("ha.p is no longer a mirrored queue after a restart")
	}
}
