package server

import (
	"flag"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// BenchmarkStreamPublishConfirmed measures confirmed publishing of 100-byte
// messages into a stream over TCP, with up to 1,000 unconfirmed publishes in
// flight (one confirm per publish, group commit under the fsync policy).
func BenchmarkStreamPublishConfirmed(b *testing.B) {
	ts := startServer(b)
	_, ch := ts.channel(b)
	declareStream(b, ch, "s", nil)
	must(b, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 2048))
	body := make([]byte, 100)
	const window = 1000
	b.ReportAllocs()
	b.ResetTimer()
	pending := 0
	for i := 0; i < b.N; i++ {
		if pending == window {
			if !(<-confirms).Ack {
				b.Fatal("nack")
			}
			pending--
		}
		must(b, ch.Publish("", "s", false, false, amqp091.Publishing{Body: body}))
		pending++
	}
	for ; pending > 0; pending-- {
		if !(<-confirms).Ack {
			b.Fatal("nack")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkStreamReadFromFirst measures reading a stream from "first" over
// TCP with prefetch 1,000, acking every 500th delivery with multiple=true.
func BenchmarkStreamReadFromFirst(b *testing.B) {
	ts := startServer(b)
	conn, ch := ts.channel(b)
	declareStream(b, ch, "s", nil)
	must(b, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, b.N+1))
	body := make([]byte, 100)
	for i := 0; i < b.N; i++ {
		must(b, ch.Publish("", "s", false, false, amqp091.Publishing{Body: body}))
	}
	for i := 0; i < b.N; i++ {
		<-confirms
	}
	cch, err := conn.Channel()
	must(b, err)
	must(b, cch.Qos(1000, 0, false))
	b.ReportAllocs()
	b.ResetTimer()
	d, err := cch.Consume("s", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
	must(b, err)
	for i := 1; i <= b.N; i++ {
		m := <-d
		if i%500 == 0 || i == b.N {
			must(b, m.Ack(true))
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkStreamAttachMiddle measures attaching a consumer at an offset in
// the middle of a 200,000-message stream (about 26 MB) and receiving its first
// delivery over TCP: the sparse index bounds the seek to one index interval.
func BenchmarkStreamAttachMiddle(b *testing.B) {
	ts := startServer(b)
	conn, ch := ts.channel(b)
	declareStream(b, ch, "s", amqp091.Table{"x-stream-max-segment-size-bytes": int64(8 << 20)})
	vh := ts.Vhost("/")
	st := vh.streams.get(vh.queue("s"))
	const n = 200_000
	m := &Message{RoutingKey: "s", Body: make([]byte, 100)}
	for range n {
		if _, err := st.append(m); err != nil {
			b.Fatal(err)
		}
	}
	must(b, st.log.Sync())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cch, err := conn.Channel()
		must(b, err)
		must(b, cch.Qos(1, 0, false))
		want := int64(n/2 + i%1000)
		d, err := cch.Consume("s", "", false, false, false, false, amqp091.Table{"x-stream-offset": want})
		must(b, err)
		if got := (<-d).Headers["x-stream-offset"]; got != want {
			b.Fatalf("first delivery at %v, want %d", got, want)
		}
		must(b, cch.Close())
	}
}

// streamMessages sizes BenchmarkStreamReadFromFirstFixed; the figure
// is for -stream.messages=1000000.
var streamMessages = flag.Int("stream.messages", 20_000,
	"messages BenchmarkStreamReadFromFirstFixed writes before reading them from first")

// BenchmarkStreamReadFromFirstFixed measures reading a whole stream of
// -stream.messages 100-byte messages from "first" over TCP (prefetch 1,000,
// acking every 500th delivery with multiple=true). The stream is filled once,
// through the stream's own append path; each op is one full read by a new
// consumer, so msgs/s is the replay rate.
func BenchmarkStreamReadFromFirstFixed(b *testing.B) {
	ts := startServer(b)
	conn, ch := ts.channel(b)
	declareStream(b, ch, "s", nil)
	vh := ts.Vhost("/")
	st := vh.streams.get(vh.queue("s"))
	n := *streamMessages
	m := &Message{RoutingKey: "s", Body: make([]byte, 100)}
	start := time.Now()
	for range n {
		if _, err := st.append(m); err != nil {
			b.Fatal(err)
		}
	}
	must(b, st.log.Sync())
	b.Logf("appended %d messages (%d bytes of log) in %v", n, st.log.Stats().Bytes, time.Since(start).Round(time.Millisecond))
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			cch, err := conn.Channel()
			must(b, err)
			must(b, cch.Qos(1000, 0, false))
			d, err := cch.Consume("s", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
			must(b, err)
			for j := 1; j <= n; j++ {
				dm := <-d
				if j == n {
					if got := dm.Headers["x-stream-offset"]; got != int64(n-1) {
						b.Fatalf("last delivery at offset %v, want %d", got, n-1)
					}
				}
				if j%500 == 0 || j == n {
					must(b, dm.Ack(true))
				}
			}
			must(b, cch.Close())
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
}
