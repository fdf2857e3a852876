package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/msgstore"
)

// publishConfirmed publishes n messages and waits for every confirm.
func publishConfirmed(t *testing.T, ch *amqp091.Channel, queue string, n int, persistent bool, prefix string) {
	t.Helper()
	must(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, n))
	mode := amqp091.Transient
	if persistent {
		mode = amqp091.Persistent
	}
	for i := range n {
		must(t, ch.Publish("", queue, false, false, amqp091.Publishing{DeliveryMode: mode, Body: []byte(fmt.Sprintf("%s%d", prefix, i))}))
	}
	for range n {
		if c := nextConfirm(t, confirms); !c.Ack {
			t.Fatalf("publish nacked: %+v", c)
		}
	}
}

func TestPersistentMessagesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	conn, ch := ts.channel(t)
	_, err := ch.QueueDeclare("durable", true, false, false, false, nil)
	must(t, err)
	mustDeclare(t, ch, "transient-q", nil)
	publishConfirmed(t, ch, "durable", 100, true, "p")
	publishConfirmed(t, ch, "durable", 5, false, "t") // transient: gone after restart
	publishConfirmed(t, ch, "transient-q", 5, true, "x")
	_, c2 := ts.channel(t)
	must(t, c2.Qos(50, 0, false))
	d, err := c2.Consume("durable", "", false, false, false, false, nil)
	must(t, err)
	var last amqp091.Delivery
	for range 50 {
		last = recv(t, d)
	}
	must(t, c2.Cancel(last.ConsumerTag, false)) // no deliveries beyond these 50
	// Ack the first 30; 20 stay delivered and unacknowledged at shutdown.
	must(t, c2.Ack(last.DeliveryTag-20, true))
	roundTrip(t, c2)
	conn.Close()
	must(t, ts.Close())

	ts2 := startServer(t, withDataDir(dir))
	if ts2.Vhost("/").queue("transient-q") != nil {
		t.Fatal("transient queue survived")
	}
	info := ts2.Vhost("/").queue("durable").Info()
	if info.Ready != 70 {
		t.Fatalf("after restart %d ready, want 70 (100 persistent - 30 acked)", info.Ready)
	}
	_, ch2 := ts2.channel(t)
	for i := 30; i < 100; i++ {
		m := getOne(t, ch2, "durable")
		want := fmt.Sprintf("p%d", i)
		if string(m.Body) != want {
			t.Fatalf("message %d: got %q want %q", i, m.Body, want)
		}
		if m.Redelivered != (i < 50) {
			t.Fatalf("message %q redelivered=%v", m.Body, m.Redelivered)
		}
		if m.DeliveryMode != amqp091.Persistent {
			t.Fatalf("delivery mode %d", m.DeliveryMode)
		}
	}
	if _, ok, err := ch2.Get("durable", true); err != nil || ok {
		t.Fatalf("extra message after the persistent ones: ok=%v err=%v", ok, err)
	}
}

func TestDurableQueuePagesToDisk(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir), func(c *Config) { c.QueueHeadMessages = 100 })
	_, ch := ts.channel(t)
	_, err := ch.QueueDeclare("big", true, false, false, false, nil)
	must(t, err)
	publishConfirmed(t, ch, "big", 1000, true, "m")
	publishConfirmed(t, ch, "big", 10, false, "t") // transient, but the queue is paging: stored too
	info := ts.Vhost("/").queue("big").Info()
	if info.Ready != 1010 || info.InMemory > 100 || info.OnDisk < 900 {
		t.Fatalf("paging: %+v", info)
	}
	_, c := ts.channel(t)
	must(t, c.Qos(200, 0, false))
	d, err := c.Consume("big", "", false, false, false, false, nil)
	must(t, err)
	for i := range 1010 {
		m := recv(t, d)
		want := fmt.Sprintf("m%d", i)
		if i >= 1000 {
			want = fmt.Sprintf("t%d", i-1000)
		}
		if string(m.Body) != want {
			t.Fatalf("message %d: got %q want %q", i, m.Body, want)
		}
		must(t, m.Ack(false))
	}
	waitFor(t, 5*time.Second, "queue drained", func() bool {
		i := ts.Vhost("/").queue("big").Info()
		return i.Ready == 0 && i.Unacked == 0
	})
}

