package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// federateExchange makes down federate its exchange fed.x from up, with
// the upstream's extra keys, and waits for the link to run.
func federateExchange(t *testing.T, down, up *fedBroker, name string, extra map[string]any) map[string]any {
	t.Helper()
	value := map[string]any{"uri": up.url, "reconnect-delay": 1}
	for k, v := range extra {
		value[k] = v
	}
	down.putUpstream(name, value)
	down.putPolicy("fed", `^fed\.`, "exchanges", map[string]any{"federation-upstream-set": "all"})
	return down.waitLink(name, "fed.x", "running")
}

// upstreamKeys are the routing keys bound from the upstream's fed.x.
func upstreamKeys(up *fedBroker) []string {
	var keys []string
	for _, b := range up.srv.Vhost("/").LookupExchange("fed.x").SourceBindings() {
		keys = append(keys, b.RoutingKey)
	}
	sort.Strings(keys)
	return keys
}

// A message published to the upstream exchange reaches the downstream
// queues bound to the federated exchange, with x-received-from, and the
// downstream bindings, added and removed, are what the upstream routes by.
func TestFederationExchangeEndToEnd(t *testing.T) {
	up, down := startFedBroker(t, "up"), startFedBroker(t, "down")
	dch := down.channel()
	for _, q := range []string{"qa", "qb"} {
		_, err := dch.QueueDeclare(q, true, false, false, false, nil)
		fedMust(t, err)
	}
	fedMust(t, dch.ExchangeDeclare("fed.x", "topic", true, false, false, false, nil))
	fedMust(t, dch.QueueBind("qa", "a.#", "fed.x", false, nil))
	link := federateExchange(t, down, up, "up1", nil)
	if link["type"] != "exchange" || link["upstream_exchange"] != "fed.x" || link["vhost"] != "/" ||
		!strings.HasPrefix(fmt.Sprint(link["local_connection"]), "127.0.0.1:") || strings.Contains(fmt.Sprint(link["uri"]), "guest") {
		t.Errorf("link status = %v", link)
	}
	// What 3.10 declares upstream: the queue and its internal exchange.
	q := up.srv.Vhost("/").LookupQueue("federation: fed.x -> down@localhost")
	if q == nil {
		t.Fatalf("upstream queue missing; queues: %v", up.srv.Vhost("/").Queues())
	}
	if q.Info().Arguments["x-internal-purpose"] != "federation" {
		t.Errorf("upstream queue arguments = %v", q.Info().Arguments)
	}
	ix := up.srv.Vhost("/").LookupExchange("federation: fed.x -> down@localhost A")
	if ix == nil {
		t.Fatal("upstream internal exchange missing")
	}
	if info := ix.Info(); info.Type != "x-federation-upstream" || !info.Internal || info.Arguments["x-max-hops"] != int64(1) ||
		info.Arguments["x-downstream-name"] != "down@localhost" {
		t.Errorf("internal exchange = %+v", info)
	}
	fedWait(t, 10*time.Second, "a.# bound upstream", func() bool { return slices.Equal(upstreamKeys(up), []string{"a.#"}) })

	uch := up.channel()
	fedMust(t, uch.Publish("fed.x", "a.1", false, false, amqp091.Publishing{MessageId: "m1", Body: []byte("x")}))
	fedWait(t, 10*time.Second, "m1 downstream", func() bool { return ready(t, down, "qa") == 1 })
	got := getAll(t, dch, "qa")
	hops, _ := got[0].Headers["x-received-from"].([]any)
	if got[0].MessageId != "m1" || got[0].RoutingKey != "a.1" || len(hops) != 1 {
		t.Fatalf("delivered %+v", got[0])
	}
	if hop := hops[0].(amqp091.Table); hop["exchange"] != "fed.x" || hop["cluster-name"] != "up@localhost" || hop["vhost"] != "/" {
		t.Errorf("x-received-from = %v", hop)
	}

	// A binding added downstream propagates; one removed stops routing.
	fedMust(t, dch.QueueBind("qb", "b.*", "fed.x", false, nil))
	fedMust(t, dch.QueueUnbind("qa", "a.#", "fed.x", nil))
	fedWait(t, 10*time.Second, "bindings b.* only upstream", func() bool { return slices.Equal(upstreamKeys(up), []string{"b.*"}) })
	fedMust(t, uch.Publish("fed.x", "b.1", false, false, amqp091.Publishing{MessageId: "m2"}))
	fedWait(t, 10*time.Second, "m2 downstream", func() bool { return ready(t, down, "qb") == 1 })
	if n := ready(t, up, "federation: fed.x -> down@localhost"); n != 0 {
		t.Errorf("upstream queue holds %d messages", n)
	}
}

