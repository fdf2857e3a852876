package server

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// routedTo publishes one message with key and headers to exchange and returns
// the names of the queues among candidates that received it.
func routedTo(t *testing.T, ch *amqp091.Channel, exchange, key string, headers amqp091.Table, candidates ...string) []string {
	t.Helper()
	for _, q := range candidates {
		_, err := ch.QueuePurge(q, false)
		must(t, err)
	}
	must(t, ch.Publish(exchange, key, false, false, amqp091.Publishing{Headers: headers, Body: []byte(key)}))
	var got []string
	for _, q := range candidates {
		// QueueDeclarePassive is synchronous, so the publish before it has been routed.
		info, err := ch.QueueDeclarePassive(q, false, false, false, false, nil)
		must(t, err)
		if info.Messages > 0 {
			got = append(got, q)
		}
	}
	sort.Strings(got)
	return got
}

func TestExchangeTypesRoute(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	for _, q := range []string{"q1", "q2", "q3"} {
		mustDeclare(t, ch, q, nil)
	}
	must(t, ch.ExchangeDeclare("d", "direct", false, false, false, false, nil))
	must(t, ch.ExchangeDeclare("f", "fanout", false, false, false, false, nil))
	must(t, ch.ExchangeDeclare("t", "topic", false, false, false, false, nil))
	must(t, ch.ExchangeDeclare("h", "headers", false, false, false, false, nil))
	must(t, ch.QueueBind("q1", "red", "d", false, nil))
	must(t, ch.QueueBind("q2", "red", "d", false, nil))
	must(t, ch.QueueBind("q3", "blue", "d", false, nil))
	must(t, ch.QueueBind("q1", "", "f", false, nil))
	must(t, ch.QueueBind("q3", "", "f", false, nil))
	must(t, ch.QueueBind("q1", "a.*.c", "t", false, nil))
	must(t, ch.QueueBind("q2", "a.#", "t", false, nil))
	must(t, ch.QueueBind("q3", "#", "t", false, nil))
	must(t, ch.QueueBind("q1", "", "h", false, amqp091.Table{"x-match": "all", "a": "1", "b": "2"}))
	must(t, ch.QueueBind("q2", "", "h", false, amqp091.Table{"x-match": "any", "a": "1", "b": "2"}))
	all := []string{"q1", "q2", "q3"}
	cases := []struct {
		ex, key string
		hdr     amqp091.Table
		want    string
	}{
		{"d", "red", nil, "q1,q2"},
		{"d", "blue", nil, "q3"},
		{"d", "green", nil, ""},
		{"f", "whatever", nil, "q1,q3"},
		{"t", "a.b.c", nil, "q1,q2,q3"},
		{"t", "a", nil, "q2,q3"},
		{"t", "a.b.c.d", nil, "q2,q3"},
		{"t", "", nil, "q3"},
		{"h", "", amqp091.Table{"a": "1", "b": "2"}, "q1,q2"},
		{"h", "", amqp091.Table{"a": "1"}, "q2"},
		{"h", "", amqp091.Table{"c": "3"}, ""},
		{"", "q2", nil, "q2"},
		{"amq.direct", "q1", nil, ""},
	}
	for _, c := range cases {
		got := strings.Join(routedTo(t, ch, c.ex, c.key, c.hdr, all...), ",")
		if got != c.want {
			t.Errorf("%s %q %v: routed to [%s], want [%s]", c.ex, c.key, c.hdr, got, c.want)
		}
	}
	// Unbinding stops the routing.
	must(t, ch.QueueUnbind("q2", "red", "d", nil))
	if got := strings.Join(routedTo(t, ch, "d", "red", nil, all...), ","); got != "q1" {
		t.Fatalf("after unbind: [%s]", got)
	}
}

