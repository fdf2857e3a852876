package mgmt

import (
	"fmt"
	"testing"
	"time"

	"github.com/warrenmq/warren/server"
)

// BenchmarkListQueues10k lists 10,000 queues a page (100) at a time through
// the HTTP API, default order, walking the pages. Sub-benchmarks show the
// costlier orders that need every row rendered (sort by a statistic).
func BenchmarkListQueues10k(b *testing.B) {
	e := newEnv(b, func(_ *server.Config, c *Config) { c.StatsInterval = time.Minute })
	const n = 10000
	for i := 0; i < n; i++ {
		if _, err := e.srv.DeclareQueue("/", server.QueueSpec{Name: fmt.Sprintf("queue-%05d", i)}); err != nil {
			b.Fatalf("declare: %v", err)
		}
	}
	e.api.stats.sample(time.Now())
	run := func(b *testing.B, query string) {
		b.ReportAllocs()
		page := 0
		for b.Loop() {
			page = page%(n/100) + 1
			r := e.get(fmt.Sprintf("/api/queues/%%2F?page=%d&page_size=100%s", page, query))
			if r.status != 200 {
				b.Fatalf("status %d: %s", r.status, r.body)
			}
		}
	}
	b.Run("default-order", func(b *testing.B) { run(b, "") })
	b.Run("name-filter", func(b *testing.B) { run(b, "&name=queue-0") })
	b.Run("sort-by-messages", func(b *testing.B) { run(b, "&sort=messages&sort_reverse=true") })
}

// BenchmarkSample10k measures one sampler pass over 10,000 queues.
func BenchmarkSample10k(b *testing.B) {
	e := newEnv(b, func(_ *server.Config, c *Config) { c.StatsInterval = time.Minute })
	for i := 0; i < 10000; i++ {
		if _, err := e.srv.DeclareQueue("/", server.QueueSpec{Name: fmt.Sprintf("queue-%05d", i)}); err != nil {
			b.Fatalf("declare: %v", err)
		}
	}
	b.ReportAllocs()
	now := time.Now()
	for b.Loop() {
		now = now.Add(time.Second)
		e.api.stats.sample(now)
	}
}
