package server

import (
	"fmt"
	"testing"

	"github.com/warrenmq/warren/amqp"
)

// BenchmarkFanoutDeliver is warren-perf's fanout scenario without sockets:
// one confirm-mode channel publishes persistent 1 KiB messages, 8 per socket
// read, to a fanout exchange bound to 10 durable queues, each with one consumer on its own connection. The
// manual-ack variant acks (multiple) every 8 publishes with prefetch 100, as
// a consumer keeping up would. Only AMQP frames are handed to the channels,
// so the file runs unchanged on trees from before the queue handle (for
// pprof -diff_base across issue 13).
func BenchmarkFanoutDeliver(b *testing.B) {
	b.Run("autoAck", func(b *testing.B) { benchFanout(b, true) })
	b.Run("manualAck", func(b *testing.B) { benchFanout(b, false) })
}

const benchFanoutQueues = 10

func benchFanout(b *testing.B, noAck bool) {
	ts := startServer(b)
	pc, pub := benchChannel(b, ts)
	benchHandle(b, pub, &amqp.ExchangeDeclare{Exchange: "fan", Type: "fanout", Durable: true})
	benchHandle(b, pub, &amqp.ConfirmSelect{})
	type sub struct {
		c  *conn
		ch *channel
	}
	subs := make([]sub, benchFanoutQueues)
	for i := range subs {
		name := fmt.Sprintf("fan-%d", i)
		benchHandle(b, pub, &amqp.QueueDeclare{Queue: name, Durable: true})
		benchHandle(b, pub, &amqp.QueueBind{Queue: name, Exchange: "fan"})
		c, ch := benchChannel(b, ts)
		benchHandle(b, ch, &amqp.BasicQos{PrefetchCount: 100})
		benchHandle(b, ch, &amqp.BasicConsume{Queue: name, ConsumerTag: "c", NoAck: noAck})
		subs[i] = sub{c, ch}
	}
	parsed := benchContentFrames(b, "fan", "", &amqp.Properties{Flags: amqp.FlagDeliveryMode, DeliveryMode: 2}, 1024)
	ack := benchFrame(b, &amqp.BasicAck{Multiple: true})
	var spare []byte
	b.ReportAllocs()
	b.SetBytes(1024 * benchFanoutQueues)
	b.ResetTimer()
	for i := range b.N {
		for _, f := range parsed {
			if err := pub.handleFrame(f); err != nil {
				b.Fatal(err)
			}
		}
		if i%8 != 7 {
			continue
		}
		// A socket read's end: the deferred store writes and the confirms.
		pc.endBatch()
		if !noAck {
			for _, s := range subs {
				if err := s.ch.handleFrame(ack); err != nil {
					b.Fatal(err)
				}
			}
		}
		if i%256 == 255 {
			spare, _ = pc.out.take(spare)
			for _, s := range subs {
				spare, _ = s.c.out.take(spare)
			}
		}
	}
	b.StopTimer()
	pc.endBatch()
	for i := range subs {
		q := ts.Vhost("/").queues[fmt.Sprintf("fan-%d", i)]
		if got := q.Info().Delivered; got != uint64(b.N) {
			b.Fatalf("queue %d delivered %d of %d", i, got, b.N)
		}
	}
}

// benchHandle hands ch one method frame and fails on a channel or
// connection error.
func benchHandle(b *testing.B, ch *channel, m amqp.Method) {
	b.Helper()
	if err := ch.handleFrame(benchFrame(b, m)); err != nil {
		b.Fatalf("%s: %v", m.Name(), err)
	}
}

// benchFrame is m as a parsed frame on channel 1.
func benchFrame(b *testing.B, m amqp.Method) amqp.Frame {
	b.Helper()
	f, _, err := amqp.ParseFrame(amqp.AppendMethodFrame(nil, 1, m), 0)
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// benchContentFrames is a basic.publish to exchange with key, props and a
// body of size bytes, parsed into the frames a channel handles.
func benchContentFrames(b *testing.B, exchange, key string, props *amqp.Properties, size int) []amqp.Frame {
	b.Helper()
	var frames []byte
	frames = amqp.AppendMethodFrame(frames, 1, &amqp.BasicPublish{Exchange: exchange, RoutingKey: key})
	frames = amqp.AppendContent(frames, 1, 131072, props.AppendTo(nil), make([]byte, size))
	var parsed []amqp.Frame
	for off := 0; off < len(frames); {
		f, n, err := amqp.ParseFrame(frames[off:], 0)
		if err != nil || n == 0 {
			b.Fatal(err)
		}
		parsed = append(parsed, f)
		off += n
	}
	return parsed
}
