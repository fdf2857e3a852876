package server

import (
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// homePending is the number of the home queue's deliveries not settled.
func homePending(ts *testServer, name string) int {
	q := ts.Vhost("/").queue(name)
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pending.len()
}

func recvDelivery(t *testing.T, ds <-chan amqp091.Delivery) amqp091.Delivery {
	t.Helper()
	select {
	case d, ok := <-ds:
		if !ok {
			t.Fatal("deliveries closed")
		}
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery within 5s")
	}
	panic("unreachable")
}

// TestRemoteTxCommitWaitsForHome: tx.commit-ok on a channel that acked
// deliveries of a queue homed on another node comes only once the home has
// stored the acks, as it does for local acks (TestTxCommitOkWaitsForTheCommitRound).
// warren-chaos -scope cluster found commit-ok sent 11 ms after the home's
// kill -9, and the 3 messages it covered came back with the home. With the
// home unreachable the commit now fails with 406 instead.
func TestRemoteTxCommitWaitsForHome(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b")
	a, b := nodes[0], nodes[1]
	declareHomed(t, a, nodes[1:], "q")
	_, pub := a.channel(t)
	for _, body := range []string{"m1", "m2"} {
		must(t, pub.Publish("", "q", false, false, amqp091.Publishing{Body: []byte(body), DeliveryMode: amqp091.Persistent}))
	}
	waitFor(t, 5*time.Second, "both messages on the home", func() bool { n, _ := homeCounts(a, "q"); return n == 2 })
	_, ch := b.channel(t)
	must(t, ch.Tx())
	must(t, ch.Qos(10, 0, false))
	ds, err := ch.Consume("q", "", false, false, false, false, nil)
	must(t, err)
	d1, d2 := recvDelivery(t, ds), recvDelivery(t, ds)

	must(t, d1.Ack(false))
	must(t, ch.TxCommit())
	if n := homePending(a, "q"); n != 1 {
		t.Fatalf("after tx.commit-ok the home holds %d unsettled deliveries, want 1 (the ack committed is not there)", n)
	}

	net.setDown("warren@a", true)
	must(t, d2.Ack(false))
	err = ch.TxCommit()
	expectCode(t, err, 406)
	net.setDown("warren@a", false)
	if n := homePending(a, "q"); n != 1 {
		t.Fatalf("the home holds %d unsettled deliveries, want 1: the ack whose commit failed never reached it", n)
	}
}

// TestRemoteOrphanDeliveryRequeued: a delivery the queue makes to a remote
// consumer in the instant between the sink forgetting it and the queue
// unsubscribing it (a cancel, or its node's loss) is pushed to a node that
// no longer has the consumer; the refusal returns it to the queue. Before,
// it stayed unacked on the home, held by no one, until the home restarted:
// warren-chaos -scope cluster counted such messages lost (confirmed,
// never delivered) after the node holding the consumers was killed.
func TestRemoteOrphanDeliveryRequeued(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b")
	a, b := nodes[0], nodes[1]
	declareHomed(t, a, nodes[1:], "q")
	_, sub := b.channel(t)
	must(t, sub.Qos(10, 0, false))
	_, err := sub.Consume("q", "ctag", false, false, false, false, nil)
	must(t, err)
	waitFor(t, 5*time.Second, "the consumer on the home", func() bool { _, n := homeCounts(a, "q"); return n == 1 })

	sink := a.remote.sinkFor("warren@b")
	sink.mu.Lock()
	var key uint64
	for k := range sink.consumers {
		key = k
	}
	sink.mu.Unlock()
	sc := sink.take(key) // the cancel's first step; the queue still delivers to it
	release := net.holdMethod(rpcDeliver)
	_, pub := a.channel(t)
	must(t, pub.Publish("", "q", false, false, amqp091.Publishing{Body: []byte("m"), DeliveryMode: amqp091.Persistent}))
	waitFor(t, 5*time.Second, "the delivery to the forgotten consumer", func() bool { return homePending(a, "q") == 1 })
	sc.q.h.cancel(sc.c) // the cancel's second step
	release()
	waitFor(t, 5*time.Second, "the refused delivery back in the queue", func() bool {
		ready, _ := homeCounts(a, "q")
		return ready == 1 && homePending(a, "q") == 0
	})
}

func (n *memNet) cutOneWay(from, to string, cut bool) {
	n.mu.Lock()
	n.cut[[2]string{from, to}] = cut
	n.mu.Unlock()
}

// TestRemoteSettleRetriedUntilHomeAnswers: an ack the consumer's node could
// not deliver to the home, which it cannot reach while the home reaches it
// (a one-way partition: neither declares the other down), is sent again
// once the home answers. Before, it was dropped, and the home held the
// delivery for good; warren-chaos -scope cluster (partition, oneway w2 to
// w3) counted such a message lost after the drain.
func TestRemoteSettleRetriedUntilHomeAnswers(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b")
	a, b := nodes[0], nodes[1]
	declareHomed(t, a, nodes[1:], "q")
	_, pub := a.channel(t)
	must(t, pub.Publish("", "q", false, false, amqp091.Publishing{Body: []byte("m"), DeliveryMode: amqp091.Persistent}))
	_, sub := b.channel(t)
	must(t, sub.Qos(10, 0, false))
	ds, err := sub.Consume("q", "", false, false, false, false, nil)
	must(t, err)
	d := recvDelivery(t, ds)
	var settles atomic.Int64
	net.mu.Lock()
	net.observe = func(method string, _ []byte) {
		if method == rpcSettle {
			settles.Add(1)
		}
	}
	net.mu.Unlock()
	net.cutOneWay("warren@b", "warren@a", true)
	must(t, d.Ack(false))
	waitFor(t, 5*time.Second, "a settlement sent into the cut", func() bool { return settles.Load() >= 1 })
	net.cutOneWay("warren@b", "warren@a", false)
	waitFor(t, 5*time.Second, "the ack on the home", func() bool {
		ready, _ := homeCounts(a, "q")
		return ready == 0 && homePending(a, "q") == 0
	})
}

func (n *memNet) loseAnswers(home, caller string, lost bool) {
	n.mu.Lock()
	n.lostAnswers[[2]string{home, caller}] = lost
	n.mu.Unlock()
}

// TestRemoteGetWithLostAnswerRequeued: a basic.get whose call the home ran
// but whose answer never reached the asking node (a one-way partition from
// the home to it; or the request arriving after the caller gave up) took a
// message the client never saw. The asking node answers its client 404 and
// tells the home the get was abandoned, so the home returns the message.
// Before, the home held it as that node's get until the node was declared
// down, which a one-way partition never does: warren-chaos -scope cluster
// (partition) counted the head of a queue lost, confirmed and never
// delivered, in every 2-minute run.
func TestRemoteGetWithLostAnswerRequeued(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b")
	a, b := nodes[0], nodes[1]
	declareHomed(t, a, nodes[1:], "q")
	_, pub := a.channel(t)
	must(t, pub.Publish("", "q", false, false, amqp091.Publishing{Body: []byte("m"), DeliveryMode: amqp091.Persistent}))
	waitFor(t, 5*time.Second, "the message on the home", func() bool { n, _ := homeCounts(a, "q"); return n == 1 })

	net.loseAnswers("warren@a", "warren@b", true)
	_, ch := b.channel(t)
	_, _, err := ch.Get("q", false)
	expectCode(t, err, 404)
	net.loseAnswers("warren@a", "warren@b", false)
	waitFor(t, 5*time.Second, "the message the lost get took back in the queue", func() bool {
		ready, _ := homeCounts(a, "q")
		return ready == 1 && homePending(a, "q") == 0
	})
	_, ch = b.channel(t)
	m, ok, err := ch.Get("q", true)
	must(t, err)
	if !ok || string(m.Body) != "m" || !m.Redelivered {
		t.Fatalf("got %q ok=%v redelivered=%v, want the message back, redelivered", m.Body, ok, m.Redelivered)
	}
}

// TestRemoteConsumersDroppedByHomeAreCancelled: a home that could not push
// to a node drops that node's consumers (and requeues what they held); once
// the node answers again the home tells it, and its clients get basic.cancel,
// as RabbitMQ cancels the consumers of a queue whose node went away. Before,
// the consumers stayed open on the node and got nothing, for good.
func TestRemoteConsumersDroppedByHomeAreCancelled(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b")
	a, b := nodes[0], nodes[1]
	declareHomed(t, a, nodes[1:], "q")
	_, sub := b.channel(t)
	must(t, sub.Qos(10, 0, false))
	cancels := sub.NotifyCancel(make(chan string, 1))
	_, err := sub.Consume("q", "ctag", false, false, false, false, nil)
	must(t, err)
	waitFor(t, 5*time.Second, "the consumer on the home", func() bool { _, n := homeCounts(a, "q"); return n == 1 })

	net.cutOneWay("warren@a", "warren@b", true) // the home's pushes fail
	_, pub := a.channel(t)
	must(t, pub.Publish("", "q", false, false, amqp091.Publishing{Body: []byte("m"), DeliveryMode: amqp091.Persistent}))
	waitFor(t, 5*time.Second, "the home dropping the consumer and requeueing", func() bool {
		ready, n := homeCounts(a, "q")
		return ready == 1 && n == 0
	})
	net.cutOneWay("warren@a", "warren@b", false)
	select {
	case tag := <-cancels:
		if tag != "ctag" {
			t.Fatalf("basic.cancel for %q, want ctag", tag)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no basic.cancel within 5s for the consumer its home dropped")
	}
}

// TestRemoteCancelRetriedUntilHomeAnswers: a basic.cancel whose call to
// the home failed (the node cannot reach it) is sent again on the
// settlement link, so the home does not keep a consumer no client has.
// Before, the home kept it for good (a ghost taking deliveries that its
// node refused, and counted in the queue's consumers).
func TestRemoteCancelRetriedUntilHomeAnswers(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b")
	a, b := nodes[0], nodes[1]
	declareHomed(t, a, nodes[1:], "q")
	_, sub := b.channel(t)
	_, err := sub.Consume("q", "ctag", false, false, false, false, nil)
	must(t, err)
	waitFor(t, 5*time.Second, "the consumer on the home", func() bool { _, n := homeCounts(a, "q"); return n == 1 })

	net.cutOneWay("warren@b", "warren@a", true)
	must(t, sub.Cancel("ctag", false))
	if _, n := homeCounts(a, "q"); n != 1 {
		t.Fatalf("the home has %d consumers while the cancel cannot reach it, want 1", n)
	}
	net.cutOneWay("warren@b", "warren@a", false)
	waitFor(t, 5*time.Second, "the cancel on the home", func() bool { _, n := homeCounts(a, "q"); return n == 0 })
}

// TestRemoteCancelledConsumersDeliveriesReturnWithItsNode: deliveries of
// a remote consumer that was cancelled stay with its node's channel; if that
// channel's requeue cannot reach the home (the node cut off, and the node
// drops the requeue once it declares the home down), the home returns them
// when it declares the node down, as it does for live consumers' deliveries.
// Before, the cancel forgot them on the home: warren-chaos -scope cluster
// (partition, majority-minority) counted one lost, confirmed and never
// delivered, whose consumer's session ended as its node was cut off.
func TestRemoteCancelledConsumersDeliveriesReturnWithItsNode(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b")
	a, b := nodes[0], nodes[1]
	declareHomed(t, a, nodes[1:], "q")
	_, pub := a.channel(t)
	must(t, pub.Publish("", "q", false, false, amqp091.Publishing{Body: []byte("m"), DeliveryMode: amqp091.Persistent}))
	_, sub := b.channel(t)
	ds, err := sub.Consume("q", "ctag", false, false, false, false, nil)
	must(t, err)
	recvDelivery(t, ds)
	must(t, sub.Cancel("ctag", false))
	waitFor(t, 5*time.Second, "the cancel on the home", func() bool { _, n := homeCounts(a, "q"); return n == 0 })

	net.cutOneWay("warren@b", "warren@a", true)
	must(t, sub.Close()) // its requeue cannot reach the home
	a.NodeDown("warren@b")
	waitFor(t, 5*time.Second, "the cancelled consumer's delivery back in the queue", func() bool {
		ready, _ := homeCounts(a, "q")
		return ready == 1 && homePending(a, "q") == 0
	})
}
