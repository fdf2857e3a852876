package server

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster"
)

// TestClusterQuorumDeposedLeaderNacksItsTail: a leader cut off from its
// mirrors appends publishes it cannot commit; the majority elects another
// leader, which commits other records at the same offsets. When the old
// leader learns of the election its replica follows the new leader, whose
// commits it then reports: those must never confirm the old leader's
// publishes still waiting at those offsets (they were truncated). The
// hook holds the old leader between its replica taking the placement and
// the queue stepping down until its replica has reported them committed.
func TestClusterQuorumDeposedLeaderNacksItsTail(t *testing.T) {
	saved := quorumConfirmTimeout
	quorumConfirmTimeout = 2 * time.Minute // the cut outlasts nothing
	t.Cleanup(func() { quorumConfirmTimeout = saved })
	faults := cluster.NewFaults()
	nodes := startTestClusterWith(t, 3, 3, func(c *cluster.Config) { c.Faults = faults })
	old := nodes[0]
	_, lch := old.channel(t)
	declareQuorum(t, lch, "qq", nil)
	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.name+" to know the queue in sync everywhere", func() bool {
			h, ok := n.Vhost("/").queue("qq").quorumHandle()
			if !ok {
				return false
			}
			p := h.placement()
			return p.Leader == old.name && len(p.ISR) == 3
		})
	}
	publishConfirmedBodies(t, lch, "qq", 5, func(i int) string { return "before-" + strconv.Itoa(i) })

	others := []string{nodes[1].cc.BindAddr, nodes[2].cc.BindAddr}
	faults.Partition([]string{old.cc.BindAddr}, others)
	// Published on the cut-off leader: appended, not committable.
	_, cch := old.channel(t)
	must(t, cch.Confirm(false))
	confirms := cch.NotifyPublish(make(chan amqp091.Confirmation, 64))
	const cut = 10
	for i := range cut {
		must(t, cch.Publish("", "qq", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent,
			Body: []byte("cut-" + strconv.Itoa(i))}))
	}
	oh, _ := old.Vhost("/").queue("qq").quorumHandle()
	waitFor(t, 5*time.Second, "the cut publishes appended on the old leader", func() bool {
		oh.mu.Lock()
		defer oh.mu.Unlock()
		return len(oh.pend) == cut
	})
	oh.mu.Lock()
	tail := oh.pend[len(oh.pend)-1].off
	oh.mu.Unlock()

	var elected *clusterNode
	waitFor(t, 30*time.Second, "the majority to elect another leader", func() bool {
		l, epoch, _ := quorumPlacementOn(nodes[1], "qq")
		for _, n := range nodes[1:] {
			if n.name == l && epoch >= 2 {
				elected = n
			}
		}
		return elected != nil
	})
	// The new leader commits records at and past the old tail's offsets.
	_, mch := nodes[2].channel(t)
	waitFor(t, 15*time.Second, "a publish confirmed by the new leader", func() bool {
		c, err := nodes[2].dial(t).Channel()
		if err != nil {
			return false
		}
		must(t, c.Confirm(false))
		cf := c.NotifyPublish(make(chan amqp091.Confirmation, 1))
		must(t, c.Publish("", "qq", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte("probe")}))
		return (<-cf).Ack
	})
	publishConfirmedBodies(t, mch, "qq", 2*cut, func(i int) string { return "new-" + strconv.Itoa(i) })

	var once sync.Once
	waited := make(chan struct{})
	hook := func(node, queue string) {
		if node != old.name || queue != "qq" {
			return
		}
		defer once.Do(func() { close(waited) })
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			oh.mu.Lock()
			c := oh.committed
			oh.mu.Unlock()
			if c >= tail {
				return
			}
			time.Sleep(5 * time.Millisecond) // bounded by the deadline
		}
	}
	testHookQuorumStepDown.Store(&hook)
	defer testHookQuorumStepDown.Store(nil)
	faults.Heal()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		t.Fatal("the old leader did not step down within 30s of the heal")
	}

	want := map[string]bool{"probe": true}
	for i := range 5 {
		want["before-"+strconv.Itoa(i)] = true
	}
	for i := range 2 * cut {
		want["new-"+strconv.Itoa(i)] = true
	}
	acked := 0
	for range cut {
		cf := nextConfirm(t, confirms)
		if cf.Ack {
			want["cut-"+strconv.Itoa(int(cf.DeliveryTag)-1)] = true
			acked++
		}
	}
	t.Logf("%d of %d publishes on the cut-off leader confirmed", acked, cut)
	// A confirm registered late (a fan-out publish whose other queue kept
	// it waiting) for an offset of the old tail is a nack as well, though
	// the replica reports the offset committed now.
	oh.mu.Lock()
	committed := oh.committed
	oh.mu.Unlock()
	if committed < tail {
		t.Fatalf("the old leader's replica reports %d committed, not the new leader's records up to %d", committed, tail)
	}
	late := newBatchAcks(1)
	oh.whenDurable(tail, late.t.expect(1, 1))
	late.t.flush()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ok, err := late.wait(ctx)
	must(t, err)
	if ok[0] {
		t.Fatalf("a late confirm of offset %d of the deposed leader's tail was an ack", tail)
	}

	conn := nodes[2].dial(t)
	var ds <-chan amqp091.Delivery
	waitFor(t, 15*time.Second, "a consumer", func() bool {
		c, err := conn.Channel()
		if err != nil {
			return false
		}
		d, err := c.Consume("qq", "", true, false, false, false, nil)
		if err != nil {
			return false
		}
		ds = d
		return true
	})
	got := map[string]bool{}
	timeout := time.After(15 * time.Second)
	for {
		missing := 0
		for b := range want {
			if !got[b] {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		select {
		case d := <-ds:
			got[string(d.Body)] = true
		case <-timeout:
			var lost []string
			for b := range want {
				if !got[b] {
					lost = append(lost, b)
				}
			}
			t.Fatalf("%d confirmed messages lost: %v", len(lost), lost)
		}
	}
}