func TestExchangeToExchangeBindingsAndLoops(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "sink", nil)
	must(t, ch.ExchangeDeclare("e1", "fanout", false, false, false, false, nil))
	must(t, ch.ExchangeDeclare("e2", "direct", false, false, false, false, nil))
	must(t, ch.ExchangeBind("e2", "", "e1", false, nil))
	must(t, ch.ExchangeBind("e1", "k", "e2", false, nil)) // a loop
	must(t, ch.QueueBind("sink", "k", "e2", false, nil))
	if got := routedTo(t, ch, "e1", "k", nil, "sink"); len(got) != 1 {
		t.Fatal("e2e binding did not route")
	}
	info, err := ch.QueueDeclarePassive("sink", false, false, false, false, nil)
	must(t, err)
	if info.Messages != 1 {
		t.Fatalf("loop delivered %d copies", info.Messages)
	}
	must(t, ch.ExchangeUnbind("e2", "", "e1", false, nil))
	if got := routedTo(t, ch, "e1", "k", nil, "sink"); len(got) != 0 {
		t.Fatal("routed after exchange.unbind")
	}
}

func TestExchangeDeclareErrors(t *testing.T) {
	ts := startServer(t)
	conn := ts.dial(t)
	fresh := func() *amqp091.Channel {
		ch, err := conn.Channel()
		must(t, err)
		return ch
	}
	ch := fresh()
	must(t, ch.ExchangeDeclare("x", "direct", true, false, false, false, nil))
	err := ch.ExchangeDeclare("x", "fanout", true, false, false, false, nil)
	expectCode(t, err, 406)
	if !strings.Contains(err.Error(), "inequivalent arg 'type' for exchange 'x' in vhost '/': received 'fanout' but current is 'direct'") {
		t.Fatalf("text: %v", err)
	}
	expectCode(t, fresh().ExchangeDeclare("x", "direct", false, false, false, false, nil), 406)
	expectCode(t, fresh().ExchangeDeclare("amq.custom", "direct", false, false, false, false, nil), 403)
	expectCode(t, fresh().ExchangeDeclarePassive("missing", "direct", false, false, false, false, nil), 404)
	must(t, fresh().ExchangeDeclare("h", "headers", false, false, false, false, nil))
	mustDeclare(t, fresh(), "hq", nil)
	err = fresh().QueueBind("hq", "", "h", false, amqp091.Table{"x-match": "some"})
	expectCode(t, err, 406)
	if !strings.Contains(err.Error(), "Invalid x-match field value") {
		t.Fatalf("text: %v", err)
	}
	must(t, fresh().ExchangeDeclarePassive("amq.topic", "topic", true, false, false, false, nil))
	// Unknown exchange type is a connection error, 503.
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	expectCode(t, fresh().ExchangeDeclare("y", "nosuchtype", false, false, false, false, nil), 503)
	if e := waitClose(t, closed); e.Code != 503 {
		t.Fatalf("connection closed with %v", e)
	}
}

func TestExchangeDelete(t *testing.T) {
	ts := startServer(t)
	conn := ts.dial(t)
	fresh := func() *amqp091.Channel {
		ch, err := conn.Channel()
		must(t, err)
		return ch
	}
	ch := fresh()
	mustDeclare(t, ch, "q", nil)
	must(t, ch.ExchangeDeclare("x", "direct", false, false, false, false, nil))
	must(t, ch.QueueBind("q", "k", "x", false, nil))
	expectCode(t, ch.ExchangeDelete("x", true, false), 406)
	ch = fresh()
	must(t, ch.ExchangeDelete("x", false, false))
	expectCode(t, ch.ExchangeDeclarePassive("x", "direct", false, false, false, false, nil), 404)
	expectCode(t, fresh().ExchangeDelete("amq.direct", false, false), 403)
	expectCode(t, fresh().ExchangeDelete("", false, false), 403)
	must(t, fresh().ExchangeDelete("never-existed", false, false))
}

func TestAutoDeleteExchange(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "q", nil)
	must(t, ch.ExchangeDeclare("ad", "fanout", false, true, false, false, nil))
	must(t, ch.QueueBind("q", "", "ad", false, nil))
	must(t, ch.QueueUnbind("q", "", "ad", nil))
	expectCode(t, ch.ExchangeDeclarePassive("ad", "fanout", false, true, false, false, nil), 404)
}

