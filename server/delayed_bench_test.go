package server

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

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

// BenchmarkDelayedMillion is the scenario, once per iteration (run it
// with -benchtime=1x): 900,000 persistent messages delayed by an hour, then
// 100,000 more due at 10,000 a second, with confirms, into a durable
// x-delayed-message exchange. It reports the publish rate, the process's
// resident memory and Go heap with all 1,000,000 pending, and how late the
// 100,000 arrive at an autoack consumer (arrival minus the due time the
// publisher asked for; that includes the time the publish took to reach the
// broker, so it overstates the broker's own lateness).
func BenchmarkDelayedMillion(b *testing.B) {
	for range b.N {
		benchDelayedMillion(b)
	}
}

func benchDelayedMillion(b *testing.B) {
	ts := startServer(b)
	_, ch := ts.channel(b)
	must(b, ch.ExchangeDeclare("bx", "x-delayed-message", true, false, false, false, amqp091.Table{"x-delayed-type": "direct"}))
	_, err := ch.QueueDeclare("bq", true, false, false, false, nil)
	must(b, err)
	must(b, ch.QueueBind("bq", "k", "bx", false, nil))
	must(b, ch.Confirm(false))
	confs := ch.NotifyPublish(make(chan amqp091.Confirmation, 2048))
	const far, near = 900_000, 100_000
	publish := func(n, window int, msg func(i int) amqp091.Publishing) {
		outstanding := 0
		for i := range n {
			if outstanding == window {
				if c := <-confs; !c.Ack {
					b.Fatal("nack")
				}
				outstanding--
			}
			must(b, ch.Publish("bx", "k", false, false, msg(i)))
			outstanding++
		}
		for ; outstanding > 0; outstanding-- {
			if c := <-confs; !c.Ack {
				b.Fatal("nack")
			}
		}
	}
	body := make([]byte, 16)
	start := time.Now()
	publish(far, 1024, func(int) amqp091.Publishing {
		return amqp091.Publishing{Headers: amqp091.Table{"x-delay": int32(3600_000)}, Body: body, DeliveryMode: 2}
	})
	b.ReportMetric(float64(far)/time.Since(start).Seconds(), "publish/s")

	// Due from 15 s on, one every 100 µs; a small window keeps the time a
	// publish spends on its way to the broker short.
	t0 := time.Now().Add(15 * time.Second).UnixMicro()
	publish(near, 64, func(i int) amqp091.Publishing {
		due := (t0 + int64(i)*100) / 1000
		return amqp091.Publishing{Headers: amqp091.Table{"x-delay": int32(due - time.Now().UnixMilli())},
			Body: []byte(strconv.FormatInt(due, 10)), DeliveryMode: 2}
	})
	if got := ts.Vhost("/").exchange("bx").MessagesDelayed(); got < far+near-1000 {
		b.Fatalf("messages_delayed %d", got)
	}
	b.ReportMetric(float64(rssBytes(b))/(1<<20), "RSS-MiB")
	b.ReportMetric(float64(heapInUse())/(1<<20), "heap-MiB")

	var fireMu sync.Mutex
	fired := make([]int64, 0, near)
	hook := func(due, routed int64) {
		fireMu.Lock()
		fired = append(fired, routed-due)
		fireMu.Unlock()
	}
	testHookDelayFired.Store(&hook)
	defer testHookDelayFired.Store(nil)
	_, sub := ts.channel(b)
	d, err := sub.Consume("bq", "", true, false, false, false, nil)
	must(b, err)
	late := make([]int64, 0, near)
	for range near {
		m := <-d
		due, err := strconv.ParseInt(string(m.Body), 10, 64)
		must(b, err)
		late = append(late, time.Now().UnixMilli()-due)
	}
	slices.Sort(late)
	b.ReportMetric(float64(late[len(late)/2]), "late-p50-ms")
	b.ReportMetric(float64(late[len(late)*99/100]), "late-p99-ms")
	b.ReportMetric(float64(late[len(late)-1]), "late-max-ms")
	fireMu.Lock()
	defer fireMu.Unlock()
	slices.Sort(fired) // the broker's own lateness: routed minus its due time
	b.ReportMetric(float64(fired[len(fired)*99/100]), "fired-p99-ms")
	b.ReportMetric(float64(fired[len(fired)-1]), "fired-max-ms")
}

// rssBytes is the process's resident set size (Linux).
func rssBytes(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		b.Skip("no /proc/self/statm")
	}
	var size, rss int64
	if _, err := fmt.Sscan(string(data), &size, &rss); err != nil {
		b.Fatal(err)
	}
	return rss * int64(os.Getpagesize())
}
