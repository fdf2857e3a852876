package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// counts is a snapshot of the run's counters, summed over all workers.
type counts struct {
	published uint64
	confirmed uint64
	nacked    uint64
	consumed  uint64
}

func (c counts) sub(o counts) counts {
	return counts{
		published: c.published - o.published,
		confirmed: c.confirmed - o.confirmed,
		nacked:    c.nacked - o.nacked,
		consumed:  c.consumed - o.consumed,
	}
}

// LatencySummary describes end-to-end latencies (publish to delivery) in
// microseconds.
type LatencySummary struct {
	// Count is the number of deliveries whose latency was measured.
	Count uint64 `json:"count"`
	// MinUS is the smallest latency, exact.
	MinUS float64 `json:"min_us"`
	// MeanUS is the mean latency.
	MeanUS float64 `json:"mean_us"`
	// P50US is the median, within 0.4% (half a histogram bucket).
	P50US float64 `json:"p50_us"`
	// P95US is the 95th percentile, within 0.4%.
	P95US float64 `json:"p95_us"`
	// P99US is the 99th percentile, within 0.4%.
	P99US float64 `json:"p99_us"`
	// MaxUS is the largest latency, exact.
	MaxUS float64 `json:"max_us"`
}

// latencySummary turns a histogram of nanoseconds into a LatencySummary.
func latencySummary(h *histogram) LatencySummary {
	us := func(ns uint64) float64 { return float64(ns) / 1e3 }
	return LatencySummary{
		Count:  h.count(),
		MinUS:  us(h.minimum()),
		MeanUS: h.mean() / 1e3,
		P50US:  us(h.percentile(50)),
		P95US:  us(h.percentile(95)),
		P99US:  us(h.percentile(99)),
		MaxUS:  us(h.maximum()),
	}
}

// Summary is the result of one run. Totals cover the whole run, warmup
// included; rates and latencies cover only the measured period.
type Summary struct {
	// Name is Config.Name (a scenario phase), if any.
	Name string `json:"name,omitempty"`
	// Publishers, Consumers, Queues and Size echo the configuration.
	Publishers int `json:"publishers"`
	// Consumers is the number of consumers.
	Consumers int `json:"consumers"`
	// Queues is the number of queues.
	Queues int `json:"queues"`
	// Size is the body size in bytes.
	Size int `json:"size"`
	// Interrupted is true when the run was stopped from outside (Ctrl-C,
	// or the caller's context) before its duration or message counts.
	Interrupted bool `json:"interrupted"`
	// ElapsedSeconds is the whole run, warmup included.
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// MeasuredSeconds is the period after warmup that rates cover.
	MeasuredSeconds float64 `json:"measured_seconds"`
	// Published is the number of messages published.
	Published uint64 `json:"published"`
	// Confirmed is the number of messages the broker acked (confirm mode).
	Confirmed uint64 `json:"confirmed"`
	// Nacked is the number of messages the broker nacked (confirm mode).
	Nacked uint64 `json:"nacked"`
	// Consumed is the number of deliveries received.
	Consumed uint64 `json:"consumed"`
	// PublishRate is messages published per second in the measured period.
	PublishRate float64 `json:"publish_rate"`
	// ConfirmRate is confirms received per second in the measured period.
	ConfirmRate float64 `json:"confirm_rate"`
	// ConsumeRate is deliveries received per second in the measured period.
	ConsumeRate float64 `json:"consume_rate"`
	// Latency is the end-to-end latency over the measured period.
	Latency LatencySummary `json:"latency"`
	// AbortedConnections counts workers that did not stop in time after
	// the run ended, typically publishers blocked by the broker's flow
	// control, whose sockets were closed under them.
	AbortedConnections int `json:"aborted_connections"`
	// BrokerRSSKiB is the broker's peak resident set size during the phase
	// (scenario --broker-pid), or 0.
	BrokerRSSKiB uint64 `json:"broker_rss_kib,omitempty"`
	// Connections, DeclareSeconds and ConnectSeconds are the idle
	// scenario's: idle connections held, and the time to declare the queues
	// and to open the connections.
	Connections    int     `json:"connections,omitempty"`
	DeclareSeconds float64 `json:"declare_seconds,omitempty"`
	ConnectSeconds float64 `json:"connect_seconds,omitempty"`
	// Failover is set in runs with --failover-urls or --kill-pid.
	Failover *FailoverSummary `json:"failover,omitempty"`
}

