package server

import (
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

func TestPublishConsumeAck(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	q := mustDeclare(t, ch, "work", nil)
	for i := range 10 {
		publish(t, ch, "", q.Name, fmt.Sprint(i))
	}
	d, err := ch.Consume(q.Name, "c1", false, false, false, false, nil)
	must(t, err)
	for i := range 10 {
		m := recv(t, d)
		if string(m.Body) != fmt.Sprint(i) || m.Redelivered || m.ConsumerTag != "c1" || m.RoutingKey != "work" {
			t.Fatalf("delivery %d: %+v", i, m)
		}
		must(t, m.Ack(false))
	}
	waitFor(t, 5*time.Second, "queue drained", func() bool {
		info := ts.Vhost("/").queue("work").Info()
		return info.Ready == 0 && info.Unacked == 0 && info.Acked == 10
	})
}

func TestPropertiesAndLargeBodyRoundTrip(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	q := mustDeclare(t, ch, "", nil)
	body := make([]byte, 1<<20) // spans several frames of 128 KiB
	for i := range body {
		body[i] = byte(i * 7)
	}
	pub := amqp091.Publishing{
		ContentType: "application/octet-stream", ContentEncoding: "gzip",
		Headers:      amqp091.Table{"k": "v", "n": int32(5), "nested": amqp091.Table{"a": true}},
		DeliveryMode: 2, Priority: 3, CorrelationId: "corr", ReplyTo: "reply", Expiration: "60000",
		MessageId: "mid", Timestamp: time.Unix(1700000000, 0), Type: "t", UserId: "guest", AppId: "app",
		Body: body,
	}
	must(t, ch.Publish("", q.Name, false, false, pub))
	m, ok, err := ch.Get(q.Name, true)
	must(t, err)
	if !ok {
		t.Fatal("get-empty")
	}
	if len(m.Body) != len(body) || string(m.Body) != string(body) {
		t.Fatal("body differs")
	}
	if m.ContentType != pub.ContentType || m.ContentEncoding != pub.ContentEncoding || m.DeliveryMode != 2 ||
		m.Priority != 3 || m.CorrelationId != "corr" || m.ReplyTo != "reply" || m.Expiration != "60000" ||
		m.MessageId != "mid" || !m.Timestamp.Equal(pub.Timestamp) || m.Type != "t" || m.UserId != "guest" ||
		m.AppId != "app" || m.Headers["k"] != "v" || m.Headers["n"] != int32(5) {
		t.Fatalf("properties differ: %+v", m)
	}
	if nested, _ := m.Headers["nested"].(amqp091.Table); nested["a"] != true {
		t.Fatalf("nested header: %#v", m.Headers["nested"])
	}
}

func TestGetAndGetEmpty(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	q := mustDeclare(t, ch, "g", nil)
	_, ok, err := ch.Get(q.Name, false)
	must(t, err)
	if ok {
		t.Fatal("get on empty queue returned a message")
	}
	for i := range 3 {
		publish(t, ch, "", "g", fmt.Sprint(i))
	}
	m, ok, err := ch.Get("g", false)
	must(t, err)
	if !ok || string(m.Body) != "0" || m.MessageCount != 2 {
		t.Fatalf("get: ok=%v body=%q count=%d", ok, m.Body, m.MessageCount)
	}
	must(t, m.Nack(false, true)) // back to the head, redelivered
	m, ok, err = ch.Get("g", true)
	must(t, err)
	if !ok || string(m.Body) != "0" || !m.Redelivered || m.MessageCount != 2 {
		t.Fatalf("after requeue: ok=%v body=%q redelivered=%v count=%d", ok, m.Body, m.Redelivered, m.MessageCount)
	}
}

func TestRoundRobinAndPrefetch(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "rr", nil)
	_, c1 := ts.channel(t)
	_, c2 := ts.channel(t)
	must(t, c1.Qos(1, 0, false))
	must(t, c2.Qos(1, 0, false))
	d1, err := c1.Consume("rr", "", false, false, false, false, nil)
	must(t, err)
	d2, err := c2.Consume("rr", "", false, false, false, false, nil)
	must(t, err)
	for i := range 4 {
		publish(t, ch, "", "rr", fmt.Sprint(i))
	}
	// Prefetch 1: each consumer holds one message until it acks.
	a := recv(t, d1)
	b := recv(t, d2)
	if string(a.Body) != "0" || string(b.Body) != "1" {
		t.Fatalf("round robin: %q %q", a.Body, b.Body)
	}
	expectNone(t, d1, c1, ch)
	expectNone(t, d2, c2, ch)
	must(t, a.Ack(false))
	if m := recv(t, d1); string(m.Body) != "2" {
		t.Fatalf("after ack: %q", m.Body)
	}
	must(t, b.Ack(false))
	if m := recv(t, d2); string(m.Body) != "3" {
		t.Fatalf("after ack: %q", m.Body)
	}
}

