package server

import (
	"strconv"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestClusterQuorumFailoverMarksRedelivered: deliveries go out before
// their DELIVERED record is committed, so a leader that dies right after
// delivering leaves mirrors whose log shows nothing delivered. The
// elected mirror must still mark what it delivers again redelivered
// (warren-chaos crash seed 1: 9 duplicates without the flag). The hook
// keeps the old leader's DELIVERED records out of the log.
func TestClusterQuorumFailoverMarksRedelivered(t *testing.T) {
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
	_, pch := nodes[1].channel(t)
	const n = 20
	publishConfirmedBodies(t, pch, "qq", n, func(i int) string { return "m" + strconv.Itoa(i) })

	testHookQuorumDropDelivered.Store(true)
	defer testHookQuorumDropDelivered.Store(false)
	must(t, lch.Qos(n, 0, false))
	ods, err := lch.Consume("qq", "old", false, false, false, false, nil)
	must(t, err)
	for range n {
		if d := recv(t, ods); d.Redelivered {
			t.Fatalf("first delivery of %q redelivered", d.Body)
		}
	}
	must(t, leader.Close())
	testHookQuorumDropDelivered.Store(false)

	survivors := nodes[1:]
	waitFor(t, 30*time.Second, "a new quorum queue leader", func() bool {
		l, epoch, _ := quorumPlacementOn(survivors[0], "qq")
		return epoch >= 2 && l != leader.name
	})
	conn := survivors[0].dial(t)
	var ds <-chan amqp091.Delivery
	waitFor(t, 15*time.Second, "a consumer on the new leader", func() bool {
		c, err := conn.Channel()
		if err != nil {
			return false
		}
		d, err := c.Consume("qq", "", false, false, false, false, nil)
		if err != nil {
			return false
		}
		ds = d
		return true
	})
	for range n {
		d := recv(t, ds)
		if !d.Redelivered {
			t.Fatalf("%q delivered again after the failover without redelivered", d.Body)
		}
		must(t, d.Ack(false))
	}
}