func TestPurgeAndDeleteReleaseStoredMessages(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir), func(c *Config) { c.QueueHeadMessages = 10 })
	_, ch := ts.channel(t)
	for _, q := range []string{"a", "b"} {
		_, err := ch.QueueDeclare(q, true, false, false, false, nil)
		must(t, err)
		must(t, ch.QueueBind(q, "k", "amq.fanout", false, nil))
	}
	must(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 50))
	for i := range 50 {
		must(t, ch.Publish("amq.fanout", "k", false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte(fmt.Sprint(i))}))
	}
	for range 50 {
		nextConfirm(t, confirms)
	}
	store := ts.Vhost("/").storage.store
	if st := store.Stats(); st.LiveMessages != 50 {
		t.Fatalf("fanout to two queues stored %d records, want 50 (one copy each)", st.LiveMessages)
	}
	n, err := ch.QueuePurge("a", false)
	must(t, err)
	if n != 50 {
		t.Fatalf("purged %d", n)
	}
	if st := store.Stats(); st.LiveMessages != 50 {
		t.Fatalf("after purging one queue %d live, want 50 (still held by b)", st.LiveMessages)
	}
	_, err = ch.QueueDelete("b", false, false, false)
	must(t, err)
	if st := store.Stats(); st.LiveMessages != 0 {
		t.Fatalf("after delete %d live records", st.LiveMessages)
	}
}

func TestVhostFlushPolicyAndStoreStats(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.Vhosts = []string{"fast"}
		c.VhostFlush = map[string]msgstore.FlushPolicy{"fast": msgstore.FlushOS}
	})
	def, ok := ts.Vhost("/").StorageStats()
	if !ok || def.FlushPolicy != "fsync" {
		t.Fatalf("default vhost: %+v", def)
	}
	fast, ok := ts.Vhost("fast").StorageStats()
	if !ok || fast.FlushPolicy != "os" || fast.Guarantee == def.Guarantee {
		t.Fatalf("overridden vhost: %+v", fast)
	}
	_, ch := ts.channel(t)
	_, err := ch.QueueDeclare("d", true, false, false, false, nil)
	must(t, err)
	publishConfirmed(t, ch, "d", 10, true, "x")
	st, _ := ts.Vhost("/").StorageStats()
	if st.LiveMessages != 10 || st.LiveBytes == 0 || st.Segments != 1 {
		t.Fatalf("store stats after 10 persistent messages: %+v", st)
	}
}

func TestTransientQueuePagesToTheTransientStore(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir), func(c *Config) { c.QueueHeadMessages = 100 })
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "big-transient", nil)
	publishConfirmed(t, ch, "big-transient", 1000, false, "m")
	info := queueInfo(ts, "big-transient")
	if info.Ready != 1000 || info.InMemory > 101 || info.OnDisk < 899 {
		t.Fatalf("a transient queue did not page: %+v", info)
	}
	transientDir := filepath.Join(vhostDir(dir, "/"), "transient")
	if _, err := os.Stat(filepath.Join(transientDir, "queues", nameDir("big-transient"))); err != nil {
		t.Fatalf("no transient index: %v", err)
	}
	_, c := ts.channel(t)
	must(t, c.Qos(200, 0, false))
	d, err := c.Consume("big-transient", "", false, false, false, false, nil)
	must(t, err)
	for i := range 1000 {
		m := recv(t, d)
		if string(m.Body) != fmt.Sprintf("m%d", i) {
			t.Fatalf("message %d: got %q", i, m.Body)
		}
		must(t, m.Ack(false))
	}
	must(t, ts.Close())
	if _, err := os.Stat(transientDir); !os.IsNotExist(err) {
		t.Fatalf("transient store left behind after a clean stop: %v", err)
	}
}

