package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// declareDLX declares a fanout dead-letter exchange and a queue bound to it.
func declareDLX(t *testing.T, ch *amqp091.Channel, exchange, queue string) {
	t.Helper()
	must(t, ch.ExchangeDeclare(exchange, "fanout", false, false, false, false, nil))
	mustDeclare(t, ch, queue, nil)
	must(t, ch.QueueBind(queue, "", exchange, false, nil))
}

// getOne gets a message from queue or fails.
func getOne(t *testing.T, ch *amqp091.Channel, queue string) amqp091.Delivery {
	t.Helper()
	var m amqp091.Delivery
	waitFor(t, 5*time.Second, "a message in "+queue, func() bool {
		var ok bool
		var err error
		m, ok, err = ch.Get(queue, true)
		must(t, err)
		return ok
	})
	return m
}

func firstDeath(t *testing.T, m amqp091.Delivery) amqp091.Table {
	t.Helper()
	deaths, ok := m.Headers["x-death"].([]any)
	if !ok || len(deaths) == 0 {
		t.Fatalf("no x-death header: %#v", m.Headers)
	}
	d, ok := deaths[0].(amqp091.Table)
	if !ok {
		t.Fatalf("x-death entry %#v", deaths[0])
	}
	return d
}

// roundTrip makes a synchronous request on ch, so every publish sent on it
// before has been handled by the broker.
func roundTrip(t *testing.T, ch *amqp091.Channel) {
	t.Helper()
	must(t, ch.ExchangeDeclarePassive("amq.direct", "direct", true, false, false, false, nil))
}

func queueInfo(ts *testServer, name string) QueueInfo { return ts.Vhost("/").queue(name).Info() }

func TestMessageTTLExpiresWithoutConsumers(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "ttl", amqp091.Table{"x-message-ttl": int32(50)})
	for i := range 5 {
		publish(t, ch, "", "ttl", fmt.Sprint(i))
	}
	roundTrip(t, ch)
	waitFor(t, 5*time.Second, "queue to expire its messages", func() bool { return queueInfo(ts, "ttl").Ready == 0 })
	if info := queueInfo(ts, "ttl"); info.Expired != 5 || info.Delivered != 0 {
		t.Fatalf("expired %d delivered %d", info.Expired, info.Delivered)
	}
}

func TestPerMessageExpiration(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "pm", nil)
	must(t, ch.Publish("", "pm", false, false, amqp091.Publishing{Expiration: "30", Body: []byte("short")}))
	must(t, ch.Publish("", "pm", false, false, amqp091.Publishing{Body: []byte("forever")}))
	roundTrip(t, ch)
	waitFor(t, 5*time.Second, "expired message to go", func() bool { return queueInfo(ts, "pm").Ready == 1 })
	if m := getOne(t, ch, "pm"); string(m.Body) != "forever" {
		t.Fatalf("got %q", m.Body)
	}
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	must(t, ch.Publish("", "pm", false, false, amqp091.Publishing{Expiration: "soon"}))
	if e := waitClose(t, closed); e.Code != 406 || !strings.Contains(e.Reason, "invalid expiration 'soon'") {
		t.Fatalf("got %v", e)
	}
}

func TestTTLZeroDeliversOnlyToWaitingConsumer(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "z", amqp091.Table{"x-message-ttl": int32(0)})
	publish(t, ch, "", "z", "nobody")
	roundTrip(t, ch)
	if info := queueInfo(ts, "z"); info.Ready != 0 || info.Expired != 1 {
		t.Fatalf("without consumer: %+v", info)
	}
	_, c := ts.channel(t)
	d, err := c.Consume("z", "", true, false, false, false, nil)
	must(t, err)
	publish(t, ch, "", "z", "taken")
	if m := recv(t, d); string(m.Body) != "taken" {
		t.Fatalf("got %q", m.Body)
	}
}

func TestQueueExpires(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "idle", amqp091.Table{"x-expires": int32(100)})
	mustDeclare(t, ch, "busy", amqp091.Table{"x-expires": int32(100)})
	_, err := ch.Consume("busy", "", false, false, false, false, nil)
	must(t, err)
	waitFor(t, 5*time.Second, "idle queue deleted", func() bool { return ts.Vhost("/").queue("idle") == nil })
	if ts.Vhost("/").queue("busy") == nil {
		t.Fatal("queue with a consumer expired")
	}
}

