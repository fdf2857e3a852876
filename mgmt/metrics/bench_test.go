package metrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// benchScrape measures one scrape of path with queues queues holding one
// message each; the handler is called directly so the figure excludes TCP.
func benchScrape(b *testing.B, path string, queues int) {
	e := startEnv(b)
	_, ch := e.channel(b)
	for i := range queues {
		name := fmt.Sprintf("bench-%05d", i)
		if _, err := ch.QueueDeclare(name, false, false, false, false, nil); err != nil {
			b.Fatal(err)
		}
		if err := ch.Publish("", name, false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
			b.Fatal(err)
		}
	}
	e.waitFor(b, "/metrics", allOf(expect{"rabbitmq_queue_messages_ready", nil, float64(queues)}))
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

func BenchmarkScrapeAggregated1kQueues(b *testing.B) { benchScrape(b, "/metrics", 1000) }

func BenchmarkScrapePerObject1kQueues(b *testing.B) { benchScrape(b, "/metrics/per-object", 1000) }