func TestGlobalPrefetch(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "g1", nil)
	mustDeclare(t, ch, "g2", nil)
	_, c := ts.channel(t)
	must(t, c.Qos(2, 0, true)) // two unacked across the whole channel
	d1, err := c.Consume("g1", "", false, false, false, false, nil)
	must(t, err)
	d2, err := c.Consume("g2", "", false, false, false, false, nil)
	must(t, err)
	for i := range 3 {
		publish(t, ch, "", "g1", fmt.Sprint("a", i))
		publish(t, ch, "", "g2", fmt.Sprint("b", i))
	}
	var got []amqp091.Delivery
	for len(got) < 2 {
		select {
		case m := <-d1:
			got = append(got, m)
		case m := <-d2:
			got = append(got, m)
		case <-time.After(5 * time.Second):
			t.Fatal("deliveries missing")
		}
	}
	expectNone(t, d1, c, ch)
	expectNone(t, d2, c, ch)
	must(t, got[0].Ack(false))
	select {
	case <-d1:
	case <-d2:
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery after ack freed global credit")
	}
}

func TestPrefetchAppliesToLaterConsumersOnly(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "p", nil)
	for i := range 5 {
		publish(t, ch, "", "p", fmt.Sprint(i))
	}
	_, c := ts.channel(t)
	d, err := c.Consume("p", "unlimited", false, false, false, false, nil)
	must(t, err)
	for range 5 {
		recv(t, d)
	}
	must(t, c.Qos(1, 0, false))
	if info := ts.Vhost("/").queue("p").Info(); info.Unacked != 5 {
		t.Fatalf("unacked %d, want 5", info.Unacked)
	}
}

func TestNackRejectRequeueOrder(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "order", nil)
	for i := range 5 {
		publish(t, ch, "", "order", fmt.Sprint(i))
	}
	_, c := ts.channel(t)
	d, err := c.Consume("order", "", false, false, false, false, nil)
	must(t, err)
	var ms []amqp091.Delivery
	for range 5 {
		ms = append(ms, recv(t, d))
	}
	// Reject 1 without requeue (dropped), nack 0..3 multiple with requeue: 0, 2, 3 come back in order.
	must(t, ms[1].Reject(false))
	must(t, ms[3].Nack(true, true))
	for _, want := range []string{"0", "2", "3"} {
		m := recv(t, d)
		if string(m.Body) != want || !m.Redelivered {
			t.Fatalf("got %q redelivered=%v, want %q redelivered", m.Body, m.Redelivered, want)
		}
		must(t, m.Ack(false))
	}
	must(t, ms[4].Ack(false))
	waitFor(t, 5*time.Second, "queue empty", func() bool {
		i := ts.Vhost("/").queue("order").Info()
		return i.Ready == 0 && i.Unacked == 0
	})
}

