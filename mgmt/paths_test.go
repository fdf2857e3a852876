package mgmt

import (
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/server"
)

// TestMgmtEveryPublishPathReachesAStream sends one message into a stream by
// each way a message enters queues: dead-lettered from a classic queue,
// published through the API, and published over AMQP. A consumer from
// "first" must get all three, in that order, before and after a restart.
// (RabbitMQ 3.10.8 delivers only the last two: it drops a classic queue's
// dead letter bound for a stream. Warren does better, as issue 13 asks.)
func TestMgmtEveryPublishPathReachesAStream(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, func(s *server.Config, _ *Config) { s.DataDir = dir })
	ch := e.channel(e.dial(""))
	if _, err := ch.QueueDeclare("s", true, false, false, false, amqp091.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	dlx := amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "s"}
	if _, err := ch.QueueDeclare("src", true, false, false, false, dlx); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 2))
	publishConfirmed(t, ch, confirms, "src", "dead")
	d, ok, err := ch.Get("src", false)
	if err != nil || !ok {
		t.Fatalf("basic.get src: ok %v err %v", ok, err)
	}
	if err := d.Reject(false); err != nil {
		t.Fatal(err)
	}
	// The channel handles its frames in order: once this declare returns, the
	// rejection (and so the dead-lettering) is done.
	if _, err := ch.QueueDeclarePassive("src", true, false, false, false, dlx); err != nil {
		t.Fatal(err)
	}
	pub := map[string]any{"routing_key": "s", "payload": "api", "payload_encoding": "string", "properties": map[string]any{"delivery_mode": 2}}
	if r := e.must(e.do("POST", "/api/exchanges/%2F/amq.default/publish", pub), 200, "API publish").object(t); r["routed"] != true {
		t.Fatalf("API publish: %v", r)
	}
	publishConfirmed(t, ch, confirms, "s", "amqp")

	want := []string{"dead", "api", "amqp"}
	expectStreamFromFirst(t, e, want)
	// The log holds the three; the queue itself holds none (a message
	// enqueued as if the stream were a classic queue shows in messages_ready).
	if q := e.must(e.get("/api/queues/%2F/s"), 200, "stream").object(t); num(t, q["next_offset"]) != 3 || num(t, q["messages_ready"]) != 0 {
		t.Errorf("stream next_offset %v messages_ready %v, want 3 and 0", q["next_offset"], q["messages_ready"])
	}

	e.api.Close()
	e.srv.Close()
	again := newEnv(t, func(s *server.Config, _ *Config) { s.DataDir = dir })
	expectStreamFromFirst(t, again, want)
}

func publishConfirmed(t *testing.T, ch *amqp091.Channel, confirms <-chan amqp091.Confirmation, queue, body string) {
	t.Helper()
	if err := ch.Publish("", queue, false, false, amqp091.Publishing{Body: []byte(body), DeliveryMode: 2}); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-confirms:
		if !c.Ack {
			t.Fatalf("publish %q to %s nacked", body, queue)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no confirm for %q to %s", body, queue)
	}
}