// With max-hops 1 two brokers federating an exchange from each other
// deliver each message once on each side instead of passing it back and
// forth.
func TestFederationMaxHopsStopsLoop(t *testing.T) {
	a, b := startFedBroker(t, "a"), startFedBroker(t, "b")
	chs := map[*fedBroker]*amqp091.Channel{a: a.channel(), b: b.channel()}
	for _, x := range []*fedBroker{a, b} {
		_, err := chs[x].QueueDeclare("loopq", true, false, false, false, nil)
		fedMust(t, err)
		fedMust(t, chs[x].ExchangeDeclare("fed.x", "fanout", true, false, false, false, nil))
		fedMust(t, chs[x].QueueBind("loopq", "", "fed.x", false, nil))
	}
	federateExchange(t, a, b, "from-b", map[string]any{"max-hops": 1})
	federateExchange(t, b, a, "from-a", map[string]any{"max-hops": 1})
	// Each side binds upstream its queue's binding but not the one the
	// other side's link made (x-bound-from: it came from there).
	for _, x := range []*fedBroker{a, b} {
		fedWait(t, 10*time.Second, "one binding each way", func() bool { return len(x.srv.Vhost("/").LookupExchange("fed.x").SourceBindings()) == 2 })
	}
	publish := func(x *fedBroker, id string) {
		fedMust(t, chs[x].Publish("fed.x", "", false, false, amqp091.Publishing{MessageId: id}))
	}
	// Each message waits for the one before to arrive on the far side: a
	// copy coming back would travel ahead of the next one on the same link.
	publish(a, "m1")
	fedWait(t, 10*time.Second, "m1 at b", func() bool { return ready(t, b, "loopq") == 1 })
	publish(b, "m2")
	fedWait(t, 10*time.Second, "m2 at a", func() bool { return ready(t, a, "loopq") == 2 })
	publish(a, "m3")
	fedWait(t, 10*time.Second, "m3 at b", func() bool { return ready(t, b, "loopq") == 3 })
	publish(b, "m4")
	fedWait(t, 10*time.Second, "m4 at a", func() bool { return ready(t, a, "loopq") == 4 })
	for _, x := range []*fedBroker{a, b} {
		var ids []string
		for _, m := range getAll(t, chs[x], "loopq") {
			ids = append(ids, m.MessageId)
		}
		sort.Strings(ids)
		if !slices.Equal(ids, []string{"m1", "m2", "m3", "m4"}) {
			t.Errorf("%s got %v, want each message once", x.name, ids)
		}
	}
}

// A link whose upstream restarts reports the error, reconnects after
// reconnect-delay and federates again: the durable upstream queue kept
// what was published meanwhile.
func TestFederationReconnectsAfterUpstreamRestart(t *testing.T) {
	up, down := startFedBroker(t, "up"), startFedBroker(t, "down")
	dch := down.channel()
	_, err := dch.QueueDeclare("rq", true, false, false, false, nil)
	fedMust(t, err)
	fedMust(t, dch.ExchangeDeclare("fed.x", "direct", true, false, false, false, nil))
	fedMust(t, dch.QueueBind("rq", "k", "fed.x", false, nil))
	federateExchange(t, down, up, "up1", nil)
	fedWait(t, 10*time.Second, "k bound upstream", func() bool { return slices.Equal(upstreamKeys(up), []string{"k"}) })

	up.stop()
	st := down.waitLink("up1", "fed.x", "error")
	if st["error"] == "" {
		t.Errorf("error status without a reason: %v", st)
	}
	up.start()
	publishPersistent(t, up, "fed.x", "k", "r", 1) // before the link is back: kept by the upstream queue
	down.waitLink("up1", "fed.x", "running")
	publishPersistent(t, up, "fed.x", "k", "s", 1)
	fedWait(t, 10*time.Second, "both messages downstream", func() bool { return ready(t, down, "rq") == 2 })
}

// publishPersistent publishes n persistent messages prefix-0 ... to
// exchange with key on b, each confirmed.
func publishPersistent(t testing.TB, b *fedBroker, exchange, key, prefix string, n int) {
	t.Helper()
	ch := b.channel()
	fedMust(t, ch.Confirm(false))
	for i := 0; i < n; i++ {
		dc, err := ch.PublishWithDeferredConfirm(exchange, key, false, false, amqp091.Publishing{
			DeliveryMode: amqp091.Persistent, MessageId: fmt.Sprintf("%s-%d", prefix, i), Body: []byte("m")})
		fedMust(t, err)
		if i%500 == 499 || i == n-1 {
			if !dc.Wait() {
				t.Fatalf("publish %d nacked", i)
			}
		}
	}
}

