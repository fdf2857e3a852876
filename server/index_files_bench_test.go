package server

import (
	"fmt"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/msgstore"
)

// BenchmarkPublishManyDurableQueues publishes persistent messages with
// confirms round robin to 5,000 durable queues, with the index file cache
// capped at 256 files (each publish then usually reopens the queue's segment
// file) and uncapped, under the fsync and os flush policies. ns/op is per
// message. Setup declares the queues (slow: one meta.db commit each).
func BenchmarkPublishManyDurableQueues(b *testing.B) {
	const queues = 5000
	for _, policy := range []msgstore.FlushPolicy{msgstore.FlushFsync, msgstore.FlushOS} {
		for _, files := range []int{256, 1 << 20} {
			name := fmt.Sprintf("%s/files=%d", policy, files)
			b.Run(name, func(b *testing.B) {
				ts := startServer(b, func(c *Config) { c.Flush, c.MaxOpenIndexFiles = policy, files })
				_, ch := ts.channel(b)
				for i := range queues {
					_, err := ch.QueueDeclare(fmt.Sprint("many-", i), true, false, false, false, nil)
					must(b, err)
				}
				must(b, ch.Confirm(false))
				confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, publishWindow))
				// One message per queue first, so every queue has its segment
				// file and the timed part measures the steady state.
				publishRoundRobin(b, ch, confirms, queues, queues)
				before, _ := ts.IndexFileStats()
				b.ResetTimer()
				publishRoundRobin(b, ch, confirms, queues, b.N)
				b.StopTimer()
				after, _ := ts.IndexFileStats()
				b.ReportMetric(float64(after.Opens-before.Opens)/float64(b.N), "opens/msg")
			})
		}
	}
}

const publishWindow = 1000

// publishRoundRobin publishes n persistent messages to queues many-0... in
// turn, waiting for the confirms of every publishWindow messages.
func publishRoundRobin(b *testing.B, ch *amqp091.Channel, confirms chan amqp091.Confirmation, queues, n int) {
	msg := amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: make([]byte, 64)}
	outstanding := 0
	wait := func() {
		for ; outstanding > 0; outstanding-- {
			if c := <-confirms; !c.Ack {
				b.Fatal("publish nacked")
			}
		}
	}
	for i := range n {
		must(b, ch.Publish("", fmt.Sprint("many-", i%queues), false, false, msg))
		if outstanding++; outstanding == publishWindow {
			wait()
		}
	}
	wait()
}

// BenchmarkDeclareDurableQueues declares durable queues over AMQP, one per
// op (a meta.db commit and the queue's index directory and checkpoint).
func BenchmarkDeclareDurableQueues(b *testing.B) {
	ts := startServer(b)
	_, ch := ts.channel(b)
	b.ResetTimer()
	for i := range b.N {
		_, err := ch.QueueDeclare(fmt.Sprint("declared-", i), true, false, false, false, nil)
		must(b, err)
	}
}
