package metrics

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/msgstore"
	"github.com/warrenmq/warren/server"
)

// family describes what RabbitMQ's dashboards expect of one metric family.
type family struct {
	name   string
	typ    dto.MetricType
	labels []string // label names on the aggregated endpoint
}

// dashboardFamilies are the families RabbitMQ-Overview and the Datadog check
// query, with rabbitmq_prometheus's types and label sets.
var dashboardFamilies = []family{
	{"rabbitmq_identity_info", dto.MetricType_UNTYPED, []string{"rabbitmq_node", "rabbitmq_cluster", "rabbitmq_cluster_permanent_id", "rabbitmq_endpoint"}},
	{"rabbitmq_build_info", dto.MetricType_UNTYPED, []string{"rabbitmq_version", "prometheus_plugin_version", "prometheus_client_version", "erlang_version", "product_name", "product_version"}},
	{"rabbitmq_connections", dto.MetricType_GAUGE, nil},
	{"rabbitmq_channels", dto.MetricType_GAUGE, nil},
	{"rabbitmq_consumers", dto.MetricType_GAUGE, nil},
	{"rabbitmq_queues", dto.MetricType_GAUGE, nil},
	{"rabbitmq_connections_opened_total", dto.MetricType_COUNTER, nil},
	{"rabbitmq_queue_messages_ready", dto.MetricType_GAUGE, nil},
	{"rabbitmq_queue_messages_unacked", dto.MetricType_GAUGE, nil},
	{"rabbitmq_queue_messages", dto.MetricType_GAUGE, nil},
	{"rabbitmq_queue_messages_ready_bytes", dto.MetricType_GAUGE, nil},
	{"rabbitmq_queue_consumers", dto.MetricType_GAUGE, nil},
	{"rabbitmq_queue_messages_ready_ram", dto.MetricType_GAUGE, nil},
	{"rabbitmq_queue_messages_paged_out", dto.MetricType_GAUGE, nil},
	{"rabbitmq_queue_messages_published_total", dto.MetricType_COUNTER, nil},
	{"rabbitmq_connection_incoming_bytes_total", dto.MetricType_COUNTER, nil},
	{"rabbitmq_connection_outgoing_bytes_total", dto.MetricType_COUNTER, nil},
	{"rabbitmq_global_messages_received_total", dto.MetricType_COUNTER, []string{"protocol"}},
	{"rabbitmq_global_messages_routed_total", dto.MetricType_COUNTER, []string{"protocol"}},
	{"rabbitmq_global_messages_confirmed_total", dto.MetricType_COUNTER, []string{"protocol"}},
	{"rabbitmq_global_messages_unroutable_dropped_total", dto.MetricType_COUNTER, []string{"protocol"}},
	{"rabbitmq_global_messages_unroutable_returned_total", dto.MetricType_COUNTER, []string{"protocol"}},
	{"rabbitmq_global_consumers", dto.MetricType_GAUGE, []string{"protocol"}},
	{"rabbitmq_global_messages_delivered_total", dto.MetricType_COUNTER, []string{"protocol", "queue_type"}},
	{"rabbitmq_global_messages_redelivered_total", dto.MetricType_COUNTER, []string{"protocol", "queue_type"}},
	{"rabbitmq_global_messages_acknowledged_total", dto.MetricType_COUNTER, []string{"protocol", "queue_type"}},
	{"rabbitmq_global_messages_delivered_consume_manual_ack_total", dto.MetricType_COUNTER, []string{"protocol", "queue_type"}},
	{"rabbitmq_global_messages_delivered_consume_auto_ack_total", dto.MetricType_COUNTER, []string{"protocol", "queue_type"}},
	{"rabbitmq_global_messages_delivered_get_manual_ack_total", dto.MetricType_COUNTER, []string{"protocol", "queue_type"}},
	{"rabbitmq_global_messages_delivered_get_auto_ack_total", dto.MetricType_COUNTER, []string{"protocol", "queue_type"}},
	{"rabbitmq_global_messages_get_empty_total", dto.MetricType_COUNTER, []string{"protocol", "queue_type"}},
	{"rabbitmq_global_messages_dead_lettered_expired_total", dto.MetricType_COUNTER, []string{"queue_type", "dead_letter_strategy"}},
	{"rabbitmq_global_messages_dead_lettered_maxlen_total", dto.MetricType_COUNTER, []string{"queue_type", "dead_letter_strategy"}},
	{"rabbitmq_process_resident_memory_bytes", dto.MetricType_GAUGE, nil},
	{"rabbitmq_alarms_memory_used_watermark", dto.MetricType_UNTYPED, nil},
	{"rabbitmq_disk_space_available_bytes", dto.MetricType_GAUGE, nil},
	{"rabbitmq_process_open_fds", dto.MetricType_GAUGE, nil},
	{"rabbitmq_process_max_fds", dto.MetricType_GAUGE, nil},
	{"rabbitmq_process_open_tcp_sockets", dto.MetricType_GAUGE, nil},
	{"rabbitmq_process_max_tcp_sockets", dto.MetricType_GAUGE, nil},
}

