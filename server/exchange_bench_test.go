package server

import (
	"strconv"
	"testing"

	"github.com/warrenmq/warren/amqp"
)

// BenchmarkPublishExchangeType drives the publish path as
// BenchmarkPublishRouteDeliver does, through a direct and an
// x-consistent-hash exchange that each send every message to one of three
// queues with a no-ack consumer, over 1,000 routing keys. The goal is
// x-consistent-hash within 10% of direct.
func BenchmarkPublishExchangeType(b *testing.B) {
	const nkeys = 1000
	for _, kind := range []string{kindDirect, kindConsistentHash} {
		b.Run(kind, func(b *testing.B) {
			ts := startServer(b)
			vh := ts.Vhost("/")
			c, ch := benchChannel(b, ts)
			if aerr := vh.declareExchange(&amqp.ExchangeDeclare{Exchange: "bx", Type: kind}); aerr != nil {
				b.Fatal(aerr)
			}
			var queues []*Queue
			for i := range 3 {
				q, aerr := vh.declareQueue(c, &amqp.QueueDeclare{Queue: "bq" + strconv.Itoa(i)})
				if aerr != nil {
					b.Fatal(aerr)
				}
				if aerr := q.h.consume(&consumer{tag: "c" + strconv.Itoa(i), sink: ch, q: q.h, noAck: true}, func() {}); aerr != nil {
					b.Fatal(aerr)
				}
				queues = append(queues, q)
			}
			bind := func(q *Queue, key string) {
				vh.mu.Lock()
				defer vh.mu.Unlock()
				vh.bindLocked(vh.exchanges["bx"], q, key, nil)
			}
			if kind == kindDirect {
				for k := range nkeys {
					bind(queues[k%3], "key-"+strconv.Itoa(k))
				}
			} else {
				for i, q := range queues {
					bind(q, strconv.Itoa(i+1))
				}
			}
			msgs := make([][]amqp.Frame, nkeys)
			for k := range msgs {
				msgs[k] = benchPublishFrames(b, "bx", "key-"+strconv.Itoa(k))
			}
			var spare []byte
			b.ReportAllocs()
			b.SetBytes(16)
			b.ResetTimer()
			for i := range b.N {
				for _, f := range msgs[i%nkeys] {
					if err := ch.handleFrame(f); err != nil {
						b.Fatal(err)
					}
				}
				if i%1024 == 0 {
					spare, _ = c.out.take(spare)
				}
			}
			b.StopTimer()
			var delivered uint64
			for _, q := range queues {
				delivered += q.Info().Delivered
			}
			if delivered != uint64(b.N) {
				b.Fatalf("delivered %d of %d", delivered, b.N)
			}
		})
	}
}
