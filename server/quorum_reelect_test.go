package server

import (
	"slices"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster"
)

// TestClusterQuorumReelectedLeaderStartsEmpty: a leader's Committed can
// be enqueueing publishes it committed while the queue steps down (it runs
// on the replica's goroutine, the step-down on the metadata apply), so the
// deposed node's in-memory queue keeps them. Elected again later, it must
// rebuild from its log alone: the message, acknowledged meanwhile through
// the other leader, must not come back. The hook holds Committed there
// until the step-down is done.
func TestClusterQuorumReelectedLeaderStartsEmpty(t *testing.T) {
	faults := cluster.NewFaults()
	nodes := startTestClusterWith(t, 3, 3, func(c *cluster.Config) { c.Faults = faults })
	first := nodes[0]
	_, lch := first.channel(t)
	declareQuorum(t, lch, "qq", nil)
	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.name+" to know the queue in sync everywhere", func() bool {
			h, ok := n.Vhost("/").queue("qq").quorumHandle()
			if !ok {
				return false
			}
			p := h.placement()
			return p.Leader == first.name && len(p.ISR) == 3 && p.Replicas[0] == first.name
		})
	}
	fh, _ := first.Vhost("/").queue("qq").quorumHandle()

	held := make(chan struct{})
	release := make(chan struct{})
	var heldOnce, releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	hook := func(node, queue string) {
		if node != first.name || queue != "qq" {
			return
		}
		heldOnce.Do(func() {
			close(held)
			<-release
		})
	}
	testHookQuorumCommitted.Store(&hook)
	defer testHookQuorumCommitted.Store(nil)
	must(t, lch.Publish("", "qq", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte("m")}))
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the publish was not committed within 10s")
	}

	// Deposed while its Committed holds the message.
	faults.Partition([]string{first.cc.BindAddr}, []string{nodes[1].cc.BindAddr, nodes[2].cc.BindAddr})
	var next *clusterNode
	waitFor(t, 30*time.Second, "the majority to elect another leader", func() bool {
		l, epoch, _ := quorumPlacementOn(nodes[1], "qq")
		for _, n := range nodes[1:] {
			if n.name == l && epoch >= 2 {
				next = n
			}
		}
		return next != nil
	})
	faults.Heal()
	waitFor(t, 30*time.Second, first.name+" to step down", func() bool { return fh.forward() != nil })
	unblock()

	// The message is the new leader's: consumed and acknowledged there,
	// the ack committed (tx.commit waits for the log).
	other := nodes[1]
	if other == next {
		other = nodes[2]
	}
	_, cch := other.channel(t)
	must(t, cch.Tx())
	ds, err := cch.Consume("qq", "c", false, false, false, false, nil)
	must(t, err)
	d := recv(t, ds)
	if string(d.Body) != "m" {
		t.Fatalf("got %q", d.Body)
	}
	must(t, d.Ack(false))
	must(t, cch.TxCommit())
	must(t, cch.Cancel("c", false))

	// first back in sync, then the leader's node goes: the preferred
	// replica (first) is elected again.
	nh, _ := next.Vhost("/").queue("qq").quorumHandle()
	waitFor(t, 30*time.Second, first.name+" in sync again", func() bool {
		return slices.Contains(nh.placement().ISR, first.name)
	})
	must(t, next.Close())
	waitFor(t, 30*time.Second, first.name+" to lead again", func() bool { return fh.leading() })
	if n, _ := fh.counts(); n != 0 {
		t.Fatalf("the re-elected leader holds %d ready messages; the only one was acknowledged", n)
	}
	_, rch := first.channel(t)
	rds, err := rch.Consume("qq", "", true, false, false, false, nil)
	must(t, err)
	expectNone(t, rds, rch, rch)
}