func TestInternalExchangeRefusesPublish(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	must(t, ch.ExchangeDeclare("int", "fanout", false, false, true, false, nil))
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	publish(t, ch, "int", "", "x")
	if e := waitClose(t, closed); e.Code != 403 {
		t.Fatalf("got %v", e)
	}
}

func TestPublishToMissingExchange(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	publish(t, ch, "missing", "", "x")
	e := waitClose(t, closed)
	if e.Code != 404 || e.Reason != "NOT_FOUND - no exchange 'missing' in vhost '/'" {
		t.Fatalf("got %v", e)
	}
}

func TestQueueDeclareSemantics(t *testing.T) {
	ts := startServer(t)
	conn := ts.dial(t)
	fresh := func() *amqp091.Channel {
		ch, err := conn.Channel()
		must(t, err)
		return ch
	}
	ch := fresh()
	q, err := ch.QueueDeclare("dq", true, false, false, false, amqp091.Table{"x-max-length": int32(10)})
	must(t, err)
	for i := range 3 {
		publish(t, ch, "", "dq", fmt.Sprint(i))
	}
	_, err = ch.Consume("dq", "c", false, false, false, false, nil)
	must(t, err)
	_, c2 := ts.channel(t)
	must(t, c2.Qos(1, 0, false))
	_, err = c2.Consume("dq", "c2", false, false, false, false, nil)
	must(t, err)
	p, err := fresh().QueueDeclarePassive("dq", false, false, false, false, nil)
	must(t, err)
	if p.Consumers != 2 || p.Name != q.Name {
		t.Fatalf("passive: %+v", p)
	}
	_, err = fresh().QueueDeclarePassive("none", false, false, false, false, nil)
	expectCode(t, err, 404)
	if !strings.Contains(err.Error(), "no queue 'none' in vhost '/'") {
		t.Fatalf("text %v", err)
	}
	_, err = fresh().QueueDeclare("dq", false, false, false, false, amqp091.Table{"x-max-length": int32(10)})
	expectCode(t, err, 406)
	_, err = fresh().QueueDeclare("dq", true, false, false, false, amqp091.Table{"x-max-length": int32(20)})
	expectCode(t, err, 406)
	_, err = fresh().QueueDeclare("dq", true, false, false, false, amqp091.Table{"x-max-length": int32(10)})
	must(t, err)
	_, err = fresh().QueueDeclare("amq.mine", false, false, false, false, nil)
	expectCode(t, err, 403)
}

func TestExclusiveQueues(t *testing.T) {
	ts := startServer(t)
	owner, ch := ts.channel(t)
	_, err := ch.QueueDeclare("mine", false, false, true, false, nil)
	must(t, err)
	other := ts.dial(t)
	for name, op := range map[string]func(*amqp091.Channel) error{
		"declare": func(c *amqp091.Channel) error {
			_, err := c.QueueDeclare("mine", false, false, true, false, nil)
			return err
		},
		"consume": func(c *amqp091.Channel) error {
			_, err := c.Consume("mine", "", false, false, false, false, nil)
			return err
		},
		"bind":   func(c *amqp091.Channel) error { return c.QueueBind("mine", "k", "amq.direct", false, nil) },
		"delete": func(c *amqp091.Channel) error { _, err := c.QueueDelete("mine", false, false, false); return err },
		"purge":  func(c *amqp091.Channel) error { _, err := c.QueuePurge("mine", false); return err },
		"get":    func(c *amqp091.Channel) error { _, _, err := c.Get("mine", false); return err },
	} {
		c, err := other.Channel()
		must(t, err)
		if err := op(c); amqpCode(err) != 405 {
			t.Errorf("%s from another connection: %v, want 405", name, err)
		}
	}
	must(t, owner.Close())
	waitFor(t, 5e9, "exclusive queue deleted", func() bool { return ts.Vhost("/").queue("mine") == nil })
}

