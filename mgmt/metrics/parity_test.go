package metrics

import (
	"os"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/server"
)

// referenceScrape parses a scrape of RabbitMQ 3.10.8's rabbitmq_prometheus
// kept in testdata: metrics.txt of /metrics on an idle node,
// metrics-detailed*.txt of /metrics/detailed with a connection, three
// channels, two consumers and a queue (the traffic of
// TestMetricsChurnAndChannelCounters).
func referenceScrape(t *testing.T, name string) families {
	t.Helper()
	f, err := os.Open("testdata/rabbitmq-3.10.8/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	return mfs
}

// Warren's own labels on the two info families, which RabbitMQ 3.10 lacks
// (rabbitmq_endpoint and the product labels come from later releases).
var ownLabels = map[string]bool{"rabbitmq_identity_info": true, "rabbitmq_build_info": true}

// checkParity fails for every family of got that RabbitMQ also has with
// another type, HELP text or label set, and for every family of want (with
// the given prefix) that got lacks.
func checkParity(t *testing.T, got, want families, mustHave []string) {
	t.Helper()
	for name, mf := range got {
		ref := want[name]
		if ref == nil || !strings.HasPrefix(name, "rabbitmq_") {
			continue
		}
		if mf.GetType() != ref.GetType() {
			t.Errorf("%s: type %v, RabbitMQ %v", name, mf.GetType(), ref.GetType())
		}
		if mf.GetHelp() != ref.GetHelp() {
			t.Errorf("%s: HELP %q, RabbitMQ %q", name, mf.GetHelp(), ref.GetHelp())
		}
		if ownLabels[name] || len(ref.GetMetric()) == 0 || len(mf.GetMetric()) == 0 {
			continue
		}
		if g, w := labelNames(mf.GetMetric()[0]), labelNames(ref.GetMetric()[0]); !sameStrings(g, w) {
			t.Errorf("%s: labels %v, RabbitMQ %v", name, g, w)
		}
	}
	for _, name := range mustHave {
		if got[name] == nil {
			t.Errorf("%s missing", name)
		}
		if want[name] == nil {
			t.Errorf("%s is not in RabbitMQ's scrape to compare with", name)
		}
	}
}

// The series RabbitMQ's Grafana dashboards query (issue 17), by name.
var issueSeries = []string{
	"rabbitmq_channel_messages_published_total", "rabbitmq_channel_messages_confirmed_total",
	"rabbitmq_channel_messages_delivered_total", "rabbitmq_channel_messages_delivered_ack_total",
	"rabbitmq_channel_messages_acked_total", "rabbitmq_channel_messages_redelivered_total",
	"rabbitmq_channel_messages_unroutable_dropped_total", "rabbitmq_channel_messages_unroutable_returned_total",
	"rabbitmq_channel_messages_unconfirmed", "rabbitmq_channel_get_total", "rabbitmq_channel_get_ack_total",
	"rabbitmq_channel_get_empty_total", "rabbitmq_channel_consumers", "rabbitmq_process_open_tcp_sockets",
	"rabbitmq_process_max_tcp_sockets", "rabbitmq_queues_declared_total", "rabbitmq_queues_created_total",
	"rabbitmq_queues_deleted_total", "rabbitmq_channels_opened_total", "rabbitmq_channels_closed_total",
	"rabbitmq_connections_closed_total", "rabbitmq_connections_opened_total",
	"rabbitmq_global_messages_received_confirm_total",
	// The cluster operator's cluster-alarms and low-disk-watermark-predicted
	// alerts.
	"rabbitmq_alarms_free_disk_space_watermark", "rabbitmq_disk_space_available_limit_bytes",
}

func TestMetricsMatchRabbitMQFamilies(t *testing.T) {
	e := startEnv(t, func(c *server.Config, _ *Config) { c.DiskFreeLimit = 1 })
	checkParity(t, e.scrape(t, "/metrics"), referenceScrape(t, "metrics.txt"), issueSeries)
}

// TestMetricsChurnAndChannelCounters runs the traffic whose figures were read
// off RabbitMQ 3.10.8's /metrics (see each step) and expects the same.
func TestMetricsChurnAndChannelCounters(t *testing.T) {
	e := startEnv(t)
	conn, ch := e.channel(t)
	if _, err := ch.QueueDeclare("churn", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	// A redeclare counts as declared, a passive declare does not.
	if _, err := ch.QueueDeclare("churn", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclarePassive("churn", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDelete("churn", false, false, false); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "/metrics", allOf(
		expect{"rabbitmq_connections_opened_total", nil, 1}, expect{"rabbitmq_channels_opened_total", nil, 1},
		expect{"rabbitmq_queues_declared_total", nil, 2}, expect{"rabbitmq_queues_created_total", nil, 1},
		expect{"rabbitmq_queues_deleted_total", nil, 1}, expect{"rabbitmq_channels_closed_total", nil, 0},
	))
	// A channel closed by a channel error is closed.
	if _, err := ch.QueueDeclarePassive("churn-missing", false, false, false, false, nil); err == nil {
		t.Fatal("passive declare of a missing queue succeeded")
	}
	e.waitFor(t, "/metrics", allOf(expect{"rabbitmq_channels_closed_total", nil, 1}))

	pub := openChannel(t, conn)
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	q, err := pub.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		publishConfirmed(t, pub, "", q.Name, false)
	}
	publishConfirmed(t, pub, "amq.direct", "nowhere", false)
	publishConfirmed(t, pub, "amq.direct", "nowhere", true)
	getOne(t, pub, q.Name, false, true)
	getOne(t, pub, q.Name, true, true)
	msgs, err := pub.Consume(q.Name, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := (<-msgs).Reject(true); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := (<-msgs).Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	auto := openChannel(t, conn)
	if _, err := auto.Consume(q.Name, "", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	getOne(t, openChannel(t, conn), q.Name, false, false)

	// RabbitMQ shows the same counters with these three channels open, once
	// its stats interval has passed: 2 consumers, 1 unacked (the last
	// message, redelivered to the manual consumer).
	counters := []expect{
		expect{"rabbitmq_channels_opened_total", nil, 4},
		expect{"rabbitmq_queues_declared_total", nil, 3}, expect{"rabbitmq_queues_created_total", nil, 2},
		expect{"rabbitmq_channel_messages_published_total", nil, 7},
		expect{"rabbitmq_channel_messages_confirmed_total", nil, 7},
		expect{"rabbitmq_global_messages_received_confirm_total", amqp091Label, 7},
		expect{"rabbitmq_channel_messages_unroutable_returned_total", nil, 1},
		expect{"rabbitmq_channel_messages_unroutable_dropped_total", nil, 1},
		expect{"rabbitmq_channel_get_ack_total", nil, 1}, expect{"rabbitmq_channel_get_total", nil, 1},
		expect{"rabbitmq_channel_get_empty_total", nil, 1},
		expect{"rabbitmq_channel_messages_delivered_ack_total", nil, 4},
		expect{"rabbitmq_channel_messages_acked_total", nil, 3},
	}
	e.waitFor(t, "/metrics", allOf(append(counters,
		expect{"rabbitmq_channels_closed_total", nil, 1}, expect{"rabbitmq_queues_deleted_total", nil, 1},
		expect{"rabbitmq_channel_consumers", nil, 2}, expect{"rabbitmq_channel_messages_unacked", nil, 1},
		expect{"rabbitmq_channel_messages_unconfirmed", nil, 0},
		expect{"rabbitmq_channel_messages_delivered_total", nil, 0},
		expect{"rabbitmq_channel_messages_redelivered_total", nil, 1},
	)...))

	// Closing the connection requeues the unacked message to the no-ack
	// consumer (delivered 1, redelivered 2), then closes every channel and
	// deletes the exclusive queue; no counter goes down.
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "/metrics", allOf(append(counters,
		expect{"rabbitmq_connections_closed_total", nil, 1}, expect{"rabbitmq_channels_closed_total", nil, 4},
		expect{"rabbitmq_queues_deleted_total", nil, 2}, expect{"rabbitmq_channel_consumers", nil, 0},
		expect{"rabbitmq_channel_messages_unacked", nil, 0},
		expect{"rabbitmq_channel_messages_delivered_total", nil, 1},
		expect{"rabbitmq_channel_messages_redelivered_total", nil, 2},
	)...))
}

func openChannel(t testing.TB, c *amqp091.Connection) *amqp091.Channel {
	t.Helper()
	ch, err := c.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	return ch
}

// publishConfirmed publishes one message on a channel in confirm mode and
// waits for its confirm.
func publishConfirmed(t testing.TB, ch *amqp091.Channel, exchange, key string, mandatory bool) {
	t.Helper()
	dc, err := ch.PublishWithDeferredConfirm(exchange, key, mandatory, false, amqp091.Publishing{Body: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	if !dc.Wait() {
		t.Fatalf("publish to %q/%q nacked", exchange, key)
	}
}

// getOne does a basic.get and fails unless it found a message exactly when
// want says so.
func getOne(t testing.TB, ch *amqp091.Channel, queue string, noAck, want bool) {
	t.Helper()
	_, ok, err := ch.Get(queue, noAck)
	if err != nil {
		t.Fatal(err)
	}
	if ok != want {
		t.Fatalf("basic.get on %s: got a message %v, want %v", queue, ok, want)
	}
}

// Queues declared through the API count as declared and created, queues
// imported from definitions as neither, and queues removed by x-expires or
// with their vhost as deleted; RabbitMQ 3.10.8's counters moved the same way
// for the same steps (management API declares, a 300 ms x-expires, a POST
// /api/definitions of two queues, vhost deletions).
func TestMetricsQueueChurnOutsideAMQP(t *testing.T) {
	e := startEnv(t)
	if _, err := e.srv.PutVhost("churn-vhost", server.VhostMeta{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.DeclareQueue("churn-vhost", server.QueueSpec{Name: "vq"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.DeclareQueue("/", server.QueueSpec{Name: "expq", Arguments: amqp.Table{"x-expires": int32(300)}}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "/metrics", allOf(
		expect{"rabbitmq_queues_declared_total", nil, 2}, expect{"rabbitmq_queues_created_total", nil, 2},
		expect{"rabbitmq_queues_deleted_total", nil, 0},
	))
	e.waitFor(t, "/metrics", allOf(expect{"rabbitmq_queues_deleted_total", nil, 1})) // x-expires
	if err := e.srv.DeleteVhost("churn-vhost"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "/metrics", allOf(
		expect{"rabbitmq_queues_deleted_total", nil, 2}, expect{"rabbitmq_queues_created_total", nil, 2},
		expect{"rabbitmq_queues", nil, 0},
	))
	defs := server.Definitions{
		Vhosts: []server.VhostDefinition{{Name: "imported"}},
		Queues: []server.QueueDefinition{
			{Vhost: "imported", QueueSpec: server.QueueSpec{Name: "dq1", Durable: true}},
			{Vhost: "imported", QueueSpec: server.QueueSpec{Name: "dq2"}},
		},
	}
	if err := e.srv.ImportDefinitions(defs, ""); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "/metrics", allOf(expect{"rabbitmq_queues", nil, 2}))
	if err := e.srv.DeleteVhost("imported"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "/metrics", allOf(
		expect{"rabbitmq_queues_declared_total", nil, 2}, expect{"rabbitmq_queues_created_total", nil, 2},
		expect{"rabbitmq_queues_deleted_total", nil, 4}, expect{"rabbitmq_queues", nil, 0},
	))
}
