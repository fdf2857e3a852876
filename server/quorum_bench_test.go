package server

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// benchQuorumPublish publishes b.N persistent 1 KiB messages with
// confirms (window 256) to a quorum queue through ch.
func benchQuorumPublish(b *testing.B, ch *amqp091.Channel, queue string) {
	body := make([]byte, 1024)
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 512))
	must(b, ch.Confirm(false))
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	inFlight := 0
	for i := 0; i < b.N; i++ {
		must(b, ch.Publish("", queue, false, false, amqp091.Publishing{DeliveryMode: 2, Body: body}))
		inFlight++
		for inFlight >= 256 {
			if c := <-confirms; !c.Ack {
				b.Fatalf("nack %d", c.DeliveryTag)
			}
			inFlight--
		}
	}
	for ; inFlight > 0; inFlight-- {
		if c := <-confirms; !c.Ack {
			b.Fatalf("nack %d", c.DeliveryTag)
		}
	}
}

// BenchmarkQuorumPublishStandalone: one node, the log fsynced per group
// commit.
func BenchmarkQuorumPublishStandalone(b *testing.B) {
	ts := startServer(b)
	_, ch := ts.channel(b)
	declareQuorum(b, ch, "qq", nil)
	benchQuorumPublish(b, ch, "qq")
}

// BenchmarkQuorumPublish3 publishes on the leader of a three-replica
// queue of an in-process cluster: a confirm waits for every in-sync
// replica's fsync.
func BenchmarkQuorumPublish3(b *testing.B) {
	nodes := startTestCluster(b, 3, 3)
	_, ch := nodes[0].channel(b)
	declareQuorum(b, ch, "qq", nil)
	benchQuorumPublish(b, ch, "qq")
}
