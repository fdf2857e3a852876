package metrics

import (
	"context"
	"fmt"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestMetricsQuorumQueue: after 50 confirmed publishes to a quorum queue
// on a standalone node (one replica, which leads), the per-object scrape
// has its raft term, commit and written index, leadership and membership,
// no election; both endpoints count 50 commits in the commit latency
// histogram; the aggregated one sums the raft families under RabbitMQ
// 3.10's names, types and HELP texts.
func TestMetricsQuorumQueue(t *testing.T) {
	e := startEnv(t)
	_, ch := e.channel(t)
	if _, err := ch.QueueDeclare("qq", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "qq", false, false,
			amqp091.Publishing{Body: []byte(fmt.Sprint(i)), DeliveryMode: amqp091.Persistent})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
			t.Fatalf("publish %d: ack %v err %v", i, ok, err)
		}
	}
	q := map[string]string{"vhost": "/", "queue": "qq"}
	f := e.scrape(t, "/metrics/per-object")
	for _, c := range []expect{
		{"rabbitmq_raft_term_total", q, 1},
		{"warren_quorum_queue_leader", q, 1},
		{"warren_quorum_queue_members", q, 1},
		{"warren_quorum_queue_members_online", q, 1},
		{"warren_quorum_queue_members_in_sync", q, 1},
		{"warren_quorum_queue_leader_elections_total", q, 0},
		{"warren_quorum_queues_led", nil, 1},
	} {
		if got := f.get(t, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	f.get(t, "rabbitmq_queue_info", map[string]string{"vhost": "/", "queue": "qq", "queue_type": "rabbit_quorum_queue", "membership": "leader"})
	// The epoch-start record and the 50 enqueues at least.
	if got := f.get(t, "rabbitmq_raft_log_commit_index", q); got < n+1 {
		t.Errorf("commit index %v, want >= %d", got, n+1)
	}
	if w, c := f.get(t, "rabbitmq_raft_log_last_written_index", q), f.get(t, "rabbitmq_raft_log_commit_index", q); w < c {
		t.Errorf("last written %v below commit %v", w, c)
	}

	agg := e.scrape(t, "/metrics")
	checkParity(t, agg, referenceScrape(t, "metrics.txt"),
		[]string{"rabbitmq_raft_term_total", "rabbitmq_raft_log_commit_index", "rabbitmq_raft_log_last_written_index"})
	if got := agg.get(t, "rabbitmq_raft_term_total", nil); got != 1 {
		t.Errorf("aggregated raft term %v, want 1", got)
	}
	for _, sc := range []families{f, agg} {
		mf := sc["warren_quorum_commit_latency_seconds"]
		if mf == nil || len(mf.GetMetric()) != 1 {
			t.Fatalf("commit latency histogram: %v", mf)
		}
		h := mf.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != n || h.GetSampleSum() <= 0 {
			t.Errorf("commit latency: count %d sum %v, want %d commits", h.GetSampleCount(), h.GetSampleSum(), n)
		}
	}
}
