package server

import (
	"bytes"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestClusterForwardsBodiesAbove16MiB: a 20 MiB message published on node
// B to a queue homed on node A is confirmed (it was nacked: the cluster's
// rpc frames stopped at 16 MiB), is read back whole with basic.get on node
// C, and a second one is delivered whole to a consumer on C.
func TestClusterForwardsBodiesAbove16MiB(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	_, ach := a.channel(t)
	mustDeclareDurable(t, ach, "big")
	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.name+" to know big", func() bool { return n.Vhost("/").queue("big") != nil })
	}
	body := make([]byte, 20<<20)
	for i := range body {
		body[i] = byte(i * 7)
	}
	_, pub := b.channel(t)
	must(t, pub.Confirm(false))
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, 2))
	publishBig := func(tag byte) {
		t.Helper()
		body[0] = tag
		must(t, pub.Publish("", "big", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: body}))
		select {
		case conf := <-confirms:
			if !conf.Ack {
				t.Fatalf("the %d-byte publish forwarded to the home was nacked", len(body))
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no confirm for the large publish")
		}
	}
	publishBig(1)
	_, sub := c.channel(t)
	m, ok, err := sub.Get("big", true)
	must(t, err)
	if !ok || len(m.Body) != len(body) || m.Body[0] != 1 || !bytes.Equal(m.Body[1:], body[1:]) {
		t.Fatalf("basic.get on c: ok %v, %d bytes, want the %d published", ok, len(m.Body), len(body))
	}
	publishBig(2)
	ds, err := sub.Consume("big", "", true, false, false, false, nil)
	must(t, err)
	select {
	case d := <-ds:
		if len(d.Body) != len(body) || d.Body[0] != 2 || !bytes.Equal(d.Body[1:], body[1:]) {
			t.Fatalf("delivery on c: %d bytes, want the %d published", len(d.Body), len(body))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery of the large message on c")
	}
}
