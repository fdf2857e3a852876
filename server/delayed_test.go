package server

import (
	"fmt"
	"github.com/warrenmq/warren/queueindex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp"
)

// The answers these tests expect were taken from RabbitMQ 3.10.8 with
// rabbitmq-delayed-message-exchange 3.10.2 built from its source (see
// delayed.go).

// delayedFixture is a confirming channel with an x-delayed-message exchange
// "dx" of type kind and a queue "dq" bound to it with key.
type delayedFixture struct {
	ch    *amqp091.Channel
	confs chan amqp091.Confirmation
	rets  chan amqp091.Return
}

func newDelayedFixture(t *testing.T, ts *testServer, kind, key string, durable bool) *delayedFixture {
	t.Helper()
	_, ch := ts.channel(t)
	must(t, ch.ExchangeDeclare("dx", "x-delayed-message", durable, false, false, false, amqp091.Table{"x-delayed-type": kind}))
	_, err := ch.QueueDeclare("dq", durable, false, false, false, nil)
	must(t, err)
	must(t, ch.QueueBind("dq", key, "dx", false, nil))
	must(t, ch.Confirm(false))
	return &delayedFixture{ch: ch, confs: ch.NotifyPublish(make(chan amqp091.Confirmation, 1024)),
		rets: ch.NotifyReturn(make(chan amqp091.Return, 64))}
}

// publish publishes a persistent message with x-delay delay (none when nil)
// and waits for its confirm.
func (f *delayedFixture) publish(t *testing.T, key, body string, delay any, mandatory bool) {
	t.Helper()
	var h amqp091.Table
	if delay != nil {
		h = amqp091.Table{"x-delay": delay}
	}
	must(t, f.ch.Publish("dx", key, mandatory, false, amqp091.Publishing{Headers: h, Body: []byte(body), DeliveryMode: 2}))
	if c := nextConfirm(t, f.confs); !c.Ack {
		t.Fatalf("publish %q nacked", body)
	}
}

// queuedCount returns how many messages queue q holds.
func queuedCount(t *testing.T, ch *amqp091.Channel, q string) int {
	t.Helper()
	qi, err := ch.QueueDeclarePassive(q, false, false, false, false, nil)
	must(t, err)
	return qi.Messages
}

