package metrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// benchScrape measures one scrape of path with queues queues holding one
// message each and conns open connections (each with a channel); the
// handler is called directly so the figure excludes TCP.
func benchScrape(b *testing.B, path string, queues, conns int) {
	e := startEnv(b)
	_, ch := e.channel(b)
	for range conns - 1 {
		e.channel(b)
	}
	for i := range queues {
		name := fmt.Sprintf("bench-%05d", i)
		if _, err := ch.QueueDeclare(name, false, false, false, false, nil); err != nil {
			b.Fatal(err)
		}
		if err := ch.Publish("", name, false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
			b.Fatal(err)
		}
	}
	e.waitFor(b, "/metrics", allOf(
		expect{"rabbitmq_queue_messages_ready", nil, float64(queues)},
		expect{"rabbitmq_connections", nil, float64(conns)},
	))
	h := Handler(e.srv, e.exp.cfg.Options)
	req := httptest.NewRequest(http.MethodGet, path, nil)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	}
}

func BenchmarkScrapeAggregated1kQueues(b *testing.B) { benchScrape(b, "/metrics", 1000, 1) }

func BenchmarkScrapePerObject1kQueues(b *testing.B) { benchScrape(b, "/metrics/per-object", 1000, 1) }

// The size issue 17 asks the aggregated scrape to stay cheap at.
func BenchmarkScrapeAggregated10kQueues1kConns(b *testing.B) {
	benchScrape(b, "/metrics", 10000, 1000)
}

func BenchmarkScrapeDetailedQueues10kQueues1kConns(b *testing.B) {
	benchScrape(b, "/metrics/detailed?family=queue_coarse_metrics&family=queue_consumer_count", 10000, 1000)
}
