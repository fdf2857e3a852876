package main

import (
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/server"
)

// rabbitGetAll gets every ready message of queue on RabbitMQ, by message id.
func rabbitIDs(t testing.TB, ch *amqp091.Channel, queue string) []string {
	t.Helper()
	var ids []string
	for {
		m, ok, err := ch.Get(queue, true)
		fedMust(t, err)
		if !ok {
			sort.Strings(ids)
			return ids
		}
		ids = append(ids, m.MessageId)
	}
}

// waitRabbitReady polls a passive declare until queue holds n ready
// messages on RabbitMQ (passive declare counts are current, the API's lag).
func waitRabbitReady(t testing.TB, ch *amqp091.Channel, queue string, n int) {
	t.Helper()
	fedWait(t, 20*time.Second, "RabbitMQ queue "+queue+" holding messages", func() bool {
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		fedMust(t, err)
		return q.Messages == n
	})
}

// warrenURI is w's AMQP URI as RabbitMQ reads it: with no path, vhost
// "/"; "amqp://host:port/" would name the vhost "" and be not_allowed.
func warrenURI(w *fedBroker) string { return strings.TrimSuffix(w.url, "/") }

// Federation between Warren and a private RabbitMQ 3.10.8 node, each
// direction and kind, on one RabbitMQ node: each subtest has its own Warren
// node and its own names.
func TestFederationWithRabbitMQ(t *testing.T) {
	rmq := startRabbit(t)
	rch := rmq.channel()

	// RabbitMQ upstream, Warren downstream: Warren's link declares the
	// upstream queue and x-federation-upstream exchange on RabbitMQ, which
	// the plugin's exchange type must accept, and consumes that queue.
	t.Run("ExchangeRabbitToWarren", func(t *testing.T) {
		rmq := rmq.in(t)
		w := startFedBroker(t, "wdown")
		wch := w.channel()
		fedMust(t, rch.ExchangeDeclare("rw.x", "topic", true, false, false, false, nil))
		fedMust(t, wch.ExchangeDeclare("rw.x", "topic", true, false, false, false, nil))
		_, err := wch.QueueDeclare("rw.q", true, false, false, false, nil)
		fedMust(t, err)
		fedMust(t, wch.QueueBind("rw.q", "a.#", "rw.x", false, nil))
		w.putUpstream("rabbit", map[string]any{"uri": rmq.url, "reconnect-delay": 1})
		w.putPolicy("fed", `^rw\.`, "exchanges", map[string]any{"federation-upstream": "rabbit"})
		w.waitLink("rabbit", "rw.x", "running")
		upq := "federation: rw.x -> wdown@localhost"
		fedWait(t, 10*time.Second, "the upstream queue on RabbitMQ", func() bool {
			code, _ := rmq.api("GET", "/api/queues/%2F/"+url.PathEscape(upq), nil)
			return code == 200
		})
		// Publish until the binding made on RabbitMQ routes: the link's
		// binding is asynchronous to its status.
		var body string
		defer func() { t.Logf("bindings on RabbitMQ: %s", body) }()
		fedWait(t, 10*time.Second, "a.# bound on RabbitMQ", func() bool {
			var code int
			code, body = rmq.api("GET", "/api/exchanges/%2F/rw.x/bindings/source", nil)
			return code == 200 && strings.Contains(body, `"destination":"federation: rw.x -> wdown@localhost A","destination_type":"exchange","routing_key":"a.#"`)
		})
		fedMust(t, rch.Publish("rw.x", "a.1", false, false, amqp091.Publishing{MessageId: "r1"}))
		fedMust(t, rch.Publish("rw.x", "b.1", false, false, amqp091.Publishing{MessageId: "unbound"}))
		fedWait(t, 10*time.Second, "r1 on Warren", func() bool { return ready(t, w, "rw.q") == 1 })
		got := getAll(t, wch, "rw.q")
		hops, _ := got[0].Headers["x-received-from"].([]any)
		if got[0].MessageId != "r1" || len(hops) != 1 || hops[0].(amqp091.Table)["cluster-name"] != rmq.clusterName() {
			t.Errorf("delivered %+v", got[0])
		}
	})

	// Warren upstream, RabbitMQ downstream: RabbitMQ's plugin declares its
	// queue and x-federation-upstream exchange on Warren and binds there.
	t.Run("ExchangeWarrenToRabbit", func(t *testing.T) {
		rmq := rmq.in(t)
		w := startFedBroker(t, "wup")
		wch := w.channel()
		fedMust(t, wch.ExchangeDeclare("wr.x", "direct", true, false, false, false, nil))
		fedMust(t, rch.ExchangeDeclare("wr.x", "direct", true, false, false, false, nil))
		_, err := rch.QueueDeclare("wr.q", true, false, false, false, nil)
		fedMust(t, err)
		fedMust(t, rch.QueueBind("wr.q", "k", "wr.x", false, nil))
		rmq.putUpstream("warren-x", map[string]any{"uri": warrenURI(w), "reconnect-delay": 1})
		rmq.putPolicy("fedx", `^wr\.`, "exchanges", map[string]any{"federation-upstream": "warren-x"})
		rmq.waitLink("warren-x", "wr.x", "running")
		// The plugin names it with suffix A or B, alternating per link start.
		ixPrefix := "federation: wr.x -> " + rmq.clusterName() + " "
		var bs []server.BindingInfo
		defer func() { t.Logf("wr.x bindings on Warren: %+v", bs) }()
		fedWait(t, 10*time.Second, "RabbitMQ's binding on Warren", func() bool {
			bs = w.srv.Vhost("/").LookupExchange("wr.x").SourceBindings()
			return len(bs) == 1 && strings.HasPrefix(bs[0].Destination, ixPrefix) && bs[0].RoutingKey == "k"
		})
		ix := w.srv.Vhost("/").LookupExchange(bs[0].Destination)
		if info := ix.Info(); info.Type != "x-federation-upstream" || info.Arguments["x-downstream-name"] != rmq.clusterName() {
			t.Errorf("RabbitMQ's exchange on Warren = %+v", info)
		}
		fedMust(t, wch.Publish("wr.x", "k", false, false, amqp091.Publishing{MessageId: "w1"}))
		fedMust(t, wch.Publish("wr.x", "other", false, false, amqp091.Publishing{MessageId: "unbound"}))
		waitRabbitReady(t, rch, "wr.q", 1)
		if ids := rabbitIDs(t, rch, "wr.q"); !slices.Equal(ids, []string{"w1"}) {
			t.Errorf("RabbitMQ got %v", ids)
		}
	})

	// Queue federation, RabbitMQ upstream: Warren's queue with a consumer
	// pulls what RabbitMQ's queue holds.
	t.Run("QueueRabbitToWarren", func(t *testing.T) {
		rmq := rmq.in(t)
		w := startFedBroker(t, "wqdown")
		wch := w.channel()
		_, err := rch.QueueDeclare("rwq.q", true, false, false, false, nil)
		fedMust(t, err)
		for _, id := range []string{"q1", "q2", "q3"} {
			fedMust(t, rch.Publish("", "rwq.q", false, false, amqp091.Publishing{MessageId: id, DeliveryMode: amqp091.Persistent}))
		}
		_, err = wch.QueueDeclare("rwq.q", true, false, false, false, nil)
		fedMust(t, err)
		w.putUpstream("rabbit-q", map[string]any{"uri": rmq.url, "reconnect-delay": 1})
		w.putPolicy("fedq", `^rwq\.`, "queues", map[string]any{"federation-upstream": "rabbit-q"})
		w.waitLink("rabbit-q", "rwq.q", "running")
		ds, err := wch.Consume("rwq.q", "", true, false, false, false, nil)
		fedMust(t, err)
		var ids []string
		for len(ids) < 3 {
			select {
			case m := <-ds:
				ids = append(ids, m.MessageId)
			case <-time.After(20 * time.Second):
				t.Fatalf("Warren's consumer got %v of 3", ids)
			}
		}
		if sort.Strings(ids); !slices.Equal(ids, []string{"q1", "q2", "q3"}) {
			t.Errorf("Warren's consumer got %v", ids)
		}
		waitRabbitReady(t, rch, "rwq.q", 0)
	})

	// Queue federation, Warren upstream: RabbitMQ's link consumes from
	// Warren's queue while RabbitMQ's queue has a consumer.
	t.Run("QueueWarrenToRabbit", func(t *testing.T) {
		rmq := rmq.in(t)
		w := startFedBroker(t, "wqup")
		wch := w.channel()
		_, err := wch.QueueDeclare("wrq.q", true, false, false, false, nil)
		fedMust(t, err)
		for _, id := range []string{"p1", "p2", "p3"} {
			fedMust(t, wch.Publish("", "wrq.q", false, false, amqp091.Publishing{MessageId: id, DeliveryMode: amqp091.Persistent}))
		}
		_, err = rch.QueueDeclare("wrq.q", true, false, false, false, nil)
		fedMust(t, err)
		rmq.putUpstream("warren-q", map[string]any{"uri": warrenURI(w), "reconnect-delay": 1})
		rmq.putPolicy("fedq", `^wrq\.`, "queues", map[string]any{"federation-upstream": "warren-q"})
		rmq.waitLink("warren-q", "wrq.q", "running")
		cch := rmq.channel()
		ds, err := cch.Consume("wrq.q", "", true, false, false, false, nil)
		fedMust(t, err)
		var ids []string
		for len(ids) < 3 {
			select {
			case m := <-ds:
				ids = append(ids, m.MessageId)
			case <-time.After(20 * time.Second):
				t.Fatalf("RabbitMQ's consumer got %v of 3", ids)
			}
		}
		if sort.Strings(ids); !slices.Equal(ids, []string{"p1", "p2", "p3"}) {
			t.Errorf("RabbitMQ's consumer got %v", ids)
		}
		fedWait(t, 10*time.Second, "Warren's queue drained", func() bool { return ready(t, w, "wrq.q") == 0 })
	})

	// Each federates mh.x from the other with max-hops 1: every message
	// arrives once on each side, none comes back.
	t.Run("MaxHops", func(t *testing.T) {
		rmq := rmq.in(t)
		w := startFedBroker(t, "wmh")
		wch := w.channel()
		for _, ch := range []*amqp091.Channel{wch, rch} {
			fedMust(t, ch.ExchangeDeclare("mh.x", "fanout", true, false, false, false, nil))
			_, err := ch.QueueDeclare("mh.q", true, false, false, false, nil)
			fedMust(t, err)
			fedMust(t, ch.QueueBind("mh.q", "", "mh.x", false, nil))
		}
		w.putUpstream("rabbit-mh", map[string]any{"uri": rmq.url, "reconnect-delay": 1, "max-hops": 1})
		w.putPolicy("fedmh", `^mh\.`, "exchanges", map[string]any{"federation-upstream": "rabbit-mh"})
		rmq.putUpstream("warren-mh", map[string]any{"uri": warrenURI(w), "reconnect-delay": 1, "max-hops": 1})
		rmq.putPolicy("fedmh", `^mh\.`, "exchanges", map[string]any{"federation-upstream": "warren-mh"})
		w.waitLink("rabbit-mh", "mh.x", "running")
		rmq.waitLink("warren-mh", "mh.x", "running")
		// Each side's mh.x has the local queue's binding and the other
		// side's link's exchange binding, and no more (x-bound-from).
		fedWait(t, 10*time.Second, "two bindings on Warren's mh.x", func() bool {
			return len(w.srv.Vhost("/").LookupExchange("mh.x").SourceBindings()) == 2
		})
		fedWait(t, 10*time.Second, "Warren's link bound on RabbitMQ, once", func() bool {
			code, body := rmq.api("GET", "/api/exchanges/%2F/mh.x/bindings/source", nil)
			return code == 200 && strings.Count(body, `"destination":"federation: mh.x -> wmh@localhost A"`) == 1 &&
				strings.Count(body, `"source":`) == 2
		})
		// Each message waits for the one before on the far side: a copy
		// coming back would travel ahead of the next one on the same link.
		fedMust(t, wch.Publish("mh.x", "", false, false, amqp091.Publishing{MessageId: "m1"}))
		waitRabbitReady(t, rch, "mh.q", 1)
		fedMust(t, rch.Publish("mh.x", "", false, false, amqp091.Publishing{MessageId: "m2"}))
		fedWait(t, 10*time.Second, "m2 at Warren", func() bool { return ready(t, w, "mh.q") == 2 })
		fedMust(t, wch.Publish("mh.x", "", false, false, amqp091.Publishing{MessageId: "m3"}))
		waitRabbitReady(t, rch, "mh.q", 3)
		fedMust(t, rch.Publish("mh.x", "", false, false, amqp091.Publishing{MessageId: "m4"}))
		fedWait(t, 10*time.Second, "m4 at Warren", func() bool { return ready(t, w, "mh.q") == 4 })
		want := []string{"m1", "m2", "m3", "m4"}
		if ids := rabbitIDs(t, rch, "mh.q"); !slices.Equal(ids, want) {
			t.Errorf("RabbitMQ got %v, want each once", ids)
		}
		var ids []string
		for _, m := range getAll(t, wch, "mh.q") {
			ids = append(ids, m.MessageId)
		}
		if sort.Strings(ids); !slices.Equal(ids, want) {
			t.Errorf("Warren got %v, want each once", ids)
		}
	})
}