func TestDeadLetterRejected(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	declareDLX(t, ch, "dlx", "dlq")
	mustDeclare(t, ch, "src", amqp091.Table{"x-dead-letter-exchange": "dlx"})
	must(t, ch.Publish("", "src", false, false, amqp091.Publishing{Body: []byte("bad"), Headers: amqp091.Table{"keep": "me"}}))
	m, ok, err := ch.Get("src", false)
	must(t, err)
	if !ok {
		t.Fatal("empty")
	}
	must(t, m.Reject(false))
	dl := getOne(t, ch, "dlq")
	d := firstDeath(t, dl)
	if d["count"] != int64(1) || d["reason"] != "rejected" || d["queue"] != "src" || d["exchange"] != "" {
		t.Fatalf("x-death %#v", d)
	}
	if keys, _ := d["routing-keys"].([]any); len(keys) != 1 || keys[0] != "src" {
		t.Fatalf("routing-keys %#v", d["routing-keys"])
	}
	if _, ok := d["time"].(time.Time); !ok {
		t.Fatalf("time %#v", d["time"])
	}
	if dl.Headers["x-first-death-queue"] != "src" || dl.Headers["x-first-death-reason"] != "rejected" ||
		dl.Headers["x-first-death-exchange"] != "" || dl.Headers["keep"] != "me" || string(dl.Body) != "bad" {
		t.Fatalf("headers %#v", dl.Headers)
	}
	if dl.Exchange != "dlx" || dl.RoutingKey != "src" {
		t.Fatalf("dead letter routed as %q %q", dl.Exchange, dl.RoutingKey)
	}
}

func TestDeadLetterExpiredWithRoutingKey(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	must(t, ch.ExchangeDeclare("dlx", "direct", false, false, false, false, nil))
	mustDeclare(t, ch, "dlq", nil)
	must(t, ch.QueueBind("dlq", "expired-key", "dlx", false, nil))
	mustDeclare(t, ch, "src", amqp091.Table{"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "expired-key"})
	must(t, ch.Publish("", "src", false, false, amqp091.Publishing{Expiration: "20", Body: []byte("late")}))
	dl := getOne(t, ch, "dlq")
	d := firstDeath(t, dl)
	if d["reason"] != "expired" || d["original-expiration"] != "20" {
		t.Fatalf("x-death %#v", d)
	}
	if dl.Expiration != "" {
		t.Fatalf("expiration kept: %q", dl.Expiration)
	}
	if dl.RoutingKey != "expired-key" {
		t.Fatalf("routing key %q", dl.RoutingKey)
	}
}

func TestMaxLengthDropHeadDeadLetters(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	declareDLX(t, ch, "dlx", "dlq")
	mustDeclare(t, ch, "ml", amqp091.Table{"x-max-length": int32(2), "x-dead-letter-exchange": "dlx"})
	for i := range 3 {
		publish(t, ch, "", "ml", fmt.Sprint(i))
	}
	dl := getOne(t, ch, "dlq")
	if string(dl.Body) != "0" || firstDeath(t, dl)["reason"] != "maxlen" {
		t.Fatalf("dropped %q %#v", dl.Body, dl.Headers)
	}
	for _, want := range []string{"1", "2"} {
		if m := getOne(t, ch, "ml"); string(m.Body) != want {
			t.Fatalf("got %q want %q", m.Body, want)
		}
	}
}

func TestMaxLengthBytes(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "mb", amqp091.Table{"x-max-length-bytes": int32(10)})
	publish(t, ch, "", "mb", "12345")
	publish(t, ch, "", "mb", "67890")
	publish(t, ch, "", "mb", "abc")
	roundTrip(t, ch)
	if info := queueInfo(ts, "mb"); info.Ready != 2 || info.ReadyBytes != 8 {
		t.Fatalf("info %+v", info)
	}
}

func TestRejectPublishNacks(t *testing.T) {
	for _, mode := range []string{"reject-publish", "reject-publish-dlx"} {
		t.Run(mode, func(t *testing.T) {
			ts := startServer(t)
			_, ch := ts.channel(t)
			declareDLX(t, ch, "dlx", "dlq")
			mustDeclare(t, ch, "rp", amqp091.Table{"x-max-length": int32(1), "x-overflow": mode, "x-dead-letter-exchange": "dlx"})
			must(t, ch.Confirm(false))
			confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 3))
			for i := range 3 {
				publish(t, ch, "", "rp", fmt.Sprint(i))
			}
			for i, want := range []bool{true, false, false} {
				if c := nextConfirm(t, confirms); c.Ack != want || c.DeliveryTag != uint64(i+1) {
					t.Fatalf("confirm %d: %+v", i+1, c)
				}
			}
			if info := queueInfo(ts, "rp"); info.Ready != 1 {
				t.Fatalf("ready %d", info.Ready)
			}
			dead := queueInfo(ts, "dlq").Ready
			if mode == "reject-publish" && dead != 0 || mode == "reject-publish-dlx" && dead != 2 {
				t.Fatalf("%s dead-lettered %d", mode, dead)
			}
		})
	}
}