func TestAutoDeleteQueue(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	_, err := ch.QueueDeclare("ad", false, true, false, false, nil)
	must(t, err)
	_, err = ch.Consume("ad", "a", false, false, false, false, nil)
	must(t, err)
	_, err = ch.Consume("ad", "b", false, false, false, false, nil)
	must(t, err)
	must(t, ch.Cancel("a", false))
	if ts.Vhost("/").queue("ad") == nil {
		t.Fatal("deleted while a consumer remains")
	}
	must(t, ch.Cancel("b", false))
	if ts.Vhost("/").queue("ad") != nil {
		t.Fatal("auto-delete queue survived its last consumer")
	}
}

func TestQueuePurgeAndDelete(t *testing.T) {
	ts := startServer(t)
	conn := ts.dial(t)
	fresh := func() *amqp091.Channel {
		ch, err := conn.Channel()
		must(t, err)
		return ch
	}
	ch := fresh()
	mustDeclare(t, ch, "pq", nil)
	for range 4 {
		publish(t, ch, "", "pq", "x")
	}
	n, err := ch.QueuePurge("pq", false)
	must(t, err)
	if n != 4 {
		t.Fatalf("purged %d", n)
	}
	publish(t, ch, "", "pq", "x")
	_, err = fresh().QueueDelete("pq", false, true, false)
	expectCode(t, err, 406)
	c := fresh()
	_, err = c.Consume("pq", "", false, false, false, false, nil)
	must(t, err)
	_, err = fresh().QueueDelete("pq", true, false, false)
	expectCode(t, err, 406)
	_, err = fresh().QueueDelete("pq", false, false, false)
	must(t, err)
	n, err = fresh().QueueDelete("never", false, false, false)
	must(t, err)
	if n != 0 {
		t.Fatal("delete of a missing queue reported messages")
	}
}

func TestBindErrors(t *testing.T) {
	ts := startServer(t)
	conn := ts.dial(t)
	fresh := func() *amqp091.Channel {
		ch, err := conn.Channel()
		must(t, err)
		return ch
	}
	mustDeclare(t, fresh(), "bq", nil)
	expectCode(t, fresh().QueueBind("bq", "k", "missing", false, nil), 404)
	expectCode(t, fresh().QueueBind("missing", "k", "amq.direct", false, nil), 404)
	expectCode(t, fresh().QueueBind("bq", "k", "", false, nil), 403)
	expectCode(t, fresh().ExchangeBind("missing", "k", "amq.direct", false, nil), 404)
}

// TestUnbindMissingEnds checks RabbitMQ 3.10's answers, as the reference
// node gave them: queue.unbind and exchange.unbind with a missing end are
// unbind-ok, as is unbinding another connection's exclusive queue from what
// does not bind it; a binding that exists is still locked (405), and the
// default exchange refused (403).
func TestUnbindMissingEnds(t *testing.T) {
	ts := startServer(t)
	owner, och := ts.channel(t)
	conn := ts.dial(t)
	ch, err := conn.Channel()
	must(t, err)
	mustDeclare(t, ch, "uq", nil)
	must(t, ch.ExchangeDeclare("ux", "direct", false, false, false, false, nil))
	must(t, ch.QueueUnbind("no-queue", "k", "no-exchange", nil))
	must(t, ch.QueueUnbind("no-queue", "k", "ux", nil))
	must(t, ch.QueueUnbind("uq", "k", "no-exchange", nil))
	must(t, ch.QueueUnbind("uq", "k", "ux", nil))
	must(t, ch.ExchangeUnbind("no-dest", "k", "no-source", false, nil))
	must(t, ch.ExchangeUnbind("no-dest", "k", "ux", false, nil))
	must(t, ch.ExchangeUnbind("ux", "k", "no-source", false, nil))
	must(t, ch.ExchangeUnbind("ux", "k", "amq.direct", false, nil))

	_, err = och.QueueDeclare("mine", false, false, true, false, nil)
	must(t, err)
	must(t, och.QueueBind("mine", "k", "amq.direct", false, nil))
	must(t, ch.QueueUnbind("mine", "k", "no-exchange", nil))
	must(t, ch.QueueUnbind("mine", "other", "amq.direct", nil))
	expectRefusal(t, ch.QueueUnbind("mine", "k", "amq.direct", nil), 405,
		"RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'mine' in vhost '/'. It could be "+
			"originally declared on another connection or the exclusive property value does not match that of the original declaration.")
	ch, err = conn.Channel()
	must(t, err)
	expectRefusal(t, ch.QueueUnbind("uq", "uq", "", nil), 403, "ACCESS_REFUSED - operation not permitted on the default exchange")
	must(t, owner.Close())
}