func TestDelayedExchangeDeclare(t *testing.T) {
	ts := startServer(t)
	for _, tc := range []struct {
		args amqp091.Table
		code int
		text string
	}{
		{nil, 406, "PRECONDITION_FAILED - Invalid argument, 'x-delayed-type' must be an existing exchange type"},
		{amqp091.Table{"x-delayed-type": int32(5)}, 406, "PRECONDITION_FAILED - Invalid argument, 'x-delayed-type' must be an existing exchange type"},
		{amqp091.Table{"x-delayed-type": "x-delayed-message"}, 406, "PRECONDITION_FAILED - Invalid argument, 'x-delayed-message' can't be used for 'x-delayed-type'"},
		{amqp091.Table{"x-delayed-type": "nosuch"}, 503, "COMMAND_INVALID - unknown exchange type 'nosuch'"},
		{amqp091.Table{"x-delayed-type": "headers"}, 0, ""},
		{amqp091.Table{"x-delayed-type": "x-consistent-hash"}, 0, ""},
	} {
		_, ch := ts.channel(t)
		err := ch.ExchangeDeclare("dx", "x-delayed-message", true, false, false, false, tc.args)
		if tc.code == 0 {
			must(t, err)
			must(t, ch.ExchangeDelete("dx", false, false))
			continue
		}
		expectCode(t, err, tc.code)
		if e := err.(*amqp091.Error); e.Reason != tc.text {
			t.Errorf("%v: got %q, want %q", tc.args, e.Reason, tc.text)
		}
	}
	// RabbitMQ compares only the type and flags: another x-delayed-type is
	// accepted; another type names the current one as its atom prints.
	_, ch := ts.channel(t)
	must(t, ch.ExchangeDeclare("dx", "x-delayed-message", true, false, false, false, amqp091.Table{"x-delayed-type": "direct"}))
	must(t, ch.ExchangeDeclare("dx", "x-delayed-message", true, false, false, false, amqp091.Table{"x-delayed-type": "topic"}))
	err := ch.ExchangeDeclare("dx", "direct", true, false, false, false, nil)
	want := "PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'dx' in vhost '/': received 'direct' but current is ''x-delayed-message''"
	if e, ok := err.(*amqp091.Error); !ok || e.Reason != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// TestDelayedMessagesFireInDueOrder publishes messages with delays out of
// order and checks none arrives before its time and they arrive by due time,
// those due together in publish order, to the queues bound when they fire.
func TestDelayedMessagesFireInDueOrder(t *testing.T) {
	ts := startServer(t)
	f := newDelayedFixture(t, ts, "topic", "a.*", true)
	start := time.Now()
	f.publish(t, "a.x", "900", int32(900), false)
	f.publish(t, "a.x", "300", int32(300), false)
	f.publish(t, "a.x", "600", int64(600), false)
	f.publish(t, "b.x", "late-binding", int32(600), false)
	if n := queuedCount(t, f.ch, "dq"); n != 0 && time.Since(start) < 300*time.Millisecond {
		t.Fatalf("%d messages routed before their delay", n)
	}
	_, ch2 := ts.channel(t)
	_, err := ch2.QueueDeclare("late", true, false, false, false, nil)
	must(t, err)
	must(t, ch2.QueueBind("late", "b.*", "dx", false, nil)) // bound after the publish, before the firing
	d, err := ch2.Consume("dq", "", true, false, false, false, nil)
	must(t, err)
	for _, want := range []string{"300", "600", "900"} {
		m := recv(t, d)
		if string(m.Body) != want {
			t.Fatalf("got %q, want %q", m.Body, want)
		}
		if ms, _ := m.Headers["x-delay"].(int32); ms == 0 && m.Headers["x-delay"] == nil {
			t.Fatalf("x-delay header not kept: %v", m.Headers)
		}
		if m.Exchange != "dx" || m.RoutingKey != "a.x" {
			t.Fatalf("delivered from %q with %q", m.Exchange, m.RoutingKey)
		}
	}
	dl, err := ch2.Consume("late", "", true, false, false, false, nil)
	must(t, err)
	if m := recv(t, dl); string(m.Body) != "late-binding" {
		t.Fatalf("queue bound after the publish got %q", m.Body)
	}

	// Due at the same moment: publish order.
	for i := range 20 {
		f.publish(t, "a.x", fmt.Sprint(i), int32(200), false)
	}
	for i := range 20 {
		if m := recv(t, d); string(m.Body) != fmt.Sprint(i) {
			t.Fatalf("same delay: got %q at %d", m.Body, i)
		}
	}
}

// TestDelayedInvalidDelays checks the delays the plugin routes at once, those
// it converts, and the strings it crashes on (541 on the connection).
func TestDelayedInvalidDelays(t *testing.T) {
	ts := startServer(t)
	f := newDelayedFixture(t, ts, "direct", "k", false)
	for _, now := range []any{int32(0), int32(-5), true, int64(4294967296), "-100", 0.4, amqp091.Table{"a": int32(1)}} {
		f.publish(t, "k", fmt.Sprint(now), now, false)
	}
	if n := queuedCount(t, f.ch, "dq"); n != 7 {
		t.Fatalf("%d of 7 undelayable messages routed at once", n)
	}
	_, err := f.ch.QueuePurge("dq", false)
	must(t, err)
	for _, later := range []any{"3000", 3000.7, int64(4294967295), uint8(200)} {
		f.publish(t, "k", fmt.Sprint(later), later, false)
	}
	if n := queuedCount(t, f.ch, "dq"); n > 1 { // uint8(200) may have fired
		t.Fatalf("%d delayed messages routed at once", n)
	}
	if got := ts.Vhost("/").exchange("dx").MessagesDelayed(); got < 3 {
		t.Fatalf("messages_delayed %d, want at least 3", got)
	}

	for _, crash := range []any{"abc", " 100", "1.5", ""} {
		conn, ch := ts.channel(t)
		closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
		must(t, ch.Publish("dx", "k", false, false, amqp091.Publishing{Headers: amqp091.Table{"x-delay": crash}}))
		e := waitClose(t, closed)
		if e == nil || e.Code != 541 || e.Reason != "INTERNAL_ERROR" {
			t.Fatalf("x-delay %q: connection closed with %v, want 541 INTERNAL_ERROR", crash, e)
		}
	}
}

// TestDelayedMandatoryReturnedAtOnce: the plugin routes a delayed message to
// no queue when it is published, so a mandatory one comes back at once as
// unroutable, is confirmed, and is still delivered when due.
func TestDelayedMandatoryReturnedAtOnce(t *testing.T) {
	ts := startServer(t)
	f := newDelayedFixture(t, ts, "direct", "k", true)
	f.publish(t, "k", "m", int32(300), true)
	select {
	case r := <-f.rets:
		if r.ReplyCode != 312 || r.ReplyText != "NO_ROUTE" || string(r.Body) != "m" {
			t.Fatalf("return %d %q %q", r.ReplyCode, r.ReplyText, r.Body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no basic.return for a mandatory delayed message")
	}
	d, err := f.ch.Consume("dq", "", true, false, false, false, nil)
	must(t, err)
	if m := recv(t, d); string(m.Body) != "m" {
		t.Fatalf("got %q", m.Body)
	}
	// Counted in once, when published, and out once, when it reached dq.
	ex := ts.Vhost("/").exchange("dx")
	waitFor(t, 5*time.Second, "publish_out", func() bool { return ex.stats.publishOut.value() == 1 })
	if in := ex.stats.publishIn.value(); in != 1 {
		t.Fatalf("publish_in %d, want 1", in)
	}
}

// TestDelayedSurvivesRestart: a durable exchange's delayed messages are in
// the store and come back after a clean restart, fired on time.
func TestDelayedSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	f := newDelayedFixture(t, ts, "fanout", "", true)
	for i := range 50 {
		f.publish(t, "", fmt.Sprint(i), int32(1500+10*i), false)
	}
	must(t, ts.Close())
	ts2 := startServer(t, withDataDir(dir))
	if got := ts2.Vhost("/").exchange("dx").MessagesDelayed(); got != 50 {
		t.Fatalf("messages_delayed after restart %d, want 50", got)
	}
	_, ch := ts2.channel(t)
	d, err := ch.Consume("dq", "", true, false, false, false, nil)
	must(t, err)
	for i := range 50 {
		if m := recv(t, d); string(m.Body) != fmt.Sprint(i) {
			t.Fatalf("got %q, want %d", m.Body, i)
		}
	}
	waitFor(t, 5*time.Second, "delayed messages settled", func() bool {
		return ts2.Vhost("/").exchange("dx").MessagesDelayed() == 0
	})
}

// TestDelayedExchangeDeleteDropsMessages: deleting the exchange drops its
// delayed messages and their stored copies; a new exchange of the same name
// does not get them (the plugin would route them through it).
func TestDelayedExchangeDeleteDropsMessages(t *testing.T) {
	ts := startServer(t)
	f := newDelayedFixture(t, ts, "direct", "k", true)
	for i := range 10 {
		f.publish(t, "k", fmt.Sprint(i), int32(400), false)
	}
	vh := ts.Vhost("/")
	must(t, f.ch.ExchangeDelete("dx", false, false))
	must(t, f.ch.ExchangeDeclare("dx", "x-delayed-message", true, false, false, false, amqp091.Table{"x-delayed-type": "direct"}))
	must(t, f.ch.QueueBind("dq", "k", "dx", false, nil))
	f.publish(t, "k", "after", int32(800), false)
	d, err := f.ch.Consume("dq", "", true, false, false, false, nil)
	must(t, err)
	if m := recv(t, d); string(m.Body) != "after" {
		t.Fatalf("a deleted exchange's delayed message %q was delivered", m.Body)
	}
	waitFor(t, 5*time.Second, "the store to hold no delayed copies", func() bool {
		st, _ := vh.StorageStats()
		return st.LiveMessages == 0
	})
}

// TestDelayedHeadSpillsToDisk makes the in-memory head tiny: messages beyond
// it stay on disk only, the head never grows past its bound, and every
// message still fires in due order (slots 25 ms apart, published in a random
// order within a few milliseconds).
func TestDelayedHeadSpillsToDisk(t *testing.T) {
	old := delayHeadMax
	delayHeadMax = 8
	t.Cleanup(func() { delayHeadMax = old })
	ts := startServer(t)
	f := newDelayedFixture(t, ts, "direct", "k", true)
	ds := ts.Vhost("/").exchange("dx").delay
	const n = 80
	headSize := func() int {
		ds.mu.Lock()
		defer ds.mu.Unlock()
		return len(ds.head)
	}
	// A message is due at its arrival plus its delay; arrival lies between
	// the publish call and the last confirm. On a loaded machine publishing
	// takes longer than the 25 ms between slots, so the order checked below
	// is only between messages whose windows of due times do not overlap.
	delay := func(slot int) time.Duration { return time.Duration(500+25*slot) * time.Millisecond }
	sent := make([]time.Time, n)
	for _, slot := range rand.Perm(n) {
		sent[slot] = time.Now()
		must(t, f.ch.Publish("dx", "k", false, false, amqp091.Publishing{
			Headers: amqp091.Table{"x-delay": int32(delay(slot) / time.Millisecond)}, Body: []byte(fmt.Sprint(slot)), DeliveryMode: 2}))
	}
	for range n {
		if c := nextConfirm(t, f.confs); !c.Ack {
			t.Fatal("nacked")
		}
	}
	confirmed := time.Now()
	earliest := func(slot int) time.Time { return sent[slot].Add(delay(slot)) }
	latest := func(slot int) time.Time { return confirmed.Add(delay(slot)) }
	if h := headSize(); h > delayHeadMax {
		t.Fatalf("head holds %d, bound %d", h, delayHeadMax)
	}
	if got := ds.pending.Load(); got != n {
		t.Fatalf("messages_delayed %d, want %d", got, n)
	}
	d, err := f.ch.Consume("dq", "", true, false, false, false, nil)
	must(t, err)
	got := make([]int, 0, n)
	for range n {
		m := recv(t, d)
		slot, err := strconv.Atoi(string(m.Body))
		must(t, err)
		for _, before := range got {
			if latest(slot).Before(earliest(before)) {
				t.Fatalf("slot %d (due by %s) came after slot %d (due from %s)", slot,
					latest(slot).Format("15:04:05.000"), before, earliest(before).Format("15:04:05.000"))
			}
		}
		got = append(got, slot)
		if h := headSize(); h > delayHeadMax {
			t.Fatalf("head holds %d, bound %d", h, delayHeadMax)
		}
	}
	waitFor(t, 5*time.Second, "all delayed messages settled", func() bool { return ds.pending.Load() == 0 })
}

// TestDelayedSurvivesKill9 kills the broker with SIGKILL while confirmed
// delayed messages wait and while some of them are firing: after the restart
// every confirmed message is delivered, at least once.
func TestDelayedSurvivesKill9(t *testing.T) {
	dir, addr, url := crashEnv(t, "delayed kill -9 test")
	b := startCrashBroker(t, dir, addr)
	conn, ch := dialURL(t, url)
	must(t, ch.ExchangeDeclare("dx", "x-delayed-message", true, false, false, false, amqp091.Table{"x-delayed-type": "direct"}))
	_, err := ch.QueueDeclare("dq", true, false, false, false, nil)
	must(t, err)
	must(t, ch.QueueBind("dq", "k", "dx", false, nil))
	must(t, ch.Confirm(false))
	confs := ch.NotifyPublish(make(chan amqp091.Confirmation, 1024))
	const n = 400
	for i := range n {
		// Half due while the broker is down, half spread over the kill.
		delay := int32(300 + 3*i)
		if i%2 == 0 {
			delay = 5000
		}
		must(t, ch.Publish("dx", "k", false, false, amqp091.Publishing{
			Headers: amqp091.Table{"x-delay": delay}, Body: []byte(fmt.Sprint(i)), DeliveryMode: 2}))
	}
	for range n {
		if c := nextConfirm(t, confs); !c.Ack {
			t.Fatalf("publish %d nacked", c.DeliveryTag)
		}
	}
	// Kill while the odd ones fire: some are in dq, some still delayed.
	waitFor(t, 5*time.Second, "some delayed messages to fire", func() bool {
		qi, err := ch.QueueDeclarePassive("dq", true, false, false, false, nil)
		return err == nil && qi.Messages > 20
	})
	b.kill()
	conn.Close()

	startCrashBroker(t, dir, addr)
	_, ch2 := dialURL(t, url)
	d, err := ch2.Consume("dq", "", true, false, false, false, nil)
	must(t, err)
	seen := make(map[string]bool)
	deadline := time.After(20 * time.Second)
	for len(seen) < n {
		select {
		case m := <-d:
			seen[string(m.Body)] = true
		case <-deadline:
			t.Fatalf("%d of %d confirmed delayed messages delivered after kill -9", len(seen), n)
		}
	}
}

// TestDelayedExchangeArgument: LavinMQ's x-delayed-exchange: true makes an
// exchange of an ordinary type delay messages too.
func TestDelayedExchangeArgument(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	must(t, ch.ExchangeDeclare("lx", "headers", true, false, false, false, amqp091.Table{"x-delayed-exchange": true}))
	mustDeclare(t, ch, "lq", nil)
	must(t, ch.QueueBind("lq", "", "lx", false, amqp091.Table{"x-match": "all", "kind": "a"}))
	must(t, ch.Publish("lx", "", false, false, amqp091.Publishing{Headers: amqp091.Table{"kind": "a", "x-delay": int32(2000)}, Body: []byte("later")}))
	must(t, ch.Publish("lx", "", false, false, amqp091.Publishing{Headers: amqp091.Table{"kind": "a"}, Body: []byte("now")}))
	d, err := ch.Consume("lq", "", true, false, false, false, nil)
	must(t, err)
	for _, want := range []string{"now", "later"} {
		if m := recv(t, d); string(m.Body) != want {
			t.Fatalf("got %q, want %q", m.Body, want)
		}
	}
}

// TestDelayedAlternateExchangeAndBCC: as with the plugin, a delayed message
// reaches the exchange's alternate exchange at once (nothing matched it when
// published) and its queues when due; one reaching the delaying exchange over
// an exchange-to-exchange binding is delayed too; BCC keys route it when due
// and, its properties re-encoded, it shows x-delay negated.
func TestDelayedAlternateExchangeAndBCC(t *testing.T) {
	for _, dataDir := range []bool{true, false} {
		t.Run(fmt.Sprintf("dataDir=%v", dataDir), func(t *testing.T) {
			ts := startServer(t, func(c *Config) {
				if !dataDir {
					c.DataDir = ""
				}
			})
			_, ch := ts.channel(t)
			must(t, ch.ExchangeDeclare("ae", "fanout", false, false, false, false, nil))
			must(t, ch.ExchangeDeclare("dx", "x-delayed-message", false, false, false, false,
				amqp091.Table{"x-delayed-type": "direct", "alternate-exchange": "ae"}))
			must(t, ch.ExchangeDeclare("src", "direct", false, false, false, false, nil))
			must(t, ch.ExchangeBind("dx", "k", "src", false, nil))
			mustDeclare(t, ch, "aeq", nil)
			must(t, ch.QueueBind("aeq", "", "ae", false, nil))
			mustDeclare(t, ch, "dq", nil)
			must(t, ch.QueueBind("dq", "k", "dx", false, nil))
			delay := amqp091.Table{"x-delay": int32(300)}
			must(t, ch.Publish("dx", "k", false, false, amqp091.Publishing{Headers: delay, Body: []byte("direct")}))
			must(t, ch.Publish("src", "k", false, false, amqp091.Publishing{Headers: delay, Body: []byte("e2e")}))
			must(t, ch.Publish("dx", "nokey", false, false, amqp091.Publishing{
				Headers: amqp091.Table{"x-delay": int32(300), "BCC": []any{"k"}}, Body: []byte("bcc")}))
			if n := queuedCount(t, ch, "aeq"); n != 3 {
				t.Fatalf("alternate exchange got %d of 3 at once", n)
			}
			d, err := ch.Consume("dq", "", true, false, false, false, nil)
			must(t, err)
			for _, want := range []string{"direct", "e2e", "bcc"} {
				m := recv(t, d)
				if string(m.Body) != want {
					t.Fatalf("got %q, want %q", m.Body, want)
				}
				wantDelay := any(int32(300))
				if want == "bcc" {
					wantDelay = int32(-300)
					if _, ok := m.Headers["BCC"]; ok {
						t.Fatal("BCC header delivered")
					}
				}
				if m.Headers["x-delay"] != wantDelay {
					t.Fatalf("%s: x-delay %#v, want %#v", want, m.Headers["x-delay"], wantDelay)
				}
			}
			if n := queuedCount(t, ch, "aeq"); n != 3 {
				t.Fatalf("alternate exchange has %d, want still 3", n)
			}
		})
	}
}

// TestDelayedExchangeDefinitions: a definitions file with an
// x-delayed-message exchange, as RabbitMQ exports one, imports and delays;
// an invalid x-delayed-type is refused before anything is applied; the
// export gives the exchange back as it was declared.
func TestDelayedExchangeDefinitions(t *testing.T) {
	ts := startServer(t)
	bad := Definitions{Exchanges: []ExchangeDefinition{{Vhost: "/", ExchangeSpec: ExchangeSpec{
		Name: "bad", Type: "x-delayed-message", Durable: true, Arguments: amqp.Table{"x-delayed-type": "x-delayed-message"}}}}}
	if err := ts.ImportDefinitions(bad, ""); err == nil {
		t.Fatal("an x-delayed-message x-delayed-type imported")
	}
	d := Definitions{
		Exchanges: []ExchangeDefinition{{Vhost: "/", ExchangeSpec: ExchangeSpec{
			Name: "dx", Type: "x-delayed-message", Durable: true, Arguments: amqp.Table{"x-delayed-type": "topic"}}}},
		Queues:   []QueueDefinition{{Vhost: "/", QueueSpec: QueueSpec{Name: "dq", Durable: true}}},
		Bindings: []BindingInfo{{Vhost: "/", Source: "dx", Destination: "dq", DestinationType: DestQueue, RoutingKey: "a.#"}},
	}
	must(t, ts.ImportDefinitions(d, ""))
	_, ch := ts.channel(t)
	must(t, ch.Publish("dx", "a.b", false, false, amqp091.Publishing{Headers: amqp091.Table{"x-delay": int32(200)}, Body: []byte("m")}))
	if n := queuedCount(t, ch, "dq"); n != 0 {
		t.Fatalf("%d routed before the delay", n)
	}
	dl, err := ch.Consume("dq", "", true, false, false, false, nil)
	must(t, err)
	if m := recv(t, dl); string(m.Body) != "m" {
		t.Fatalf("got %q", m.Body)
	}
	out, err := ts.ExportDefinitions("")
	must(t, err)
	for _, x := range out.Exchanges {
		if x.Name == "dx" && (x.Type != "x-delayed-message" || x.Arguments["x-delayed-type"] != "topic") {
			t.Fatalf("exported as %+v", x)
		}
	}
}

// TestDelayedDeleteThenKill9 deletes an exchange holding delayed messages and
// kills the broker at once, before or while its files are removed in the
// background: the next start removes what is left, and no stored copy of the
// deleted messages stays live.
func TestDelayedDeleteThenKill9(t *testing.T) {
	dir, addr, url := crashEnv(t, "delayed kill -9 test")
	b := startCrashBroker(t, dir, addr)
	conn, ch := dialURL(t, url)
	must(t, ch.ExchangeDeclare("dx", "x-delayed-message", true, false, false, false, amqp091.Table{"x-delayed-type": "direct"}))
	must(t, ch.ExchangeDeclare("kept", "x-delayed-message", true, false, false, false, amqp091.Table{"x-delayed-type": "direct"}))
	must(t, ch.Confirm(false))
	confs := ch.NotifyPublish(make(chan amqp091.Confirmation, 1024))
	const n = 300
	for i := range n {
		ex := "dx"
		if i%3 == 0 {
			ex = "kept"
		}
		must(t, ch.Publish(ex, "k", false, false, amqp091.Publishing{
			Headers: amqp091.Table{"x-delay": int32(3600_000)}, Body: []byte(fmt.Sprint(i)), DeliveryMode: 2}))
	}
	for range n {
		if c := nextConfirm(t, confs); !c.Ack {
			t.Fatal("nacked")
		}
	}
	must(t, ch.ExchangeDelete("dx", false, false))
	b.kill()
	conn.Close()

	ts := startServer(t, withDataDir(dir))
	vh := ts.Vhost("/")
	if vh.exchange("dx") != nil {
		t.Fatal("deleted exchange came back")
	}
	if got := vh.exchange("kept").MessagesDelayed(); got != n/3 {
		t.Fatalf("kept exchange holds %d, want %d", got, n/3)
	}
	entries, err := os.ReadDir(delayedDir(vh.storage))
	must(t, err)
	if len(entries) != 1 {
		t.Fatalf("delayed directories after restart: %d, want the kept exchange's only", len(entries))
	}
	if st, _ := vh.StorageStats(); st.LiveMessages != n/3 {
		t.Fatalf("%d live messages in the store, want the kept exchange's %d", st.LiveMessages, n/3)
	}
}

// TestDelayedDeletedLeftoversRemovedAtStart: an exchange deleted while the
// vhost's delayer is stopped (as at shutdown) leaves its delayed messages'
// directory; the next start releases their stored copies and removes it.
func TestDelayedDeletedLeftoversRemovedAtStart(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	_, ch := ts.channel(t)
	for _, ex := range []string{"dx", "kept"} {
		must(t, ch.ExchangeDeclare(ex, "x-delayed-message", true, false, false, false, amqp091.Table{"x-delayed-type": "direct"}))
		for range 10 {
			must(t, ch.Publish(ex, "k", false, false, amqp091.Publishing{Headers: amqp091.Table{"x-delay": int32(3600_000)}, DeliveryMode: 2}))
		}
	}
	vh := ts.Vhost("/")
	waitFor(t, 5*time.Second, "the delayed publishes", func() bool { return vh.exchange("kept").MessagesDelayed() == 10 })
	vh.delays.stop() // the cleanup of dx is queued, never run
	must(t, ch.ExchangeDelete("dx", false, false))
	must(t, ts.Close())
	entries, err := os.ReadDir(filepath.Join(vhostDir(dir, "/"), "delayed"))
	must(t, err)
	if len(entries) != 2 {
		t.Fatalf("%d delayed directories before the restart, want the deleted one left over too", len(entries))
	}

	ts2 := startServer(t, withDataDir(dir))
	vh2 := ts2.Vhost("/")
	entries, err = os.ReadDir(delayedDir(vh2.storage))
	must(t, err)
	if len(entries) != 1 {
		t.Fatalf("%d delayed directories after the restart, want 1", len(entries))
	}
	if st, _ := vh2.StorageStats(); st.LiveMessages != 10 {
		t.Fatalf("%d live messages in the store, want the kept exchange's 10", st.LiveMessages)
	}
}

// TestDelayedReopenAcksWhatSettledWhileDown: messages fired and settled
// while the exchange's index is down (their acks cannot be written) are
// acked by the reopen, so they do not fire again after a restart; the
// others stay pending.
func TestDelayedReopenAcksWhatSettledWhileDown(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	f := newDelayedFixture(t, ts, "fanout", "", true)
	for i := range 20 {
		f.publish(t, "", fmt.Sprint(i), int32(3_600_000+i), false) // an hour: the delayer leaves them
	}
	ds := ts.Vhost("/").exchange("dx").delay
	// As the delayer does, but an hour early: 5 fired, then the index fails
	// before the round that would write their acks.
	items := ds.popDue(nowMillis()+2*3_600_000, 5, nil)
	if len(items) != 5 {
		t.Fatalf("popped %d, want 5", len(items))
	}
	ds.mu.Lock()
	ds.indexFailedLocked(fmt.Errorf("injected: %w", queueindex.ErrFailed))
	ds.mu.Unlock()
	ds.settle(items)
	waitFor(t, 5*time.Second, "the committer to reopen the index", func() bool {
		ds.mu.Lock()
		defer ds.mu.Unlock()
		return !ds.reopen.down
	})
	must(t, ts.Close())
	ts2 := startServer(t, withDataDir(dir))
	if got := ts2.Vhost("/").exchange("dx").MessagesDelayed(); got != 15 {
		t.Fatalf("messages_delayed after restart %d, want 15 (the 5 settled while the index was down came back?)", got)
	}
}