func TestDeadLetterCycleIsDropped(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	// A queue that dead-letters expired messages back to itself.
	mustDeclare(t, ch, "loop", amqp091.Table{"x-message-ttl": int32(10), "x-dead-letter-exchange": ""})
	publish(t, ch, "", "loop", "spin")
	waitFor(t, 5*time.Second, "first expiry", func() bool { return queueInfo(ts, "loop").Expired >= 1 })
	// One republish at most (the first death), then the cycle is detected.
	waitFor(t, 5*time.Second, "queue empty", func() bool { return queueInfo(ts, "loop").Ready == 0 })
	if n := queueInfo(ts, "loop").Published; n > 1 {
		t.Fatalf("message looped: published %d times", n)
	}
}

func TestDeadLetterCountGrowsAcrossRejectCycle(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	// work → (rejected) → retry with TTL → (expired) → work: a cycle with a
	// rejection in it is allowed, and x-death counts each hop.
	mustDeclare(t, ch, "work", amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "retry"})
	mustDeclare(t, ch, "retry", amqp091.Table{"x-message-ttl": int32(10), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work"})
	publish(t, ch, "", "work", "job")
	for round := int64(1); round <= 2; round++ {
		m := getOneAck(t, ch, "work")
		if round == 2 {
			deaths := m.Headers["x-death"].([]any)
			counts := map[string]int64{}
			for _, d := range deaths {
				e := d.(amqp091.Table)
				counts[e["queue"].(string)+"/"+e["reason"].(string)] = e["count"].(int64)
			}
			if counts["work/rejected"] != 1 || counts["retry/expired"] != 1 {
				t.Fatalf("x-death counts %v", counts)
			}
		}
		must(t, m.Reject(false))
	}
	m := getOneAck(t, ch, "work")
	deaths := m.Headers["x-death"].([]any)
	first := deaths[0].(amqp091.Table)
	if first["queue"] != "retry" || first["count"] != int64(2) {
		t.Fatalf("x-death after two rounds %#v", deaths)
	}
}

// getOneAck gets a message from queue in ack mode.
func getOneAck(t *testing.T, ch *amqp091.Channel, queue string) amqp091.Delivery {
	t.Helper()
	var m amqp091.Delivery
	waitFor(t, 5*time.Second, "a message in "+queue, func() bool {
		var ok bool
		var err error
		m, ok, err = ch.Get(queue, false)
		must(t, err)
		return ok
	})
	return m
}

func TestPriorities(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "prio", amqp091.Table{"x-max-priority": int32(10)})
	for i, p := range []uint8{1, 5, 9, 5, 0, 200} {
		must(t, ch.Publish("", "prio", false, false, amqp091.Publishing{Priority: p, Body: []byte(fmt.Sprint(i))}))
	}
	// 200 is capped at 10; FIFO within a priority.
	var order []string
	var held []amqp091.Delivery
	for range 6 {
		m := getOneAck(t, ch, "prio")
		order = append(order, string(m.Body))
		held = append(held, m)
	}
	if got := strings.Join(order, ","); got != "5,2,1,3,0,4" {
		t.Fatalf("order %s", got)
	}
	// Requeued messages keep their place within their priority.
	must(t, held[3].Nack(false, true)) // "3", priority 5
	must(t, held[2].Nack(false, true)) // "1", priority 5
	for _, want := range []string{"1", "3"} {
		if m := getOne(t, ch, "prio"); string(m.Body) != want || !m.Redelivered {
			t.Fatalf("after requeue got %q redelivered=%v, want %q", m.Body, m.Redelivered, want)
		}
	}
}

