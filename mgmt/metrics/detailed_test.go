package metrics

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/server"
)

// The families of every group /metrics/detailed serves match RabbitMQ
// 3.10.8's (testdata/rabbitmq-3.10.8/metrics-detailed*.txt, the same groups
// asked for) in type, HELP text and labels.
func TestMetricsDetailedMatchRabbitMQ(t *testing.T) {
	e := startEnv(t)
	_, ch := e.channel(t)
	if _, err := ch.QueueDeclare("q", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume("q", "", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	path := "/metrics/detailed?family=connection_churn_metrics&family=queue_coarse_metrics&family=queue_consumer_count" +
		"&family=channel_metrics&family=connection_coarse_metrics&family=connection_metrics"
	got := e.scrape(t, path)
	var want []string
	for _, g := range detailedGroups {
		if g.name == "queue_metrics" {
			continue // not asked for: queue_consumer_count is served instead
		}
		for _, d := range g.defs {
			want = append(want, detailedPrefix+d.name)
		}
	}
	checkParity(t, got, referenceScrape(t, "metrics-detailed.txt"), want)
	got = e.scrape(t, "/metrics/detailed?family=queue_metrics")
	want = nil
	for _, d := range queueMetricsDefs {
		want = append(want, detailedPrefix+d.name)
	}
	checkParity(t, got, referenceScrape(t, "metrics-detailed-queue_metrics.txt"), want)
}

func TestMetricsDetailedFamiliesAndVhosts(t *testing.T) {
	e := startEnv(t)
	if _, err := e.srv.PutVhost("other", server.VhostMeta{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.SetPermission("guest", "other", server.Permission{Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
		t.Fatal(err)
	}
	_, ch := e.channel(t)
	for _, name := range []string{"a", "b"} {
		if _, err := ch.QueueDeclare(name, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := ch.Publish("", "a", false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ch.Consume("b", "", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.DeclareQueue("other", server.QueueSpec{Name: "c"}); err != nil {
		t.Fatal(err)
	}
	slash := func(q string) map[string]string { return map[string]string{"vhost": "/", "queue": q} }
	other := map[string]string{"vhost": "other", "queue": "c"}

	// Every vhost's queues without vhost=; queue_consumer_count only once.
	f := e.waitFor(t, "/metrics/detailed?family=queue_coarse_metrics&family=queue_consumer_count", allOf(
		expect{"rabbitmq_detailed_queue_messages_ready", slash("a"), 2},
		expect{"rabbitmq_detailed_queue_messages", slash("a"), 2},
		expect{"rabbitmq_detailed_queue_messages_ready", other, 0},
		expect{"rabbitmq_detailed_queue_consumers", slash("b"), 1},
		expect{"rabbitmq_detailed_queue_consumers", slash("a"), 0},
	))
	if n := len(f["rabbitmq_detailed_queue_messages_ready"].GetMetric()); n != 3 {
		t.Errorf("%d queue_messages_ready series, want 3", n)
	}
	for name := range f {
		switch name {
		case "rabbitmq_detailed_queue_messages_ready", "rabbitmq_detailed_queue_messages_unacked", "rabbitmq_detailed_queue_messages",
			"rabbitmq_detailed_queue_consumers", "rabbitmq_identity_info", "rabbitmq_build_info":
		default:
			t.Errorf("family %s not asked for", name)
		}
	}
	f.get(t, "rabbitmq_identity_info", map[string]string{"rabbitmq_endpoint": "detailed", "rabbitmq_cluster": "test-cluster"})

	// vhost= keeps that vhost's queues; one that does not exist selects none.
	f = e.scrape(t, "/metrics/detailed?family=queue_coarse_metrics&vhost=other")
	if n := len(f["rabbitmq_detailed_queue_messages_ready"].GetMetric()); n != 1 {
		t.Errorf("vhost=other: %d series, want 1", n)
	}
	f.get(t, "rabbitmq_detailed_queue_messages_ready", other)
	f = e.scrape(t, "/metrics/detailed?family=queue_coarse_metrics&vhost=nosuch&vhost=other")
	f.get(t, "rabbitmq_detailed_queue_messages_ready", other)
	f = e.scrape(t, "/metrics/detailed?family=queue_coarse_metrics&vhost=nosuch")
	if f["rabbitmq_detailed_queue_messages_ready"] != nil {
		t.Error("vhost=nosuch selected queues")
	}

	// No family or an unknown one: only the info families, as RabbitMQ.
	for _, q := range []string{"", "?family=bogus", "?family=queue_coarse"} {
		f = e.scrape(t, "/metrics/detailed"+q)
		if len(f) != 2 || f["rabbitmq_identity_info"] == nil || f["rabbitmq_build_info"] == nil {
			t.Errorf("/metrics/detailed%s: families %v, want the two info families", q, keys(f))
		}
	}

	// Per-channel and per-connection rows, labelled by RabbitMQ's names.
	f = e.scrape(t, "/metrics/detailed?family=channel_metrics&family=connection_metrics&family=connection_churn_metrics")
	chans := f["rabbitmq_detailed_channel_consumers"].GetMetric()
	if len(chans) != 1 || value(chans[0]) != 1 {
		t.Fatalf("channel_consumers %v, want one channel with 1 consumer", chans)
	}
	conns := e.srv.Connections()
	if len(conns) != 1 {
		t.Fatalf("%d connections", len(conns))
	}
	if got, want := labelsOf(chans[0])["channel"], conns[0].Name+" (1)"; got != want {
		t.Errorf("channel label %q, want %q", got, want)
	}
	f.get(t, "rabbitmq_detailed_connection_channels", map[string]string{"channel": conns[0].Name})
	f.get(t, "rabbitmq_detailed_queues_created_total", nil)
	if v := f.get(t, "rabbitmq_detailed_queues_created_total", nil); v != 3 {
		t.Errorf("queues_created_total %v, want 3", v)
	}
}

func keys(f families) []string {
	var out []string
	for k := range f {
		out = append(out, k)
	}
	return out
}