// TestIdleQueuesReleaseIndexPages: durable queues that go idle give back
// their cached index pages (128 KiB each), and their messages stay intact.
func TestIdleQueuesReleaseIndexPages(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.indexIdleEvery = 20 * time.Millisecond })
	_, ch := ts.channel(t)
	must(t, ch.Confirm(false))
	const queues = 20
	for i := range queues {
		name := fmt.Sprintf("idle-%d", i)
		_, err := ch.QueueDeclare(name, true, false, false, false, nil)
		must(t, err)
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", name, false, false,
			amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(name)})
		must(t, err)
		if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
			t.Fatalf("publish to %s not confirmed: %v", name, err)
		}
	}
	cached := func() int {
		n := 0
		for _, q := range ts.Vhost("/").Queues() {
			q.mu.Lock()
			ix := q.index
			q.mu.Unlock()
			if ix != nil {
				n += ix.Stats().CachedSegments
			}
		}
		return n
	}
	waitFor(t, 10*time.Second, "idle queues to release their index pages", func() bool { return cached() == 0 })
	for i := range queues {
		name := fmt.Sprintf("idle-%d", i)
		d, ok, err := ch.Get(name, false)
		must(t, err)
		if !ok || string(d.Body) != name {
			t.Fatalf("%s: got %q (ok %v) after its index page was released", name, d.Body, ok)
		}
		must(t, d.Ack(false))
	}
}

// TestBatchedStoreKeepsOrder: persistent publishes that arrive in one socket
// read are stored together at the end of the read (store_batch.go), yet a
// transient publish between them, a basic.get after them and the confirms
// all see them in the order the client sent them.
func TestBatchedStoreKeepsOrder(t *testing.T) {
	ts := startServer(t)
	rc := rawConfirmChannel(t, ts)
	rc.send(1, &amqp.QueueDeclare{Queue: "ordered", Durable: true})
	rc.expectMethod(&amqp.QueueDeclareOk{})
	// One write: 10 publishes (every third transient), then a basic.get.
	var b []byte
	for i := range 10 {
		p := amqp.Properties{Flags: amqp.FlagDeliveryMode, DeliveryMode: 2}
		if i%3 == 1 {
			p.DeliveryMode = 1
		}
		b = amqp.AppendMethodFrame(b, 1, &amqp.BasicPublish{RoutingKey: "ordered"})
		b = amqp.AppendContent(b, 1, 131072, p.AppendTo(nil), []byte(fmt.Sprintf("m%d", i)))
	}
	b = amqp.AppendMethodFrame(b, 1, &amqp.BasicGet{Queue: "ordered", NoAck: true})
	rc.write(b)
	acked := uint64(0)
	var got *amqp.BasicGetOk
	for got == nil || acked < 10 {
		_, m := rc.nextMethod()
		switch m := m.(type) {
		case *amqp.BasicAck:
			if m.DeliveryTag <= acked && !m.Multiple || m.DeliveryTag < acked {
				t.Fatalf("confirm %+v after %d", m, acked)
			}
			acked = m.DeliveryTag
		case *amqp.BasicGetOk:
			got = m
			f, err := rc.readFrame() // header
			must(t, err)
			if f.Type != amqp.TypeHeader {
				t.Fatalf("get-ok followed by frame type %d", f.Type)
			}
			f, err = rc.readFrame()
			must(t, err)
			if string(f.Payload) != "m0" || m.MessageCount != 9 {
				t.Fatalf("basic.get after the batch: %q with %d left; want m0 with 9", f.Payload, m.MessageCount)
			}
		default:
			t.Fatalf("unexpected %T %+v", m, m)
		}
	}
	// The rest come in publish order, persistent and transient alike.
	_, ch := ts.channel(t)
	for i := 1; i < 10; i++ {
		d, ok, err := ch.Get("ordered", true)
		must(t, err)
		if !ok || string(d.Body) != fmt.Sprintf("m%d", i) {
			t.Fatalf("message %d: %q (ok %v)", i, d.Body, ok)
		}
	}
}