func TestSingleActiveConsumerFailover(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "sac", amqp091.Table{"x-single-active-consumer": true})
	firstConn, first := ts.channel(t)
	d1, err := first.Consume("sac", "first", false, false, false, false, nil)
	must(t, err)
	_, second := ts.channel(t)
	d2, err := second.Consume("sac", "second", false, false, false, false, nil)
	must(t, err)
	for i := range 3 {
		publish(t, ch, "", "sac", fmt.Sprint(i))
	}
	for i := range 3 {
		if m := recv(t, d1); string(m.Body) != fmt.Sprint(i) {
			t.Fatalf("active consumer got %q", m.Body)
		}
	}
	expectNone(t, d2, second, ch)
	must(t, firstConn.Close()) // its three unacked messages return
	for i := range 3 {
		m := recv(t, d2)
		if string(m.Body) != fmt.Sprint(i) || !m.Redelivered {
			t.Fatalf("after failover got %q redelivered=%v", m.Body, m.Redelivered)
		}
	}
}

func TestConsumerPriorities(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "cp", nil)
	_, low := ts.channel(t)
	must(t, low.Qos(1, 0, false))
	dl, err := low.Consume("cp", "low", false, false, false, false, amqp091.Table{"x-priority": int32(1)})
	must(t, err)
	_, high := ts.channel(t)
	must(t, high.Qos(2, 0, false))
	dh, err := high.Consume("cp", "high", false, false, false, false, amqp091.Table{"x-priority": int32(10)})
	must(t, err)
	for i := range 3 {
		publish(t, ch, "", "cp", fmt.Sprint(i))
	}
	// The high-priority consumer takes what its prefetch allows; the rest go low.
	a, b := recv(t, dh), recv(t, dh)
	c := recv(t, dl)
	if string(a.Body) != "0" || string(b.Body) != "1" || string(c.Body) != "2" {
		t.Fatalf("high got %q %q, low got %q", a.Body, b.Body, c.Body)
	}
}

func TestDeliveryLimit(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	declareDLX(t, ch, "dlx", "dlq")
	mustDeclare(t, ch, "dlim", amqp091.Table{"x-delivery-limit": int32(1), "x-dead-letter-exchange": "dlx"})
	publish(t, ch, "", "dlim", "poison")
	m := getOneAck(t, ch, "dlim")
	if _, ok := m.Headers["x-delivery-count"]; ok || m.Redelivered {
		t.Fatalf("first delivery carries %#v", m.Headers)
	}
	must(t, m.Nack(false, true))
	m = getOneAck(t, ch, "dlim")
	if m.Headers["x-delivery-count"] != int64(1) || !m.Redelivered {
		t.Fatalf("redelivery headers %#v", m.Headers)
	}
	must(t, m.Nack(false, true))
	dl := getOne(t, ch, "dlq")
	if firstDeath(t, dl)["reason"] != "delivery_limit" {
		t.Fatalf("x-death %#v", dl.Headers)
	}
	if info := queueInfo(ts, "dlim"); info.Ready != 0 || info.Unacked != 0 {
		t.Fatalf("source queue %+v", info)
	}
}

func TestConsumerTimeout(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.ConsumerTimeoutCheck = 20 * time.Millisecond })
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "slow", amqp091.Table{"x-consumer-timeout": int32(100)})
	publish(t, ch, "", "slow", "x")
	_, c := ts.channel(t)
	closed := c.NotifyClose(make(chan *amqp091.Error, 1))
	d, err := c.Consume("slow", "", false, false, false, false, nil)
	must(t, err)
	recv(t, d) // and never ack
	e := waitClose(t, closed)
	if e.Code != 406 || !strings.Contains(e.Reason, "delivery acknowledgement on channel 1 timed out. Timeout value used: 100 ms") {
		t.Fatalf("got %v", e)
	}
	if m := getOne(t, ch, "slow"); !m.Redelivered {
		t.Fatal("timed-out delivery not requeued as redelivered")
	}
}

