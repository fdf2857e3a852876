package server

import (
	"runtime"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// BenchmarkDelayedPublish publishes persistent 16-byte messages with
// confirms (up to 1024 outstanding) over TCP into a durable x-delayed-message
// exchange with x-delay one hour, against the same into a durable direct
// exchange bound to a durable queue. It reports the Go heap each held
// message costs once all are confirmed (run with -benchtime=100000x for the
// 100k figure): a delayed one beyond the in-memory head costs nothing.
func BenchmarkDelayedPublish(b *testing.B) {
	for _, kind := range []string{"x-delayed-message", "direct"} {
		b.Run(kind, func(b *testing.B) {
			ts := startServer(b)
			_, ch := ts.channel(b)
			must(b, ch.ExchangeDeclare("bx", kind, true, false, false, false, amqp091.Table{"x-delayed-type": "direct"}))
			_, err := ch.QueueDeclare("bq", true, false, false, false, nil)
			must(b, err)
			must(b, ch.QueueBind("bq", "k", "bx", false, nil))
			must(b, ch.Confirm(false))
			confs := ch.NotifyPublish(make(chan amqp091.Confirmation, 2048))
			msg := amqp091.Publishing{Headers: amqp091.Table{"x-delay": int32(3600_000)}, Body: make([]byte, 16), DeliveryMode: 2}
			before := heapInUse()
			b.SetBytes(16)
			b.ResetTimer()
			outstanding := 0
			for range b.N {
				if outstanding == 1024 {
					if c := <-confs; !c.Ack {
						b.Fatal("nack")
					}
					outstanding--
				}
				must(b, ch.Publish("bx", "k", false, false, msg))
				outstanding++
			}
			for ; outstanding > 0; outstanding-- {
				if c := <-confs; !c.Ack {
					b.Fatal("nack")
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(heapInUse()-before)/float64(b.N), "heapB/msg")
			if kind != "direct" {
				if got := ts.Vhost("/").exchange("bx").MessagesDelayed(); got != int64(b.N) {
					b.Fatalf("messages_delayed %d, want %d", got, b.N)
				}
			}
		})
	}
}

func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}