// TestBatchedStoreConfirmsStayInOrder: a duplicate (confirmed at once, not
// enqueued) right after batched persistent publishes does not overtake them:
// every publish is confirmed exactly once, in order; and a channel error
// right after batched publishes still lets them reach their queue.
func TestBatchedStoreConfirmsStayInOrder(t *testing.T) {
	ts := startServer(t)
	rc := rawConfirmChannel(t, ts)
	rc.send(1, &amqp.ExchangeDeclare{Exchange: "dedup", Type: "fanout", Durable: true, Arguments: amqp.Table{"x-message-deduplication": true}})
	rc.expectMethod(&amqp.ExchangeDeclareOk{})
	rc.send(1, &amqp.QueueDeclare{Queue: "dd", Durable: true})
	rc.expectMethod(&amqp.QueueDeclareOk{})
	rc.send(1, &amqp.QueueBind{Queue: "dd", Exchange: "dedup"})
	rc.expectMethod(&amqp.QueueBindOk{})
	publishes := func(ids ...string) []byte {
		var b []byte
		for i, id := range ids {
			p := amqp.Properties{Flags: amqp.FlagDeliveryMode | amqp.FlagMessageID, DeliveryMode: 2, MessageID: id}
			b = amqp.AppendMethodFrame(b, 1, &amqp.BasicPublish{Exchange: "dedup"})
			b = amqp.AppendContent(b, 1, 131072, p.AppendTo(nil), []byte(fmt.Sprintf("%s%d", id, i)))
		}
		return b
	}
	// One write: three persistent publishes, the third a duplicate of the first.
	rc.write(publishes("a", "b", "a"))
	for confirmed := uint64(0); confirmed < 3; {
		_, m := rc.nextMethod()
		ack, ok := m.(*amqp.BasicAck)
		if !ok {
			t.Fatalf("unexpected %T %+v", m, m)
		}
		if ack.DeliveryTag <= confirmed || !ack.Multiple && ack.DeliveryTag != confirmed+1 {
			t.Fatalf("ack %+v after tags up to %d were confirmed", ack, confirmed)
		}
		confirmed = ack.DeliveryTag
	}
	// One write: a persistent publish, then one to a missing exchange (404).
	b := publishes("c")
	b = amqp.AppendMethodFrame(b, 1, &amqp.BasicPublish{Exchange: "missing"})
	b = amqp.AppendContent(b, 1, 131072, (&amqp.Properties{}).AppendTo(nil), []byte("x"))
	rc.write(b)
	for {
		_, m := rc.nextMethod()
		if cl, ok := m.(*amqp.ChannelClose); ok {
			if cl.ReplyCode != amqp.NotFound {
				t.Fatalf("channel closed with %d, want 404", cl.ReplyCode)
			}
			break
		}
		if ack, ok := m.(*amqp.BasicAck); !ok || ack.DeliveryTag != 4 {
			t.Fatalf("unexpected %T %+v", m, m)
		}
	}
	if info := queueInfo(ts, "dd"); info.Ready != 3 {
		t.Fatalf("queue holds %d messages, want 3 (a, b, c; the duplicate dropped)", info.Ready)
	}
}

// rawConfirmChannel opens a raw connection with channel 1 in confirm mode.
func rawConfirmChannel(t *testing.T, ts *testServer) *rawClient {
	t.Helper()
	rc := dialRaw(t, ts.addr)
	rc.open(0)
	rc.send(1, &amqp.ChannelOpen{})
	rc.expectMethod(&amqp.ChannelOpenOk{})
	rc.send(1, &amqp.ConfirmSelect{})
	rc.expectMethod(&amqp.ConfirmSelectOk{})
	return rc
}