func TestAckMultiple(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "am", nil)
	for i := range 10 {
		publish(t, ch, "", "am", fmt.Sprint(i))
	}
	_, c := ts.channel(t)
	d, err := c.Consume("am", "", false, false, false, false, nil)
	must(t, err)
	var last amqp091.Delivery
	for range 10 {
		last = recv(t, d)
	}
	must(t, last.Ack(true))
	waitFor(t, 5*time.Second, "all acked", func() bool { return ts.Vhost("/").queue("am").Info().Unacked == 0 })
}

func TestChannelCloseRequeuesUnacked(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "rq", nil)
	publish(t, ch, "", "rq", "x")
	conn2, c := ts.channel(t)
	d, err := c.Consume("rq", "", false, false, false, false, nil)
	must(t, err)
	recv(t, d)
	must(t, conn2.Close())
	m, ok, err := ch.Get("rq", true)
	must(t, err)
	if !ok || !m.Redelivered || string(m.Body) != "x" {
		t.Fatalf("after close: ok=%v redelivered=%v", ok, m.Redelivered)
	}
}

func TestRecover(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "rec", nil)
	publish(t, ch, "", "rec", "x")
	d, err := ch.Consume("rec", "", false, false, false, false, nil)
	must(t, err)
	recv(t, d)
	must(t, ch.Recover(true))
	if m := recv(t, d); !m.Redelivered {
		t.Fatal("recovered message not marked redelivered")
	}
	err = ch.Recover(false)
	expectCode(t, err, 540)
}

func TestUnknownDeliveryTag(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	must(t, ch.Ack(42, false))
	e := waitClose(t, closed)
	if e.Code != 406 || e.Reason != "PRECONDITION_FAILED - unknown delivery tag 42" {
		t.Fatalf("got %v", e)
	}
}

func TestNoAckConsumer(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "na", nil)
	d, err := ch.Consume("na", "", true, false, false, false, nil)
	must(t, err)
	for i := range 100 {
		publish(t, ch, "", "na", fmt.Sprint(i))
	}
	for i := range 100 {
		if m := recv(t, d); string(m.Body) != fmt.Sprint(i) {
			t.Fatalf("got %q want %d", m.Body, i)
		}
	}
	if i := ts.Vhost("/").queue("na").Info(); i.Unacked != 0 || i.Ready != 0 {
		t.Fatalf("noack left state: %+v", i)
	}
}

func TestCancelAndConsumerTags(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	mustDeclare(t, ch, "ct", nil)
	d, err := ch.Consume("ct", "mine", false, false, false, false, nil)
	must(t, err)
	publish(t, ch, "", "ct", "a")
	m := recv(t, d)
	if m.ConsumerTag != "mine" {
		t.Fatalf("consumer tag %q", m.ConsumerTag)
	}
	must(t, ch.Cancel(m.ConsumerTag, false))
	select {
	case _, ok := <-d:
		if ok {
			t.Fatal("delivery after cancel")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("delivery channel not closed after cancel")
	}
	_, err = ch.Consume("ct", "dup", false, false, false, false, nil)
	must(t, err)
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	_, err = ch.Consume("ct", "dup", false, false, false, false, nil)
	expectCode(t, err, 530)
	if e := waitClose(t, closed); e.Code != 530 {
		t.Fatalf("connection close %v", e)
	}
}

func TestExclusiveConsumer(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "ex", nil)
	_, err := ch.Consume("ex", "", false, true, false, false, nil)
	must(t, err)
	_, ch2 := ts.channel(t)
	_, err = ch2.Consume("ex", "", false, false, false, false, nil)
	expectCode(t, err, 403)
	_, ch3 := ts.channel(t)
	mustDeclare(t, ch3, "ex2", nil)
	_, err = ch3.Consume("ex2", "", false, false, false, false, nil)
	must(t, err)
	_, ch4 := ts.channel(t)
	_, err = ch4.Consume("ex2", "", false, true, false, false, nil)
	expectCode(t, err, 403)
}

