package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// BenchmarkPublishDuringDurableDeclares measures one connection's publish
// rate (transient messages, each confirmed before the next) while another
// connection declares and deletes 1,000 durable queues in the same vhost,
// and the slowest single publish. A declare or delete that writes its
// index and meta.db under Vhost.mu stalls every publisher of the vhost for
// that long.
func BenchmarkPublishDuringDurableDeclares(b *testing.B) {
	b.Run("publishing", func(b *testing.B) { benchDurableDeclares(b, true) })
	b.Run("declares-only", func(b *testing.B) { benchDurableDeclares(b, false) })
}

func benchDurableDeclares(b *testing.B, publishing bool) {
	ts := startServer(b, withDataDir(b.TempDir()))
	_, pch := ts.channel(b)
	_, err := pch.QueueDeclare("defs-bench-pub", false, false, false, false, amqp091.Table{"x-max-length": int32(1000)})
	must(b, err)
	must(b, pch.Confirm(false))
	confirms := pch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	_, dch := ts.channel(b)
	var published int
	var slowest, elapsed time.Duration
	for range b.N {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var pubErr error
		if publishing {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, slow, err := publishUntil(pch, confirms, stop)
				published += n
				slowest = max(slowest, slow)
				pubErr = err
			}()
		}
		start := time.Now()
		for i := range 1000 {
			name := fmt.Sprintf("defs-bench-%d", i)
			if _, err := dch.QueueDeclare(name, true, false, false, false, nil); err != nil {
				b.Fatal(err)
			}
			if _, err := dch.QueueDelete(name, false, false, false); err != nil {
				b.Fatal(err)
			}
		}
		elapsed += time.Since(start)
		close(stop)
		wg.Wait()
		must(b, pubErr)
	}
	if publishing {
		b.ReportMetric(float64(published)/elapsed.Seconds(), "publishes/s")
		b.ReportMetric(float64(slowest.Microseconds()), "max-publish-µs")
	}
	b.ReportMetric(float64(2000*b.N)/elapsed.Seconds(), "declares+deletes/s")
}

// publishUntil publishes and awaits each confirm until stop is closed, and
// returns how many it published and the slowest round trip.
func publishUntil(ch *amqp091.Channel, confirms <-chan amqp091.Confirmation, stop <-chan struct{}) (int, time.Duration, error) {
	n := 0
	var slowest time.Duration
	for {
		select {
		case <-stop:
			return n, slowest, nil
		default:
		}
		t0 := time.Now()
		err := ch.PublishWithContext(context.Background(), "", "defs-bench-pub", false, false, amqp091.Publishing{Body: []byte("x")})
		if err != nil {
			return n, slowest, err
		}
		if c := <-confirms; !c.Ack {
			return n, slowest, fmt.Errorf("publish %d nacked", c.DeliveryTag)
		}
		slowest = max(slowest, time.Since(t0))
		n++
	}
}