// ran reports whether the run got as far as starting its workers.
func (s Summary) ran() bool { return s.ElapsedSeconds > 0 }

// perSecond divides n by d in seconds, or returns 0 for an empty period.
func perSecond(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// fmtLatency formats nanoseconds for people.
func fmtLatency(ns float64) string {
	switch {
	case ns < 1e6:
		return fmt.Sprintf("%.0f µs", ns/1e3)
	case ns < 1e9:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	default:
		return fmt.Sprintf("%.2f s", ns/1e9)
	}
}

// progressLine formats one per-second line.
func progressLine(elapsed time.Duration, warm bool, d counts, span time.Duration, h *histogram) string {
	tag := ""
	if warm {
		tag = " (warmup)"
	}
	lat := "latency -"
	if h.count() > 0 {
		lat = fmt.Sprintf("latency p50 %s p99 %s", fmtLatency(float64(h.percentile(50))), fmtLatency(float64(h.percentile(99))))
	}
	return fmt.Sprintf("%6.1fs%s  published %8.0f msg/s  confirmed %8.0f msg/s  consumed %8.0f msg/s  %s\n",
		elapsed.Seconds(), tag, perSecond(d.published, span), perSecond(d.confirmed, span), perSecond(d.consumed, span), lat)
}

// writeText prints s for people.
func (s Summary) writeText(w io.Writer) error {
	title := "summary"
	if s.Name != "" {
		title += " (" + s.Name + ")"
	}
	if s.Interrupted {
		title += ", interrupted"
	}
	l := s.Latency
	ms := func(us float64) string { return fmtLatency(us * 1e3) }
	lat := "none measured"
	if l.Count > 0 {
		lat = fmt.Sprintf("min %s  p50 %s  p95 %s  p99 %s  max %s  (%d samples)",
			ms(l.MinUS), ms(l.P50US), ms(l.P95US), ms(l.P99US), ms(l.MaxUS), l.Count)
	}
	_, err := fmt.Fprintf(w, `%s:
  run          %.1f s, measured %.1f s (%d publishers, %d consumers, %d queues, %d-byte bodies)
  published    %d (%.0f msg/s)
  confirmed    %d (%.0f msg/s), nacked %d
  consumed     %d (%.0f msg/s)
  latency      %s
`, title, s.ElapsedSeconds, s.MeasuredSeconds, s.Publishers, s.Consumers, s.Queues, s.Size,
		s.Published, s.PublishRate, s.Confirmed, s.ConfirmRate, s.Nacked, s.Consumed, s.ConsumeRate, lat)
	if err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	if s.Connections > 0 || s.DeclareSeconds > 0 {
		if _, err := fmt.Fprintf(w, "  idle         %d queues declared in %.2f s, %d connections opened in %.2f s\n",
			s.Queues, s.DeclareSeconds, s.Connections, s.ConnectSeconds); err != nil {
			return fmt.Errorf("write summary: %w", err)
		}
	}
	if s.BrokerRSSKiB > 0 {
		if _, err := fmt.Fprintf(w, "  broker RSS   %.1f MiB peak\n", float64(s.BrokerRSSKiB)/1024); err != nil {
			return fmt.Errorf("write summary: %w", err)
		}
	}
	if err := s.Failover.writeText(w); err != nil {
		return err
	}
	if s.AbortedConnections > 0 {
		if _, err := fmt.Fprintf(w, "  stopped      %d connections closed by force (blocked by broker flow control?)\n", s.AbortedConnections); err != nil {
			return fmt.Errorf("write summary: %w", err)
		}
	}
	if s.MeasuredSeconds == 0 {
		_, err = fmt.Fprintln(w, "  (the run ended before the warmup did: nothing was measured)")
	}
	return err
}

// writeJSON prints v as one JSON object on one line.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode summary: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}