func TestServerCancelsConsumerOnQueueDelete(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "gone", nil)
	_, c := ts.channel(t)
	cancels := c.NotifyCancel(make(chan string, 1))
	_, err := c.Consume("gone", "watcher", false, false, false, false, nil)
	must(t, err)
	_, err = ch.QueueDelete("gone", false, false, false)
	must(t, err)
	select {
	case tag := <-cancels:
		if tag != "watcher" {
			t.Fatalf("cancelled %q", tag)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no basic.cancel from the server")
	}
}

func TestMandatoryReturn(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	returns := ch.NotifyReturn(make(chan amqp091.Return, 1))
	must(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	must(t, ch.Publish("", "nowhere", true, false, amqp091.Publishing{Body: []byte("lost"), Headers: amqp091.Table{"h": "v"}}))
	select {
	case r := <-returns:
		if r.ReplyCode != 312 || r.ReplyText != "NO_ROUTE" || string(r.Body) != "lost" || r.RoutingKey != "nowhere" || r.Headers["h"] != "v" {
			t.Fatalf("return %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no basic.return")
	}
	if c := nextConfirm(t, confirms); !c.Ack || c.DeliveryTag != 1 {
		t.Fatalf("confirm after return: %+v", c)
	}
	// Without mandatory an unroutable message is dropped silently.
	must(t, ch.Publish("", "nowhere", false, false, amqp091.Publishing{Body: []byte("x")}))
	if c := nextConfirm(t, confirms); !c.Ack || c.DeliveryTag != 2 {
		t.Fatalf("confirm: %+v", c)
	}
	select {
	case r := <-returns:
		t.Fatalf("unexpected return %+v", r)
	default:
	}
}

func TestImmediateRefused(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	must(t, ch.Publish("", "q", false, true, amqp091.Publishing{}))
	if e := waitClose(t, closed); e.Code != 540 || e.Reason != "NOT_IMPLEMENTED - immediate=true" {
		t.Fatalf("got %v", e)
	}
}

func TestPublisherConfirms(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "cf", nil)
	must(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1000))
	const n = 500
	for i := range n {
		publish(t, ch, "", "cf", fmt.Sprint(i))
	}
	for i := 1; i <= n; i++ {
		select {
		case c := <-confirms:
			if !c.Ack || c.DeliveryTag != uint64(i) {
				t.Fatalf("confirm %d: %+v", i, c)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("confirm %d missing", i)
		}
	}
}

func TestTransactions(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "tx", nil)
	must(t, ch.Tx())
	publish(t, ch, "", "tx", "a")
	if i := ts.Vhost("/").queue("tx").Info(); i.Ready != 0 {
		t.Fatal("publish visible before commit")
	}
	must(t, ch.TxRollback())
	if i := ts.Vhost("/").queue("tx").Info(); i.Ready != 0 {
		t.Fatal("rolled back publish visible")
	}
	publish(t, ch, "", "tx", "b")
	must(t, ch.TxCommit())
	if i := ts.Vhost("/").queue("tx").Info(); i.Ready != 1 {
		t.Fatalf("committed publish: ready %d", i.Ready)
	}
	// Acks take effect at commit; rollback puts them back as unacked.
	m, ok, err := ch.Get("tx", false)
	must(t, err)
	if !ok {
		t.Fatal("empty")
	}
	must(t, m.Ack(false))
	must(t, ch.TxRollback())
	if i := ts.Vhost("/").queue("tx").Info(); i.Unacked != 1 {
		t.Fatalf("rolled back ack: unacked %d", i.Unacked)
	}
	must(t, m.Ack(false))
	must(t, ch.TxCommit())
	if i := ts.Vhost("/").queue("tx").Info(); i.Unacked != 0 {
		t.Fatalf("committed ack: unacked %d", i.Unacked)
	}
	err = ch.Confirm(false)
	expectCode(t, err, 406)

	_, ch2 := ts.channel(t)
	must(t, ch2.Confirm(false))
	expectCode(t, ch2.Tx(), 406)
	_, ch3 := ts.channel(t)
	expectCode(t, ch3.TxCommit(), 406)
}

func TestQosPrefetchSizeRefused(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	expectCode(t, ch.Qos(0, 1024, false), 540)
}