func TestPermissions(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.Users = []User{{Name: "app", Password: "pw", Permissions: map[string]Permission{
			"/": {Configure: "^app\\.", Write: "^app\\.|^amq\\.default$", Read: "^app\\."},
		}}}
		c.Vhosts = []string{"other"}
	})
	url := "amqp://app:pw@" + ts.addr + "/"
	conn, err := amqp091.Dial(url)
	must(t, err)
	defer conn.Close()
	fresh := func() *amqp091.Channel {
		ch, err := conn.Channel()
		must(t, err)
		return ch
	}
	_, err = fresh().QueueDeclare("app.q", false, false, false, false, nil)
	must(t, err)
	_, err = fresh().QueueDeclare("other.q", false, false, false, false, nil)
	expectCode(t, err, 403)
	if !strings.Contains(err.Error(), "access to queue 'other.q' in vhost '/' refused for user 'app'") {
		t.Fatalf("text %v", err)
	}
	_, err = fresh().Consume("app.q", "", false, false, false, false, nil)
	must(t, err)
	expectCode(t, fresh().QueueBind("app.q", "k", "amq.direct", false, nil), 403) // no read on amq.direct
	ch := fresh()
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	publish(t, ch, "amq.fanout", "", "x")
	if e := waitClose(t, closed); e.Code != 403 {
		t.Fatalf("publish without write permission: %v", e)
	}
	publish(t, fresh(), "", "app.q", "ok") // default exchange is "amq.default" for permissions
	_, err = amqp091.Dial("amqp://app:pw@" + ts.addr + "/other")
	expectCode(t, err, 530)
	_, err = amqp091.Dial("amqp://app:bad@" + ts.addr + "/")
	expectCode(t, err, 403)
}

func TestAMQPLainLogin(t *testing.T) {
	ts := startServer(t)
	conn, err := amqp091.DialConfig(ts.url, amqp091.Config{SASL: []amqp091.Authentication{&amqp091.AMQPlainAuth{Username: "guest", Password: "guest"}}})
	must(t, err)
	must(t, conn.Close())
}

func TestTuneNegotiation(t *testing.T) {
	ts := startServer(t)
	conn, err := amqp091.DialConfig(ts.url, amqp091.Config{ChannelMax: 5, FrameSize: 8192, Heartbeat: 0})
	must(t, err)
	defer conn.Close()
	waitFor(t, 5e9, "connection registered", func() bool { return len(ts.Connections()) == 1 })
	info := ts.Connections()[0]
	if info.ChannelMax != 5 || info.FrameMax != 8192 {
		t.Fatalf("negotiated %+v", info)
	}
	// A large message still flows through small frames.
	ch, err := conn.Channel()
	must(t, err)
	mustDeclare(t, ch, "big", nil)
	body := strings.Repeat("x", 100000)
	publish(t, ch, "", "big", body)
	m, ok, err := ch.Get("big", true)
	must(t, err)
	if !ok || string(m.Body) != body {
		t.Fatal("large body through small frames differs")
	}
}

func TestServerCloseSends320(t *testing.T) {
	ts := startServer(t)
	conn := ts.dial(t)
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	must(t, ts.Close())
	e := waitClose(t, closed)
	if e.Code != 320 || !strings.Contains(e.Reason, "CONNECTION_FORCED") {
		t.Fatalf("got %v", e)
	}
}