// With ack-mode on-confirm a downstream restart in the middle of a
// transfer loses nothing: what the downstream had not confirmed stays in
// the upstream queue and comes over when the link is back.
func TestFederationOnConfirmSurvivesDownstreamRestart(t *testing.T) {
	const n = 3000
	up, down := startFedBroker(t, "up"), startFedBroker(t, "down")
	dch := down.channel()
	_, err := dch.QueueDeclare("cq", true, false, false, false, nil)
	fedMust(t, err)
	fedMust(t, dch.ExchangeDeclare("fed.x", "fanout", true, false, false, false, nil))
	fedMust(t, dch.QueueBind("cq", "", "fed.x", false, nil))
	federateExchange(t, down, up, "up1", map[string]any{"ack-mode": "on-confirm", "prefetch-count": 200})
	fedWait(t, 10*time.Second, "the binding upstream", func() bool { return len(upstreamKeys(up)) == 1 })

	publishPersistent(t, up, "fed.x", "", "c", n)
	fedWait(t, 10*time.Second, "the transfer under way", func() bool { return ready(t, down, "cq") > 0 })
	down.restart()
	t.Logf("after the restart: %d downstream, %d in the upstream queue", ready(t, down, "cq"), ready(t, up, "federation: fed.x -> down@localhost"))
	down.waitLink("up1", "fed.x", "running")
	fedWait(t, 30*time.Second, "every message downstream", func() bool { return ready(t, down, "cq") >= n })
	seen := map[string]int{}
	for _, m := range getAll(t, down.channel(), "cq") {
		seen[m.MessageId]++
	}
	for i := 0; i < n; i++ {
		if id := fmt.Sprintf("c-%d", i); seen[id] == 0 {
			t.Fatalf("%s lost (%d distinct of %d arrived)", id, len(seen), n)
		}
	}
}

// A federated queue pulls from its upstream queue only while it has a
// consumer of its own and nothing waiting; the upstream keeps its
// messages otherwise.
func TestFederationQueueMovesOnlyWithConsumers(t *testing.T) {
	up, down := startFedBroker(t, "up"), startFedBroker(t, "down")
	uch, dch := up.channel(), down.channel()
	for _, ch := range []*amqp091.Channel{uch, dch} {
		_, err := ch.QueueDeclare("fq", true, false, false, false, nil)
		fedMust(t, err)
	}
	publishPersistent(t, up, "", "fq", "q", 10)
	down.putUpstream("up1", map[string]any{"uri": up.url, "reconnect-delay": 1})
	down.putPolicy("fedq", `^fq$`, "queues", map[string]any{"federation-upstream": "up1"})
	down.waitLink("up1", "fq", "running")
	upq := up.srv.Vhost("/").LookupQueue("fq")
	// Without a downstream consumer nothing moves. A negative can only be
	// watched for a while: ten of the link's 200 ms checks.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if info := upq.Info(); info.Ready != 10 || info.Consumers != 0 {
			t.Fatalf("upstream queue without a downstream consumer: %d ready, %d consumers", info.Ready, info.Consumers)
		}
	}
	fedMust(t, dch.Qos(1, 0, false))
	deliveries, err := dch.Consume("fq", "local", false, false, false, false, nil)
	fedMust(t, err)
	fedWait(t, 10*time.Second, "the link consuming upstream", func() bool { return len(upq.Consumers()) == 1 })
	if c := upq.Consumers()[0]; c.Priority != -1 || c.Tag != "federation-link-up1" {
		t.Errorf("upstream consumer = %+v, want priority -1, tag federation-link-up1", c)
	}
	got := map[string]bool{}
	for len(got) < 10 {
		select {
		case d := <-deliveries:
			got[d.MessageId] = true
			fedMust(t, d.Ack(false))
		case <-time.After(10 * time.Second):
			t.Fatalf("downstream consumer got %d of 10", len(got))
		}
	}
	fedMust(t, dch.Cancel("local", false))
	fedWait(t, 10*time.Second, "the link to stop consuming", func() bool { return len(upq.Consumers()) == 0 })
	publishPersistent(t, up, "", "fq", "late", 3)
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if n := upq.Info().Ready; n != 3 {
			t.Fatalf("upstream queue has %d ready after the downstream consumer left, want 3", n)
		}
	}
}

// A link whose upstream cannot be reached shows status error with the
// reason and the URI without its credentials; a policy naming an upstream
// set that does not exist is shown too. The node lists the plugin.
func TestFederationStatusErrors(t *testing.T) {
	down := startFedBroker(t, "down")
	dch := down.channel()
	fedMust(t, dch.ExchangeDeclare("fed.bad", "fanout", true, false, false, false, nil))
	fedMust(t, dch.ExchangeDeclare("set.x", "fanout", true, false, false, false, nil))
	down.putUpstream("nowhere", map[string]any{"uri": "amqp://user:secret@127.0.0.1:1", "reconnect-delay": 1})
	down.putPolicy("bad", `^fed\.bad$`, "exchanges", map[string]any{"federation-upstream": "nowhere"})
	down.putPolicy("noset", `^set\.x$`, "exchanges", map[string]any{"federation-upstream-set": "missing"})
	st := down.waitLink("nowhere", "fed.bad", "error")
	if st["uri"] != "amqp://127.0.0.1:1" || !strings.Contains(fmt.Sprint(st["error"]), "connection refused") {
		t.Errorf("status = %v", st)
	}
	var noset map[string]any
	for _, l := range down.links("/%2F/state/down") {
		if l["exchange"] == "set.x" {
			noset = l
		}
	}
	if noset == nil || noset["status"] != "error" || noset["upstream_set"] != "missing" || !strings.Contains(fmt.Sprint(noset["error"]), `"missing" not found`) {
		t.Errorf("set.x entry = %v", noset)
	}
	_, body := down.httpGet("/api/nodes")
	if !strings.Contains(body, `"rabbitmq_federation"`) {
		t.Errorf("/api/nodes lists no rabbitmq_federation: %s", body)
	}
}