func TestMetricsDashboardFamilies(t *testing.T) {
	e := startEnv(t)
	f := e.scrape(t, "/metrics")
	for _, want := range dashboardFamilies {
		mf := f[want.name]
		if mf == nil {
			t.Errorf("%s missing", want.name)
			continue
		}
		if mf.GetType() != want.typ {
			t.Errorf("%s has type %v, want %v", want.name, mf.GetType(), want.typ)
		}
		if mf.GetHelp() == "" {
			t.Errorf("%s has no HELP", want.name)
		}
		for _, m := range mf.GetMetric() {
			if got := labelNames(m); !sameStrings(got, want.labels) {
				t.Errorf("%s has labels %v, want %v", want.name, got, want.labels)
			}
		}
	}
	// The permanent id is the cluster's internal_cluster_id, as in
	// rabbitmq_prometheus.
	if e.srv.InternalClusterID() == "" {
		t.Fatal("the server has no internal cluster id")
	}
	id := f.get(t, "rabbitmq_identity_info", map[string]string{
		"rabbitmq_node": "warren@testhost", "rabbitmq_cluster": "test-cluster",
		"rabbitmq_cluster_permanent_id": e.srv.InternalClusterID(), "rabbitmq_endpoint": "aggregated",
	})
	if id != 1 {
		t.Errorf("rabbitmq_identity_info = %v, want 1", id)
	}
	// A cluster name set on the server (management API, definitions) wins.
	if err := e.srv.SetClusterName("renamed"); err != nil {
		t.Fatal(err)
	}
	e.scrape(t, "/metrics").get(t, "rabbitmq_identity_info", map[string]string{"rabbitmq_cluster": "renamed"})
	f.get(t, "rabbitmq_build_info", map[string]string{
		"rabbitmq_version": "9.9.9-test", "product_version": "9.9.9-test", "product_name": "Warren", "erlang_version": "n/a",
	})
	// Both dead-letter strategies a classic queue can have are always there.
	for _, s := range []string{"disabled", "at_most_once"} {
		f.get(t, "rabbitmq_global_messages_dead_lettered_expired_total", map[string]string{"dead_letter_strategy": s})
	}
	// The memory limit is left out while the alarm is off (no watermark).
	if _, ok := f["rabbitmq_resident_memory_limit_bytes"]; ok {
		t.Error("rabbitmq_resident_memory_limit_bytes present without a watermark")
	}
	for _, name := range []string{"rabbitmq_disk_space_available_bytes", "rabbitmq_process_open_fds", "rabbitmq_process_max_fds", "rabbitmq_process_resident_memory_bytes",
		"rabbitmq_process_open_tcp_sockets", "rabbitmq_process_max_tcp_sockets"} {
		if v := f.get(t, name, nil); v <= 0 {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	// Go runtime and process collectors ride along.
	for _, name := range []string{"go_goroutines", "process_open_fds"} {
		if f[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
	if f["rabbitmq_queue_info"] != nil {
		t.Error("rabbitmq_queue_info is per-object only")
	}
}

// The node is named by server.Config.NodeName, and until a cluster name is
// set it names the cluster too, as in RabbitMQ.
func TestMetricsIdentityFromServerConfig(t *testing.T) {
	e := startEnv(t, func(c *server.Config, m *Config) {
		c.NodeName = "warren@seams-node"
		m.Options.ClusterName = ""
	})
	e.scrape(t, "/metrics").get(t, "rabbitmq_identity_info", map[string]string{
		"rabbitmq_node": "warren@seams-node", "rabbitmq_cluster": "warren@seams-node",
	})
}

func TestMetricsHTTP(t *testing.T) {
	e := startEnv(t)
	req, _ := http.NewRequest("GET", e.base+"/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ce := resp.Header.Get("Content-Encoding"); ce != "gzip" {
		t.Errorf("Content-Encoding %q, want gzip", ce)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want text/plain", ct)
	}
	for _, path := range []string{"/", "/metrics/bogus", "/api/overview"} {
		resp, err := e.client.Get(e.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", path, resp.Status)
		}
	}
}

func TestMetricsFollowTraffic(t *testing.T) {
	e := startEnv(t)
	_, ch := e.channel(t)
	if _, err := ch.QueueDeclare("work", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := ch.Publish("", "work", false, false, amqp091.Publishing{Body: []byte(fmt.Sprintf("m%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	// Unroutable: received, but neither routed nor published to a queue;
	// dropped without mandatory, returned with it.
	if err := ch.Publish("", "no-such-queue", false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("", "no-such-queue", true, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "/metrics", allOf(
		expect{"rabbitmq_queues", nil, 1},
		expect{"rabbitmq_connections", nil, 1},
		expect{"rabbitmq_channels", nil, 1},
		expect{"rabbitmq_global_messages_received_total", amqp091Label, 7},
		expect{"rabbitmq_global_messages_unroutable_dropped_total", amqp091Label, 1},
		expect{"rabbitmq_global_messages_unroutable_returned_total", amqp091Label, 1},
		expect{"rabbitmq_queue_messages_ready", nil, 5},
		expect{"rabbitmq_queue_messages_ready_bytes", nil, 10},
		expect{"rabbitmq_queue_messages_ready_ram", nil, 5},
		expect{"rabbitmq_queue_messages_paged_out", nil, 0},
		expect{"rabbitmq_queue_messages", nil, 5},
		expect{"rabbitmq_queue_messages_published_total", nil, 5},
		expect{"rabbitmq_global_messages_routed_total", amqp091Label, 5},
		expect{"rabbitmq_global_messages_delivered_total", classic, 0},
	))

	// Two deliveries to a manual-ack consumer with prefetch 2.
	if err := ch.Qos(2, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume("work", "c1", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	d1, d2 := <-deliveries, <-deliveries
	e.waitFor(t, "/metrics", allOf(
		expect{"rabbitmq_consumers", nil, 1},
		expect{"rabbitmq_queue_consumers", nil, 1},
		expect{"rabbitmq_global_consumers", amqp091Label, 1},
		expect{"rabbitmq_queue_messages_ready", nil, 3},
		expect{"rabbitmq_queue_messages_unacked", nil, 2},
		expect{"rabbitmq_queue_messages", nil, 5},
		expect{"rabbitmq_global_messages_delivered_total", classic, 2},
	))

	// Ack one, requeue the other: it comes back redelivered.
	if err := d1.Ack(false); err != nil {
		t.Fatal(err)
	}
	if err := d2.Nack(false, true); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		d := <-deliveries
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	// Each ack made room for the next message: m3 and m4 are now unacked,
	// and six deliveries were made, one of them a redelivery.
	f := e.waitFor(t, "/metrics", allOf(
		expect{"rabbitmq_global_messages_acknowledged_total", classic, 3},
		expect{"rabbitmq_global_messages_delivered_total", classic, 6},
		expect{"rabbitmq_global_messages_delivered_consume_manual_ack_total", classic, 6},
		expect{"rabbitmq_global_messages_delivered_consume_auto_ack_total", classic, 0},
		expect{"rabbitmq_global_messages_redelivered_total", classic, 1},
		expect{"rabbitmq_queue_messages_unacked", nil, 2},
		expect{"rabbitmq_queue_messages_ready", nil, 0},
	))
	if v := f.get(t, "rabbitmq_connection_incoming_bytes_total", nil); v < 100 {
		t.Errorf("incoming bytes %v, want the publishes' bytes at least", v)
	}
	if v := f.get(t, "rabbitmq_connection_outgoing_bytes_total", nil); v < 100 {
		t.Errorf("outgoing bytes %v, want the deliveries' bytes at least", v)
	}
	if v := f.get(t, "rabbitmq_connections_opened_total", nil); v != 1 {
		t.Errorf("connections opened %v, want 1", v)
	}

	// basic.get counts as a delivery too, as in RabbitMQ.
	if _, err := ch.QueueDeclare("polled", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("", "polled", false, false, amqp091.Publishing{Body: []byte("p")}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "/metrics", allOf(expect{"rabbitmq_queue_messages_ready", nil, 1}))
	if _, ok, err := ch.Get("polled", true); err != nil || !ok {
		t.Fatalf("basic.get: ok=%v err=%v", ok, err)
	}
	if _, ok, err := ch.Get("polled", true); err != nil || ok {
		t.Fatalf("basic.get on an empty queue: ok=%v err=%v", ok, err)
	}
	e.waitFor(t, "/metrics", allOf(
		expect{"rabbitmq_global_messages_delivered_total", classic, 7},
		expect{"rabbitmq_global_messages_delivered_get_auto_ack_total", classic, 1},
		expect{"rabbitmq_global_messages_delivered_get_manual_ack_total", classic, 0},
		expect{"rabbitmq_global_messages_get_empty_total", classic, 1},
		expect{"rabbitmq_global_messages_routed_total", amqp091Label, 6},
		expect{"rabbitmq_queue_messages_ready", nil, 0},
	))
}

func TestMetricsCountersSurviveDeletes(t *testing.T) {
	e := startEnv(t)
	conn, ch := e.channel(t)
	for _, q := range []string{"a", "b"} {
		if _, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.ExchangeDeclare("x", "fanout", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("a", "", "x", false, nil); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := ch.Publish("x", "", false, false, amqp091.Publishing{Body: []byte("to-a")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Publish("", "b", false, false, amqp091.Publishing{Body: []byte("to-b")}); err != nil {
		t.Fatal(err)
	}
	before := e.waitFor(t, "/metrics", allOf(
		expect{"rabbitmq_queue_messages_published_total", nil, 4},
		expect{"rabbitmq_global_messages_routed_total", amqp091Label, 4},
		expect{"rabbitmq_global_messages_received_total", amqp091Label, 4},
	))
	in := before.get(t, "rabbitmq_connection_incoming_bytes_total", nil)

	// Delete the queue and exchange that counted most of it, and close the
	// connection that carried all of it: the node-wide counters must not go
	// down.
	if _, err := ch.QueueDelete("a", false, false, false); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDelete("x", false, false); err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	_, ch2 := e.channel(t)
	if err := ch2.Publish("", "b", false, false, amqp091.Publishing{Body: []byte("again")}); err != nil {
		t.Fatal(err)
	}
	after := e.waitFor(t, "/metrics", allOf(
		expect{"rabbitmq_queues", nil, 1},
		expect{"rabbitmq_queue_messages_ready", nil, 2},
		expect{"rabbitmq_queue_messages_published_total", nil, 5},
		expect{"rabbitmq_global_messages_routed_total", amqp091Label, 5},
		expect{"rabbitmq_global_messages_received_total", amqp091Label, 5},
		expect{"rabbitmq_connections", nil, 1},
		expect{"rabbitmq_channels", nil, 1},
		expect{"rabbitmq_connections_opened_total", nil, 2},
	))
	if v := after.get(t, "rabbitmq_connection_incoming_bytes_total", nil); v < in {
		t.Errorf("incoming bytes went down from %v to %v", in, v)
	}
}

func TestMetricsPerObject(t *testing.T) {
	e := startEnv(t)
	if _, err := e.srv.PutVhost("other", server.VhostMeta{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.SetPermission("guest", "other", server.Permission{Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
		t.Fatal(err)
	}
	_, ch := e.channel(t)
	if _, err := ch.QueueDeclare("q1", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	// Queue names are AMQP short strings: bytes, not necessarily UTF-8.
	if _, err := ch.QueueDeclare("bad\xffname", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("", "q1", false, false, amqp091.Publishing{Body: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	c2, err := amqp091.Dial(strings.TrimSuffix(e.amqpURL, "/") + "/other")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	ch2, err := c2.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch2.QueueDeclare("q1", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	root := map[string]string{"vhost": "/", "queue": "q1"}
	other := map[string]string{"vhost": "other", "queue": "q1"}
	f := e.waitFor(t, "/metrics/per-object", allOf(
		expect{"rabbitmq_queue_messages_ready", root, 1},
		expect{"rabbitmq_queue_messages_published_total", root, 1},
		expect{"rabbitmq_queue_messages_ready_ram", root, 1},
		expect{"rabbitmq_queue_messages_paged_out", root, 0},
		expect{"rabbitmq_queue_messages_ready", other, 0},
		expect{"rabbitmq_queue_messages_ready", map[string]string{"vhost": "/", "queue": "bad\uFFFDname"}, 0},
		expect{"rabbitmq_queues", nil, 3},
		expect{"rabbitmq_connections", nil, 2},
	))
	f.get(t, "rabbitmq_identity_info", map[string]string{"rabbitmq_endpoint": "per-object"})
	f.get(t, "rabbitmq_queue_info", map[string]string{"vhost": "other", "queue": "q1", "queue_type": "rabbit_classic_queue", "membership": "leader"})
	for _, name := range []string{"rabbitmq_queue_messages_ready", "rabbitmq_queue_messages_unacked", "rabbitmq_queue_messages", "rabbitmq_queue_consumers"} {
		if n := len(f[name].GetMetric()); n != 3 {
			t.Errorf("%s has %d series, want one per queue (3)", name, n)
		}
		for _, m := range f[name].GetMetric() {
			if got := labelNames(m); !sameStrings(got, []string{"vhost", "queue"}) {
				t.Errorf("%s labels %v, want vhost, queue", name, got)
			}
		}
	}
	conns := f["rabbitmq_connection_incoming_bytes_total"].GetMetric()
	if len(conns) != 2 {
		t.Fatalf("%d connection series, want 2", len(conns))
	}
	for _, m := range conns {
		name := labelsOf(m)["channel"]
		if !strings.Contains(name, " -> "+e.srv.Addr().String()) || value(m) <= 0 {
			t.Errorf("connection series channel=%q value %v", name, value(m))
		}
	}

	// The aggregated endpoint has no per-object series at the same time.
	agg := e.scrape(t, "/metrics")
	if n := len(agg["rabbitmq_queue_messages_ready"].GetMetric()); n != 1 {
		t.Errorf("aggregated rabbitmq_queue_messages_ready has %d series", n)
	}
}

func TestMetricsPerObjectOption(t *testing.T) {
	e := startEnv(t, func(_ *server.Config, m *Config) { m.Options.PerObject = true })
	_, ch := e.channel(t)
	if _, err := ch.QueueDeclare("q", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	f := e.scrape(t, "/metrics")
	f.get(t, "rabbitmq_identity_info", map[string]string{"rabbitmq_endpoint": "per-object"})
	f.get(t, "rabbitmq_queue_messages_ready", map[string]string{"vhost": "/", "queue": "q"})
}

func TestMetricsPagedOut(t *testing.T) {
	e := startEnv(t, func(c *server.Config, _ *Config) {
		c.QueueHeadMessages = 4
		c.Flush = msgstore.FlushOS
	})
	_, ch := e.channel(t)
	if _, err := ch.QueueDeclare("deep", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if err := ch.Publish("", "deep", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte("0123456789")}); err != nil {
			t.Fatal(err)
		}
	}
	deep := map[string]string{"vhost": "/", "queue": "deep"}
	f := e.waitFor(t, "/metrics/per-object", allOf(expect{"rabbitmq_queue_messages_ready", deep, 20}))
	// Paged messages count at their stored size, bodies plus record headers.
	if v := f.get(t, "rabbitmq_queue_messages_ready_bytes", deep); v < 200 {
		t.Errorf("ready bytes %v, want at least the 200 body bytes", v)
	}
	ram := f.get(t, "rabbitmq_queue_messages_ready_ram", deep)
	out := f.get(t, "rabbitmq_queue_messages_paged_out", deep)
	if out == 0 || ram+out != 20 {
		t.Errorf("ready in RAM %v + paged out %v, want 20 with some paged out", ram, out)
	}
	agg := e.scrape(t, "/metrics")
	if v := agg.get(t, "rabbitmq_queue_messages_paged_out", nil); v != out {
		t.Errorf("aggregated paged out %v, per-object %v", v, out)
	}
}

func TestMetricsDeadLettered(t *testing.T) {
	e := startEnv(t)
	_, ch := e.channel(t)
	if _, err := ch.QueueDeclare("dead", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	// Expired with a dead-letter exchange: at_most_once.
	if _, err := ch.QueueDeclare("ttl", false, false, false, false, amqp091.Table{
		"x-message-ttl": int32(0), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead",
	}); err != nil {
		t.Fatal(err)
	}
	// Dropped from the head at max-length without one: disabled.
	if _, err := ch.QueueDeclare("short", false, false, false, false, amqp091.Table{"x-max-length": int32(1)}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("", "ttl", false, false, amqp091.Publishing{Body: []byte("expires")}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := ch.Publish("", "short", false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	dl := func(strategy string) map[string]string {
		return map[string]string{"queue_type": "rabbit_classic_queue", "dead_letter_strategy": strategy}
	}
	e.waitFor(t, "/metrics", allOf(
		expect{"rabbitmq_global_messages_dead_lettered_expired_total", dl("at_most_once"), 1},
		expect{"rabbitmq_global_messages_dead_lettered_expired_total", dl("disabled"), 0},
		expect{"rabbitmq_global_messages_dead_lettered_maxlen_total", dl("disabled"), 2},
		expect{"rabbitmq_global_messages_dead_lettered_maxlen_total", dl("at_most_once"), 0},
		// The dead letter reached its queue: 1 published there, 3 to short.
		expect{"rabbitmq_queue_messages_ready", nil, 2},
	))
}

func TestMetricsMemoryAlarm(t *testing.T) {
	e := startEnv(t)
	e.srv.SetMemoryHighWatermark(1) // any process uses more than a byte
	e.waitFor(t, "/metrics", allOf(
		expect{"rabbitmq_alarms_memory_used_watermark", nil, 1},
		expect{"rabbitmq_resident_memory_limit_bytes", nil, 1},
	))
	e.srv.SetMemoryHighWatermark(1 << 50)
	e.waitFor(t, "/metrics", allOf(
		expect{"rabbitmq_alarms_memory_used_watermark", nil, 0},
		expect{"rabbitmq_resident_memory_limit_bytes", nil, 1 << 50},
	))
}

func TestMetricsDiskAlarm(t *testing.T) {
	e := startEnv(t)
	e.srv.SetDiskFreeLimit(0) // off
	if f := e.scrape(t, "/metrics"); f["rabbitmq_disk_space_available_limit_bytes"] != nil {
		t.Error("rabbitmq_disk_space_available_limit_bytes present with the disk alarm off")
	}
	e.srv.SetDiskFreeLimit(1 << 62) // more than any disk has free
	e.waitFor(t, "/metrics", allOf(
		expect{"rabbitmq_alarms_free_disk_space_watermark", nil, 1},
		expect{"rabbitmq_disk_space_available_limit_bytes", nil, 1 << 62},
	))
	e.srv.SetDiskFreeLimit(1)
	e.waitFor(t, "/metrics", allOf(
		expect{"rabbitmq_alarms_free_disk_space_watermark", nil, 0},
		expect{"rabbitmq_disk_space_available_limit_bytes", nil, 1},
	))
}

func TestExporterLifecycle(t *testing.T) {
	scfg := server.DefaultConfig()
	scfg.AMQPListen = "127.0.0.1:0"
	scfg.DataDir = t.TempDir() // never the source tree's ./data
	scfg.Logger = testLogger()
	srv, err := server.New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Options.Logger = scfg.Logger
	exp, err := New(srv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if exp.Addr() != nil {
		t.Error("Addr before Start is not nil")
	}
	if err := exp.Start(); err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(); !errors.Is(err, ErrStarted) {
		t.Errorf("second Start: %v, want ErrStarted", err)
	}
	addr := exp.Addr().String()
	if err := exp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := exp.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := exp.Start(); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("listener still serving after Close")
	}

	// Close before Start is harmless, and taken addresses are reported.
	unstarted, err := New(srv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := unstarted.Close(); err != nil {
		t.Errorf("Close before Start: %v", err)
	}
}

func TestExporterListenError(t *testing.T) {
	e := startEnv(t)
	cfg := DefaultConfig()
	cfg.Listen = e.exp.Addr().String() // taken
	exp, err := New(e.srv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(); err == nil || !strings.Contains(err.Error(), cfg.Listen) {
		exp.Close()
		t.Fatalf("Start on a taken address: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	if err := good.Validate(); err != nil {
		t.Fatalf("DefaultConfig invalid: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"empty listen", func(c *Config) { c.Listen = "" }, "Listen is empty"},
		{"bad listen", func(c *Config) { c.Listen = "15692" }, "Listen \"15692\""},
		{"no product", func(c *Config) { c.Options.ProductName = "" }, "ProductName is empty"},
		{"no logger", func(c *Config) { c.Options.Logger = nil }, "Logger is nil"},
		{"header timeout", func(c *Config) { c.ReadHeaderTimeout = 0 }, "ReadHeaderTimeout"},
		{"write timeout", func(c *Config) { c.WriteTimeout = -1 }, "WriteTimeout"},
		{"idle timeout", func(c *Config) { c.IdleTimeout = 0 }, "IdleTimeout"},
		{"shutdown timeout", func(c *Config) { c.ShutdownTimeout = -1 }, "ShutdownTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error mentioning %q", err, tt.want)
			}
			if _, err := New(nil, c); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
}

func TestHandlerPanicsOnInvalidOptions(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "ProductName") {
			t.Fatalf("recover() = %v, want a panic naming ProductName", r)
		}
	}()
	Handler(nil, Options{ClusterName: "c", Logger: testLogger()})
}