func TestMemoryAlarmBlocksPublishers(t *testing.T) {
	ts := startServer(t)
	testAlarmBlocksPublishers(t, ts, "low on memory",
		func() bool { ts.SetMemoryHighWatermark(1); return ts.MemoryAlarm() }, // anything is above one byte
		func() { ts.SetMemoryHighWatermark(0) })
}

func TestDiskAlarmBlocksPublishers(t *testing.T) {
	ts := startServer(t)
	testAlarmBlocksPublishers(t, ts, "low on disk",
		func() bool { ts.SetDiskFreeLimit(1 << 62); return ts.DiskAlarm() }, // more than any disk has free
		func() { ts.SetDiskFreeLimit(0) })
}

// testAlarmBlocksPublishers raises an alarm and checks that the publishing
// connection gets connection.blocked with reason, then connection.unblocked
// when the alarm clears, while a consumer keeps receiving throughout.
func testAlarmBlocksPublishers(t *testing.T, ts *testServer, reason string, raise func() bool, clearAlarm func()) {
	t.Helper()
	pubConn, pub := ts.channel(t)
	blocked := pubConn.NotifyBlocked(make(chan amqp091.Blocking, 4))
	mustDeclare(t, pub, "alarm", nil)
	publish(t, pub, "", "alarm", "before")
	_, cons := ts.channel(t)
	d, err := cons.Consume("alarm", "", true, false, false, false, nil)
	must(t, err)
	recv(t, d)
	if !raise() {
		t.Fatal("alarm not raised")
	}
	// The reader may already be waiting on the socket; like RabbitMQ it blocks
	// the connection once it has seen a publish, so this one may get through.
	publish(t, pub, "", "alarm", "during")
	select {
	case b := <-blocked:
		if !b.Active || b.Reason != reason {
			t.Fatalf("blocking %+v, want reason %q", b, reason)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no connection.blocked")
	}
	clearAlarm()
	select {
	case b := <-blocked:
		if b.Active {
			t.Fatalf("second notification %+v", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no connection.unblocked")
	}
	// Consumers were never blocked, and the publish held during the alarm arrives.
	if m := recv(t, d); string(m.Body) != "during" {
		t.Fatalf("got %q", m.Body)
	}
}

// TestBlockedPublisherClosesWhenAlarmClears is amqp091-go's
// TestConnection_Close_WhenMemoryAlarmIsActive, which raises the alarm with
// rabbitmqctl and so cannot run against Warren. A blocked connection's socket
// is not read, so its connection.close gets no close-ok (the client gives up
// at its deadline) and its exclusive queue stays locked (RabbitMQ 3.10: 405
// RESOURCE_LOCKED) until the alarm clears; then the connection ends and the
// queue can be declared again.
func TestBlockedPublisherClosesWhenAlarmClears(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	blocked := conn.NotifyBlocked(make(chan amqp091.Blocking, 2))
	const q = "alarm-exclusive"
	_, err := ch.QueueDeclare(q, false, false, true, false, nil)
	must(t, err)
	publish(t, ch, "", q, "before")
	ts.SetMemoryHighWatermark(1) // anything is above one byte
	publish(t, ch, "", q, "during")
	select {
	case b := <-blocked:
		if !b.Active {
			t.Fatalf("blocking %+v", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no connection.blocked")
	}
	if err := conn.CloseDeadline(time.Now().Add(300 * time.Millisecond)); err == nil {
		t.Fatal("a blocked connection answered connection.close")
	}
	if !conn.IsClosed() {
		t.Fatal("client connection not closed after its close deadline")
	}

	other := ts.dial(t)
	declareExclusive := func() error {
		c, err := other.Channel()
		if err != nil {
			return err
		}
		_, err = c.QueueDeclare(q, false, false, true, false, nil)
		return err
	}
	expectCode(t, declareExclusive(), 405)
	ts.SetMemoryHighWatermark(0)
	waitFor(t, 5*time.Second, "the closed connection's exclusive queue to go", func() bool {
		err := declareExclusive()
		if err != nil && amqpCode(err) != 405 {
			t.Fatalf("declare after the alarm: %v", err)
		}
		return err == nil
	})
}