func TestAlternateExchange(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	declareDLX(t, ch, "ae", "unrouted")
	must(t, ch.ExchangeDeclare("main", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": "ae"}))
	mustDeclare(t, ch, "routed", nil)
	must(t, ch.QueueBind("routed", "k", "main", false, nil))
	publish(t, ch, "main", "k", "a")
	publish(t, ch, "main", "other", "b")
	if m := getOne(t, ch, "routed"); string(m.Body) != "a" {
		t.Fatalf("routed got %q", m.Body)
	}
	if m := getOne(t, ch, "unrouted"); string(m.Body) != "b" {
		t.Fatalf("alternate got %q", m.Body)
	}
}

func TestDirectReplyTo(t *testing.T) {
	ts := startServer(t)
	_, server := ts.channel(t)
	mustDeclare(t, server, "rpc", nil)
	requests, err := server.Consume("rpc", "", true, false, false, false, nil)
	must(t, err)
	_, client := ts.channel(t)
	replies, err := client.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil)
	must(t, err)
	must(t, client.Publish("", "rpc", false, false, amqp091.Publishing{ReplyTo: "amq.rabbitmq.reply-to", CorrelationId: "1", Body: []byte("ping")}))
	req := recv(t, requests)
	if !strings.HasPrefix(req.ReplyTo, "amq.rabbitmq.reply-to.") {
		t.Fatalf("reply-to %q", req.ReplyTo)
	}
	must(t, server.Publish("", req.ReplyTo, false, false, amqp091.Publishing{CorrelationId: req.CorrelationId, Body: []byte("pong")}))
	if r := recv(t, replies); string(r.Body) != "pong" || r.CorrelationId != "1" {
		t.Fatalf("reply %q %q", r.Body, r.CorrelationId)
	}

	_, noConsumer := ts.channel(t)
	closed := noConsumer.NotifyClose(make(chan *amqp091.Error, 1))
	must(t, noConsumer.Publish("", "rpc", false, false, amqp091.Publishing{ReplyTo: "amq.rabbitmq.reply-to"}))
	if e := waitClose(t, closed); e.Code != 406 || !strings.Contains(e.Reason, "fast reply consumer does not exist") {
		t.Fatalf("got %v", e)
	}
	_, acking := ts.channel(t)
	_, err = acking.Consume("amq.rabbitmq.reply-to", "", false, false, false, false, nil)
	expectCode(t, err, 406)
}

func TestSenderSelectedDistribution(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	for _, q := range []string{"a", "b", "c"} {
		mustDeclare(t, ch, q, nil)
		must(t, ch.QueueBind(q, q, "amq.direct", false, nil))
	}
	must(t, ch.Publish("amq.direct", "a", false, false, amqp091.Publishing{
		Headers: amqp091.Table{"CC": []any{"b"}, "BCC": []any{"c"}}, Body: []byte("x"),
	}))
	for _, q := range []string{"a", "b", "c"} {
		m := getOne(t, ch, q)
		if _, ok := m.Headers["BCC"]; ok {
			t.Fatalf("queue %s: BCC header delivered", q)
		}
		if cc, _ := m.Headers["CC"].([]any); len(cc) != 1 {
			t.Fatalf("queue %s: CC header %#v", q, m.Headers["CC"])
		}
	}
}

func TestDeduplication(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "dd", amqp091.Table{"x-message-deduplication": true, "x-cache-size": int32(100)})
	must(t, ch.ExchangeDeclare("dx", "fanout", false, false, false, false, amqp091.Table{"x-message-deduplication": true}))
	mustDeclare(t, ch, "dxq", nil)
	must(t, ch.QueueBind("dxq", "", "dx", false, nil))
	must(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 10))
	send := func(ex, key string, p amqp091.Publishing) {
		must(t, ch.Publish(ex, key, false, false, p))
		if c := nextConfirm(t, confirms); !c.Ack {
			t.Fatalf("duplicate not confirmed: %+v", c)
		}
	}
	send("", "dd", amqp091.Publishing{MessageId: "m1"})
	send("", "dd", amqp091.Publishing{MessageId: "m1"})
	send("", "dd", amqp091.Publishing{Headers: amqp091.Table{"x-deduplication-header": "k"}})
	send("", "dd", amqp091.Publishing{Headers: amqp091.Table{"x-deduplication-header": "k"}})
	send("", "dd", amqp091.Publishing{}) // no key: never a duplicate
	send("", "dd", amqp091.Publishing{})
	if n := queueInfo(ts, "dd").Ready; n != 4 {
		t.Fatalf("queue dedup kept %d, want 4", n)
	}
	send("dx", "", amqp091.Publishing{MessageId: "e1"})
	send("dx", "", amqp091.Publishing{MessageId: "e1"})
	if n := queueInfo(ts, "dxq").Ready; n != 1 {
		t.Fatalf("exchange dedup kept %d, want 1", n)
	}
}

