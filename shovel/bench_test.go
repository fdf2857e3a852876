package shovel_test

import (
	"testing"
	"time"
)

// BenchmarkShovelLocalToLocal measures messages/s moved with on-confirm
// from one durable queue to another of the same broker (persistent 1-byte
// messages, the default prefetch of 1000).
func BenchmarkShovelLocalToLocal(b *testing.B) {
	br := startBroker(b)
	publishN(b, br.url, "bench-src", "m", b.N)
	publishN(b, br.url, "bench-dest", "", 0) // declared, so it can be counted from the start
	b.ResetTimer()
	start := time.Now()
	br.putShovel("bench", map[string]any{"src-uri": "amqp://", "src-queue": "bench-src",
		"dest-uri": "amqp://", "dest-queue": "bench-dest"})
	waitFor(b, 10*time.Minute, "every message moved", func() bool { return queueLength(b, br.url, "bench-dest") == b.N })
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