// expectStreamFromFirst consumes stream s from its first offset and checks
// that it holds exactly want, at offsets 0, 1, ...
func expectStreamFromFirst(t *testing.T, e *env, want []string) {
	t.Helper()
	ch := e.channel(e.dial(""))
	if err := ch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	d, err := ch.Consume("s", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := range want {
		select {
		case m := <-d:
			got = append(got, string(m.Body))
			if off := m.Headers["x-stream-offset"]; off != int64(i) {
				t.Errorf("%q at offset %v, want %d", m.Body, off, i)
			}
			if err := m.Ack(false); err != nil {
				t.Fatal(err)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("stream consumer got %q, want %q", got, want)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stream consumer got %q, want %q", got, want)
	}
	select {
	case m := <-d:
		t.Fatalf("unexpected delivery %q", m.Body)
	case <-time.After(100 * time.Millisecond):
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMgmtGetCountsPagedMessages fetches from a durable queue whose messages
// are mostly paged out (a head of 4, 300 messages) through basic.get and the API's get.
// Each answer's message count is, as in RabbitMQ, the number of messages left
// in the queue after the one returned (RabbitMQ 3.10.8 with 5 messages:
// basic.get says 4; then an API get of 2 says 3 and 2; then basic.get says 1).
func TestMgmtGetCountsPagedMessages(t *testing.T) {
	e := newEnv(t, func(s *server.Config, _ *Config) { s.QueueHeadMessages = 4 })
	ch := e.channel(e.dial(""))
	if _, err := ch.QueueDeclare("dq", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	// More than a head and what a take pages in at once (64).
	const n = 300
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, n))
	for i := range n {
		if err := ch.Publish("", "dq", false, false, amqp091.Publishing{Body: []byte(fmt.Sprintf("m%03d", i)), DeliveryMode: 2}); err != nil {
			t.Fatal(err)
		}
	}
	awaitConfirms(t, confirms, n)
	q := e.must(e.get("/api/queues/%2F/dq"), 200, "queue").object(t)
	if paged := num(t, q["messages_paged_out"]); paged < n/2 {
		t.Fatalf("messages_paged_out %v: the queue does not page, the test tests nothing", paged)
	}

	left := n
	amqpGet := func() {
		t.Helper()
		d, ok, err := ch.Get("dq", true)
		if err != nil || !ok {
			t.Fatalf("basic.get: ok %v err %v", ok, err)
		}
		left--
		if want := fmt.Sprintf("m%03d", n-left-1); string(d.Body) != want || d.MessageCount != uint32(left) {
			t.Fatalf("basic.get: %q with message-count %d, want %q with %d", d.Body, d.MessageCount, want, left)
		}
	}
	amqpGet()
	got := e.must(e.do("POST", "/api/queues/%2F/dq/get", map[string]any{"count": 3, "ackmode": "ack_requeue_false", "encoding": "auto"}), 200, "API get").array(t)
	if len(got) != 3 {
		t.Fatalf("API get returned %d messages, want 3", len(got))
	}
	for _, m := range got {
		left--
		if want := fmt.Sprintf("m%03d", n-left-1); field(m, "payload") != want || num(t, field(m, "message_count")) != float64(left) {
			t.Fatalf("API get: %v with message_count %v, want %q with %d", field(m, "payload"), field(m, "message_count"), want, left)
		}
	}
	amqpGet()
}

// TestMgmtGetFromStreamRefused checks the API's get on a stream answers as
// RabbitMQ 3.10.8 does: 400, "540 basic.get not supported by stream queues
// queue 's' in vhost '/'", the same refusal basic.get gets.
func TestMgmtGetFromStreamRefused(t *testing.T) {
	e := newEnv(t)
	args := map[string]any{"x-queue-type": "stream"}
	e.must(e.put("/api/queues/%2F/s", map[string]any{"durable": true, "arguments": args}), 201, "declare stream")
	pub := map[string]any{"routing_key": "s", "payload": "x", "payload_encoding": "string", "properties": map[string]any{}}
	e.must(e.do("POST", "/api/exchanges/%2F/amq.default/publish", pub), 200, "publish")
	r := e.do("POST", "/api/queues/%2F/s/get", map[string]any{"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"})
	body := e.must(r, 400, "get from a stream").object(t)
	if want := "540 basic.get not supported by stream queues queue 's' in vhost '/'"; body["error"] != "bad_request" || body["reason"] != want {
		t.Fatalf("get from a stream: %s, want bad_request %q", r.body, want)
	}
	ch := e.channel(e.dial(""))
	_, _, err := ch.Get("s", false)
	if ae, ok := err.(*amqp091.Error); !ok || ae.Code != 540 || ae.Reason != "NOT_IMPLEMENTED - basic.get not supported by stream queues queue 's' in vhost '/'" {
		t.Fatalf("basic.get on a stream: %v", err)
	}
}