// The texts are RabbitMQ 3.10.8's for the same declarations.
func TestInvalidQueueArguments(t *testing.T) {
	ts := startServer(t)
	conn := ts.dial(t)
	const q = "for queue 'bad' in vhost '/'"
	cases := []struct {
		args amqp091.Table
		text string
	}{
		{amqp091.Table{"x-message-ttl": int32(-1)}, "invalid arg 'x-message-ttl' " + q + ": {value_negative,-1}"},
		{amqp091.Table{"x-message-ttl": "10"}, "invalid arg 'x-message-ttl' " + q + `: "expected integer, got longstr"`},
		{amqp091.Table{"x-message-ttl": int64(315360000001)}, "invalid arg 'x-message-ttl' " + q + ": {value_too_large,315360000001}"},
		{amqp091.Table{"x-message-ttl": time.Unix(5, 0)}, "invalid arg 'x-message-ttl' " + q + `: "expected integer, got timestamp"`},
		{amqp091.Table{"x-overflow": "sometimes"}, "invalid arg 'x-overflow' " + q + ": invalid_overflow"},
		{amqp091.Table{"x-overflow": int32(1)}, "invalid arg 'x-overflow' " + q + ": {unacceptable_type,signedint}"},
		{amqp091.Table{"x-max-priority": int32(256)}, "invalid arg 'x-max-priority' " + q + ": {max_value_exceeded,256}"},
		{amqp091.Table{"x-max-priority": "1"}, "invalid arg 'x-max-priority' " + q + `: "expected integer, got longstr"`},
		{amqp091.Table{"x-expires": int32(0)}, "invalid arg 'x-expires' " + q + ": {value_zero,0}"},
		{amqp091.Table{"x-expires": int32(-1)}, "invalid arg 'x-expires' " + q + ": {value_negative,-1}"},
		{amqp091.Table{"x-max-length": int32(-5)}, "invalid arg 'x-max-length' " + q + ": {value_negative,-5}"},
		{amqp091.Table{"x-max-length-bytes": float64(5)}, "invalid arg 'x-max-length-bytes' " + q + `: "expected integer, got double"`},
		{amqp091.Table{"x-dead-letter-exchange": int32(1)}, "invalid type 'signedint' for arg 'x-dead-letter-exchange' in queue 'bad' in vhost '/'"},
		{amqp091.Table{"x-dead-letter-routing-key": "k"}, "invalid arg 'x-dead-letter-routing-key' " + q + ": routing_key_but_no_dlx_defined"},
		{amqp091.Table{"x-dead-letter-exchange": "x", "x-dead-letter-routing-key": int32(1)}, "invalid arg 'x-dead-letter-routing-key' " + q + ": {unacceptable_type,signedint}"},
		{amqp091.Table{"x-single-active-consumer": "yes"}, "invalid arg 'x-single-active-consumer' " + q + ": {unacceptable_type,longstr}"},
		{amqp091.Table{"x-queue-mode": "bogus"}, "invalid arg 'x-queue-mode' " + q + `: "unsupported queue mode 'bogus'"`},
		{amqp091.Table{"x-queue-version": int32(3)}, "invalid arg 'x-queue-version' " + q + `: "unsupported queue version '3'"`},
		{amqp091.Table{"x-max-age": "1D"}, "invalid arg 'x-max-age' " + q + " of queue type rabbit_classic_queue"},
		{amqp091.Table{"x-stream-max-segment-size-bytes": int32(1)}, "invalid arg 'x-stream-max-segment-size-bytes' " + q + " of queue type rabbit_classic_queue"},
		{amqp091.Table{"x-max-in-memory-length": int32(1)}, "invalid arg 'x-max-in-memory-length' " + q + " of queue type rabbit_classic_queue"},
		// Warren's classic queues honour x-delivery-limit (RabbitMQ 3.10 refuses it there).
		{amqp091.Table{"x-delivery-limit": int32(-1)}, "invalid arg 'x-delivery-limit' " + q + ": {value_negative,-1}"},
	}
	for _, c := range cases {
		ch, err := conn.Channel()
		must(t, err)
		_, err = ch.QueueDeclare("bad", false, false, false, false, c.args)
		expectCode(t, err, 406)
		if want := "PRECONDITION_FAILED - " + c.text; err.(*amqp091.Error).Reason != want {
			t.Errorf("%v: %v\nwant %q", c.args, err, want)
		}
	}
	// Accepted as RabbitMQ accepts them.
	ch, err := conn.Channel()
	must(t, err)
	mustDeclare(t, ch, "good", amqp091.Table{"x-queue-mode": "lazy", "x-queue-version": int32(2), "x-message-ttl": int64(315360000000)})
}
