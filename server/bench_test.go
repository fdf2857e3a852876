package server

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp"
)

// BenchmarkPublishRouteDeliver drives the broker's own publish path without
// sockets: a basic.publish method, header and 16-byte body frame are handled
// by a channel, routed through the default exchange, enqueued and delivered to
// a no-ack consumer whose deliver frames are encoded into its outbox.
func BenchmarkPublishRouteDeliver(b *testing.B) {
	ts := startServer(b)
	vh := ts.Vhost("/")
	c, ch := benchChannel(b, ts)
	q, aerr := vh.declareQueue(c, &amqp.QueueDeclare{Queue: "bench"})
	if aerr != nil {
		b.Fatal(aerr)
	}
	cons := &consumer{tag: "c", sink: ch, q: q.h, noAck: true}
	if aerr := q.h.consume(cons, func() {}); aerr != nil {
		b.Fatal(aerr)
	}
	parsed := benchPublishFrames(b, "", "bench")
	var spare []byte
	b.ReportAllocs()
	b.SetBytes(16)
	b.ResetTimer()
	for i := range b.N {
		for _, f := range parsed {
			if err := ch.handleFrame(f); err != nil {
				b.Fatal(err)
			}
		}
		if i%1024 == 0 {
			spare, _ = c.out.take(spare)
		}
	}
	b.StopTimer()
	if got := q.Info().Delivered; got != uint64(b.N) {
		b.Fatalf("delivered %d of %d", got, b.N)
	}
}

// BenchmarkPublishDeliverAck is BenchmarkPublishRouteDeliver with a
// consumer that acks: each publish is delivered, then settled with
// basic.ack multiple=true by its channel, through the queue's handle by
// delivery id.
func BenchmarkPublishDeliverAck(b *testing.B) {
	ts := startServer(b)
	vh := ts.Vhost("/")
	c, ch := benchChannel(b, ts)
	q, aerr := vh.declareQueue(c, &amqp.QueueDeclare{Queue: "bench"})
	if aerr != nil {
		b.Fatal(aerr)
	}
	cons := &consumer{tag: "c", sink: ch, q: q.h}
	if aerr := q.h.consume(cons, func() {}); aerr != nil {
		b.Fatal(aerr)
	}
	parsed := benchPublishFrames(b, "", "bench")
	ackFrame, _, err := amqp.ParseFrame(amqp.AppendMethodFrame(nil, 1, &amqp.BasicAck{Multiple: true}), 0)
	if err != nil {
		b.Fatal(err)
	}
	var spare []byte
	b.ReportAllocs()
	b.SetBytes(16)
	b.ResetTimer()
	for i := range b.N {
		for _, f := range parsed {
			if err := ch.handleFrame(f); err != nil {
				b.Fatal(err)
			}
		}
		if err := ch.handleFrame(ackFrame); err != nil {
			b.Fatal(err)
		}
		if i%1024 == 0 {
			spare, _ = c.out.take(spare)
		}
	}
	b.StopTimer()
	if got := q.Info().Acked; got != uint64(b.N) {
		b.Fatalf("acked %d of %d", got, b.N)
	}
}

// BenchmarkAMQPPublishConsume measures the same path end to end over TCP with
// amqp091-go as both publisher and autoack consumer.
func BenchmarkAMQPPublishConsume(b *testing.B) {
	ts := startServer(b)
	_, pub := ts.channel(b)
	_, sub := ts.channel(b)
	mustDeclare(b, pub, "bench", nil)
	d, err := sub.Consume("bench", "", true, false, false, false, nil)
	must(b, err)
	body := make([]byte, 16)
	done := make(chan struct{})
	go func() {
		for range b.N {
			<-d
		}
		close(done)
	}()
	b.ReportAllocs()
	b.SetBytes(16)
	b.ResetTimer()
	for range b.N {
		if err := pub.Publish("", "bench", false, false, amqp091.Publishing{Body: body}); err != nil {
			b.Fatal(err)
		}
	}
	<-done
}

// benchChannel is an in-process guest connection on vhost / with channel 1,
// no socket: its frames are encoded into an outbox that never fills.
func benchChannel(b *testing.B, ts *testServer) (*conn, *channel) {
	b.Helper()
	acct, ok := ts.users.authenticate("guest", "guest")
	if !ok {
		b.Fatal("guest login")
	}
	c := &conn{srv: ts.Server, out: newOutbox(1 << 30), frameMax: 131072, channelMax: 2047, vhost: ts.Vhost("/"), user: acct,
		channels: make(map[uint16]*channel), log: ts.log}
	return c, newChannel(c, 1)
}

// benchPublishFrames is a basic.publish of a 16-byte body to exchange with
// key on channel 1, parsed into the frames a channel handles.
func benchPublishFrames(b *testing.B, exchange, key string) []amqp.Frame {
	b.Helper()
	var frames []byte
	frames = amqp.AppendMethodFrame(frames, 1, &amqp.BasicPublish{Exchange: exchange, RoutingKey: key})
	frames = amqp.AppendContent(frames, 1, 131072, (&amqp.Properties{}).AppendTo(nil), make([]byte, 16))
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
