package server

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestClusterQuorumForwardToUnreadyLeaderNotConfirmed: after a failover
// the other nodes forward publishes to the elected node as soon as they
// apply the election, which can be before that node serves the queue (it
// applies the election later, or is still replaying its log). A forwarded
// publish that finds the queue not served there must be nacked, not
// confirmed as if the queue had been deleted: warren-chaos crash seed 1
// lost 40 confirmed messages so, confirmed through w1 by w3 while w3 had
// not yet rebuilt chaos.q.w2. The hook holds the elected node before its
// rebuild; every publish confirmed meanwhile must be delivered afterwards.
func TestClusterQuorumForwardToUnreadyLeaderNotConfirmed(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	leader := nodes[0]
	_, lch := leader.channel(t)
	declareQuorum(t, lch, "qq", nil)
	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.name+" to know the queue in sync everywhere", func() bool {
			h, ok := n.Vhost("/").queue("qq").quorumHandle()
			if !ok {
				return false
			}
			p := h.placement()
			return p.Leader == leader.name && len(p.Replicas) == 3 && len(p.ISR) == 3
		})
	}
	_, pch := nodes[1].channel(t)
	const before = 10
	publishConfirmedBodies(t, pch, "qq", before, func(i int) string { return "before-" + strconv.Itoa(i) })

	held := make(chan string, 1)
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the nodes close: the elected one's apply waits here
	hook := func(node, queue string) {
		if queue != "qq" {
			return
		}
		select {
		case held <- node:
		default:
		}
		<-release
	}
	testHookQuorumBecomeLeader.Store(&hook)
	defer testHookQuorumBecomeLeader.Store(nil)

	must(t, leader.Close())
	var elected string
	select {
	case elected = <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no node became the queue's leader within 30s")
	}
	var ingress *clusterNode
	for _, n := range nodes[1:] {
		if n.name != elected {
			ingress = n
		}
	}
	waitFor(t, 10*time.Second, ingress.name+" to forward to "+elected, func() bool {
		l, epoch, _ := quorumPlacementOn(ingress, "qq")
		return l == elected && epoch >= 2
	})

	// Published through the ingress while the elected node does not serve
	// the queue yet.
	_, ich := ingress.channel(t)
	must(t, ich.Confirm(false))
	confirms := ich.NotifyPublish(make(chan amqp091.Confirmation, 64))
	const during = 20
	for i := range during {
		must(t, ich.Publish("", "qq", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent,
			Body: []byte("during-" + strconv.Itoa(i))}))
	}
	want := map[string]bool{}
	for i := range before {
		want["before-"+strconv.Itoa(i)] = true
	}
	acked := 0
	for range during {
		cf := nextConfirm(t, confirms)
		if cf.Ack {
			want["during-"+strconv.Itoa(int(cf.DeliveryTag)-1)] = true
			acked++
		}
	}
	t.Logf("%d of %d publishes in the window confirmed", acked, during)
	unblock()
	waitFor(t, 10*time.Second, elected+" to serve the queue", func() bool {
		for _, n := range nodes[1:] {
			if n.name == elected {
				h, _ := n.Vhost("/").queue("qq").quorumHandle()
				return h.leading()
			}
		}
		return false
	})
	// And publishes are confirmed again: the nacks were the window's. The
	// first ones may still be nacked while the elected replica finishes
	// starting its epoch ("replica: not the leader").
	_, ach := ingress.channel(t)
	must(t, ach.Confirm(false))
	aconfirms := ach.NotifyPublish(make(chan amqp091.Confirmation, 1))
	for k := 0; ; k++ {
		body := "after-" + strconv.Itoa(k)
		must(t, ach.Publish("", "qq", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(body)}))
		if nextConfirm(t, aconfirms).Ack {
			want[body] = true
			break
		}
		if k == 100 {
			t.Fatal("no publish confirmed after the elected node serves the queue")
		}
		time.Sleep(20 * time.Millisecond) // bounded by k
	}

	conn := ingress.dial(t)
	var ds <-chan amqp091.Delivery
	waitFor(t, 15*time.Second, "a consumer through "+ingress.name, func() bool {
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
	for len(got) < len(want) {
		select {
		case d, ok := <-ds:
			if !ok {
				t.Fatal("consumer closed")
			}
			got[string(d.Body)] = true
		case <-timeout:
			var lost []string
			for b := range want {
				if !got[b] {
					lost = append(lost, b)
				}
			}
			t.Fatalf("%d confirmed messages lost (%d of %d published in the window were confirmed): %v",
				len(lost), acked, during, lost)
		}
	}
	for b := range got {
		if !want[b] && !strings.HasPrefix(b, "during-") && !strings.HasPrefix(b, "after-") {
			t.Fatalf("unexpected message %q", b)
		}
	}
}
