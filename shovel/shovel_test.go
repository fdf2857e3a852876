package shovel_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// On-confirm moves every message exactly once from one local queue to
// another, also when the shovel is restarted (through the management API)
// and updated while it moves them.
func TestShovelLocalQueueOnConfirmExactlyOnce(t *testing.T) {
	b := startBroker(t)
	const n = 20000
	publishN(t, b.url, "sh-src", "m", n)
	b.putShovel("mover", map[string]any{"src-uri": "amqp://", "src-queue": "sh-src",
		"dest-uri": "amqp://", "dest-queue": "sh-dest", "src-prefetch-count": 200})
	b.waitState(t, "mover", "running")
	waitFor(t, 30*time.Second, "some messages moved", func() bool { return queueLength(t, b.url, "sh-dest") > 0 })
	if code, body := b.getJSON(t, http.MethodDelete, "/api/shovels/vhost/%2F/mover/restart"); code != http.StatusNoContent {
		t.Fatalf("restart: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "more messages moved", func() bool { return queueLength(t, b.url, "sh-dest") > n/4 })
	// An update restarts the shovel too (create → start, update → restart).
	b.putShovel("mover", map[string]any{"src-uri": "amqp://", "src-queue": "sh-src",
		"dest-uri": "amqp://", "dest-queue": "sh-dest", "src-prefetch-count": 50})
	waitFor(t, 60*time.Second, "every message moved", func() bool {
		return queueLength(t, b.url, "sh-src") == 0 && queueLength(t, b.url, "sh-dest") >= n
	})
	b.stop() // nothing more moves: count what arrived
	b.start()
	seen := drainIDs(t, b.url, "sh-dest")
	if len(seen) != n {
		t.Errorf("%d distinct messages arrived, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("message %s arrived %d times", id, c)
		}
	}
}

// A shovel with src-delete-after moves that many messages, or the queue's
// length when it started, and then deletes its own parameter.
func TestShovelDeleteAfter(t *testing.T) {
	b := startBroker(t)
	publishN(t, b.url, "da-src", "m", 100)
	b.putShovel("ten", map[string]any{"src-uri": "amqp://", "src-queue": "da-src",
		"dest-uri": "amqp://", "dest-queue": "da-ten", "src-delete-after": 10})
	waitFor(t, 15*time.Second, "the parameter deleted", func() bool { return len(b.srv.Parameters()) == 0 })
	if got := queueLength(t, b.url, "da-ten"); got != 10 {
		t.Errorf("delete-after 10 moved %d messages", got)
	}
	b.putShovel("rest", map[string]any{"src-uri": "amqp://", "src-queue": "da-src",
		"dest-uri": "amqp://", "dest-queue": "da-rest", "src-delete-after": "queue-length"})
	waitFor(t, 15*time.Second, "the parameter deleted", func() bool { return len(b.srv.Parameters()) == 0 })
	if got := queueLength(t, b.url, "da-rest"); got != 90 {
		t.Errorf("delete-after queue-length moved %d messages, want the 90 left", got)
	}
	if st := b.status(t, "rest"); st != nil {
		t.Errorf("a finished shovel is still listed: %v", st)
	}
}

// A shovel to another broker reconnects after that broker restarts and
// moves what was published meanwhile.
func TestShovelReconnectsAfterDestinationRestarts(t *testing.T) {
	src, dest := startBroker(t), startBroker(t)
	b := src
	b.putShovel("remote", map[string]any{"src-uri": "amqp://", "src-queue": "rc-src",
		"dest-uri": dest.url, "dest-queue": "rc-dest", "reconnect-delay": 0.2})
	b.waitState(t, "remote", "running")
	publishN(t, src.url, "rc-src", "a", 100)
	waitFor(t, 15*time.Second, "the first batch moved", func() bool { return queueLength(t, dest.url, "rc-dest") == 100 })
	dest.stop()
	st := b.waitState(t, "remote", "terminated")
	if reason, _ := st["reason"].(string); reason == "" {
		t.Errorf("a terminated shovel shows no reason: %v", st)
	}
	publishN(t, src.url, "rc-src", "b", 100)
	dest.start()
	b.waitState(t, "remote", "running")
	waitFor(t, 15*time.Second, "the second batch moved", func() bool {
		return queueLength(t, src.url, "rc-src") == 0 && queueLength(t, dest.url, "rc-dest") >= 200
	})
	// At least once: the destination went down with confirms owed, so
	// some of the first batch may arrive twice.
	seen := drainIDs(t, dest.url, "rc-dest")
	for _, batch := range []string{"a", "b"} {
		for i := 0; i < 100; i++ {
			if id := fmt.Sprintf("%s-%d", batch, i); seen[id] == 0 {
				t.Errorf("message %s lost", id)
			}
		}
	}
}

// GET /api/shovels shows a running shovel as RabbitMQ does, the URIs
// without credentials; deleting its parameter stops it.
func TestShovelStatusAndDelete(t *testing.T) {
	src, dest := startBroker(t), startBroker(t)
	src.putShovel("st", map[string]any{"src-uri": "amqp://", "src-exchange": "amq.topic", "src-exchange-key": "k.#",
		"dest-uri": dest.url, "dest-exchange": "amq.direct", "dest-exchange-key": "zz"})
	st := src.waitState(t, "st", "running")
	want := map[string]any{"name": "st", "vhost": "/", "type": "dynamic", "state": "running",
		"node": src.srv.NodeName(), "src_uri": "amqp://", "src_protocol": "amqp091", "dest_protocol": "amqp091",
		"dest_uri":     strings.Replace(dest.url, "guest:guest@", "", 1),
		"src_exchange": "amq.topic", "src_exchange_key": "k.#", "dest_exchange": "amq.direct", "dest_exchange_key": "zz"}
	for k, v := range want {
		if st[k] != v {
			t.Errorf("%s = %v, want %v", k, st[k], v)
		}
	}
	if _, err := time.Parse(time.DateTime, st["timestamp"].(string)); err != nil {
		t.Errorf("timestamp %v: %v", st["timestamp"], err)
	}
	if code, body := src.getJSON(t, http.MethodGet, "/api/shovels/vhost/%2F/nosuch"); code != http.StatusNotFound {
		t.Errorf("GET an unknown shovel: %d %s", code, body)
	}
	if code, body := src.getJSON(t, http.MethodDelete, "/api/shovels/vhost/%2F/nosuch/restart"); code != http.StatusNotFound {
		t.Errorf("restart an unknown shovel: %d %s", code, body)
	}

	dch := channel(t, dest.url)
	q, err := dch.QueueDeclare("st-dest", false, false, false, false, nil)
	must(t, err)
	must(t, dch.QueueBind(q.Name, "zz", "amq.direct", false, nil))
	sch := channel(t, src.url)
	must(t, sch.Publish("amq.topic", "k.1", false, false, amqpMsg("one")))
	waitFor(t, 10*time.Second, "the message moved", func() bool { return queueLength(t, dest.url, "st-dest") == 1 })

	if code, body := src.getJSON(t, http.MethodDelete, "/api/shovels/vhost/%2F/st"); code != http.StatusNoContent {
		t.Fatalf("DELETE the shovel: %d %s", code, body)
	}
	waitFor(t, 10*time.Second, "the shovel gone from the list", func() bool { return src.status(t, "st") == nil })
	waitFor(t, 10*time.Second, "its connection to the destination closed", func() bool { return len(dest.srv.Connections()) == 1 })
	must(t, sch.Publish("amq.topic", "k.2", false, false, amqpMsg("two")))
	if got := queueLength(t, dest.url, "st-dest"); got != 1 {
		t.Errorf("a deleted shovel still moves messages: %d at the destination", got)
	}
}

// AMQP 1.0 shovels are stored (the parameter is valid) but not run, and the
// status says why.
func TestShovelAMQP10Unsupported(t *testing.T) {
	b := startBroker(t)
	b.putShovel("one0", map[string]any{"src-protocol": "amqp10", "src-uri": "amqp://", "src-address": "a",
		"dest-uri": "amqp://", "dest-queue": "x"})
	st := b.waitState(t, "one0", "terminated")
	if reason, _ := st["reason"].(string); !strings.Contains(reason, "AMQP 1.0") {
		t.Errorf("reason %q", reason)
	}
}

// A shovel moves messages from Warren to a real RabbitMQ 3.10 node and
// another brings them back, every one once.
func TestShovelToRabbitMQAndBack(t *testing.T) {
	rabbit := rabbitURL(t)
	if rabbit == "" {
		t.Skip("no RabbitMQ node at 127.0.0.1:5699 (the shared reference node); skipping")
	}
	// The shared node's default vhost; the queue's name says whose it is.
	rch := channel(t, rabbit)
	t.Cleanup(func() {
		if _, err := channel(t, rabbit).QueueDelete("shovelm-mid", false, false, false); err != nil {
			t.Errorf("deleting the RabbitMQ queue: %v", err)
		}
	})
	if _, err := rch.QueueDelete("shovelm-mid", false, false, false); err != nil {
		t.Fatalf("clearing the RabbitMQ queue: %v", err)
	}
	b := startBroker(t)
	const n = 2000
	publishN(t, b.url, "rb-out", "r", n)
	b.putShovel("there", map[string]any{"src-uri": "amqp://", "src-queue": "rb-out",
		"dest-uri": rabbit, "dest-queue": "shovelm-mid", "dest-add-forward-headers": true})
	b.putShovel("back", map[string]any{"src-uri": rabbit, "src-queue": "shovelm-mid",
		"dest-uri": "amqp://", "dest-queue": "rb-back"})
	b.waitState(t, "there", "running")
	b.waitState(t, "back", "running")
	waitFor(t, 60*time.Second, "every message back", func() bool { return queueLength(t, b.url, "rb-back") >= n })
	ch := channel(t, b.url)
	m, ok, err := ch.Get("rb-back", false)
	must(t, err)
	if !ok {
		t.Fatal("no message back")
	}
	hops, _ := m.Headers["x-shovelled"].([]any)
	if len(hops) != 1 {
		t.Fatalf("x-shovelled = %v", m.Headers["x-shovelled"])
	}
	hop, _ := hops[0].(amqp.Table)
	// As RabbitMQ 3.10 writes it (seen on the reference node).
	want := amqp.Table{"shovel-name": "there", "shovel-type": "dynamic", "shovel-vhost": "/",
		"shovelled-by": b.srv.ClusterName(), "src-uri": "amqp://", "src-queue": "rb-out",
		"dest-uri": strings.Replace(rabbit, "guest:guest@", "", 1), "dest-queue": "shovelm-mid"}
	for k, v := range want {
		if hop[k] != v {
			t.Errorf("x-shovelled %s = %v, want %v", k, hop[k], v)
		}
	}
	if len(hop) != len(want) {
		t.Errorf("x-shovelled entry %v, want %v", hop, want)
	}
	must(t, m.Nack(false, true))
	seen := drainIDs(t, b.url, "rb-back")
	if len(seen) != n {
		t.Errorf("%d distinct messages came back, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("message %s came back %d times", id, c)
		}
	}
}

// A stored shovel starts again when the broker restarts.
func TestShovelStartsAtBoot(t *testing.T) {
	b := startBroker(t)
	b.putShovel("boot", map[string]any{"src-uri": "amqp://", "src-queue": "bt-src",
		"dest-uri": "amqp://", "dest-queue": "bt-dest"})
	b.waitState(t, "boot", "running")
	b.stop()
	b.start()
	b.waitState(t, "boot", "running")
	publishN(t, b.url, "bt-src", "m", 10)
	waitFor(t, 10*time.Second, "the messages moved", func() bool { return queueLength(t, b.url, "bt-dest") == 10 })
}

// Queues already there with arguments the shovel's definition does not
// name (imported definitions, a queue declared by its application) are
// used as they are, as the plugin's ensure_queue does with its passive
// declare, instead of failing the shovel with 406 inequivalent arg.
func TestShovelUsesExistingQueuesWithOtherArguments(t *testing.T) {
	b := startBroker(t)
	ch := channel(t, b.url)
	for _, q := range []string{"ea-src", "ea-dest"} {
		_, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-max-length": int64(1000)})
		must(t, err)
	}
	must(t, ch.Confirm(false))
	for i := 0; i < 10; i++ {
		dc, err := ch.PublishWithDeferredConfirm("", "ea-src", false, false, amqpMsg("m"))
		must(t, err)
		if !dc.Wait() {
			t.Fatal("publish nacked")
		}
	}
	b.putShovel("existing", map[string]any{"src-uri": "amqp://", "src-queue": "ea-src",
		"dest-uri": "amqp://", "dest-queue": "ea-dest", "src-delete-after": "queue-length"})
	waitFor(t, 15*time.Second, "the shovel done and deleted", func() bool { return len(b.srv.Parameters()) == 0 })
	if got := queueLength(t, b.url, "ea-dest"); got != 10 {
		t.Errorf("moved %d messages, want 10", got)
	}
}
