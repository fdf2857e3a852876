package server

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/msgstore"
)

var streamArgsTable = amqp091.Table{"x-queue-type": "stream"}

// streamDeclareArgs returns a stream's declare arguments: x-queue-type stream and
// the given key, value pairs.
func streamDeclareArgs(kv ...any) amqp091.Table {
	t := amqp091.Table{"x-queue-type": "stream"}
	for i := 0; i < len(kv); i += 2 {
		t[kv[i].(string)] = kv[i+1]
	}
	return t
}

// declareStream declares a durable stream queue with extra arguments.
func declareStream(t testing.TB, ch *amqp091.Channel, name string, extra amqp091.Table) {
	t.Helper()
	args := amqp091.Table{"x-queue-type": "stream"}
	for k, v := range extra {
		args[k] = v
	}
	_, err := ch.QueueDeclare(name, true, false, false, false, args)
	must(t, err)
}

// confirmPublishAll publishes bodies to queue q on a fresh channel of conn and waits for every confirm.
func confirmPublishAll(t testing.TB, conn *amqp091.Connection, q string, bodies ...string) {
	t.Helper()
	ch, err := conn.Channel()
	must(t, err)
	defer ch.Close()
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, len(bodies)))
	must(t, ch.Confirm(false))
	for _, b := range bodies {
		must(t, ch.Publish("", q, false, false, amqp091.Publishing{Body: []byte(b)}))
	}
	for range bodies {
		if c := nextConfirm(t, confirms); !c.Ack {
			t.Fatalf("publish %d nacked", c.DeliveryTag)
		}
	}
}

func numbered(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, "m"+strconv.Itoa(i))
	}
	return out
}

// consumeStreamAt opens a stream consumer on a fresh channel of conn.
func consumeStreamAt(t testing.TB, conn *amqp091.Connection, q string, args amqp091.Table) (*amqp091.Channel, <-chan amqp091.Delivery) {
	t.Helper()
	ch, err := conn.Channel()
	must(t, err)
	must(t, ch.Qos(10, 0, false))
	d, err := ch.Consume(q, "", false, false, false, false, args)
	must(t, err)
	return ch, d
}

// recvOffset receives one delivery, checks its body and x-stream-offset, and acks it.
func recvOffset(t testing.TB, d <-chan amqp091.Delivery, body string, offset int64) {
	t.Helper()
	m := recv(t, d)
	got, ok := m.Headers["x-stream-offset"].(int64)
	if string(m.Body) != body || !ok || got != offset {
		t.Fatalf("got %q at offset %v, want %q at %d", m.Body, m.Headers["x-stream-offset"], body, offset)
	}
	must(t, m.Ack(false))
}

// recvBody receives one delivery, checks its body, acks it and returns its offset.
func recvBody(t testing.TB, d <-chan amqp091.Delivery, body string) int64 {
	t.Helper()
	m := recv(t, d)
	off, ok := m.Headers["x-stream-offset"].(int64)
	if string(m.Body) != body || !ok {
		t.Fatalf("got %q at offset %v, want %q", m.Body, m.Headers["x-stream-offset"], body)
	}
	must(t, m.Ack(false))
	return off
}

func TestStreamOffsetSpecs(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", nil)
	confirmPublishAll(t, conn, "s", numbered(0, 10)...)

	cases := []struct {
		name  string
		spec  any
		first int
	}{
		{"first", "first", 0},
		{"last", "last", 9},
		{"numeric", int64(4), 4},
		{"numeric-int32", int32(7), 7},
		{"numeric-before-first", int64(0), 0},
		{"interval", "1h", 0},
		{"timestamp-past", time.Now().Add(-time.Hour), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cch, d := consumeStreamAt(t, conn, "s", amqp091.Table{"x-stream-offset": c.spec})
			defer cch.Close()
			for i := c.first; i < 10; i++ {
				recvOffset(t, d, "m"+strconv.Itoa(i), int64(i))
			}
			expectNone(t, d, cch, ch)
		})
	}

	// "next" and a future timestamp see only what is published after consuming.
	for name, spec := range map[string]any{"next": "next", "default": nil, "timestamp-future": time.Now().Add(time.Hour)} {
		t.Run(name, func(t *testing.T) {
			args := amqp091.Table{}
			if spec != nil {
				args["x-stream-offset"] = spec
			}
			cch, d := consumeStreamAt(t, conn, "s", args)
			defer cch.Close()
			expectNone(t, d, cch, ch)
			next := int64(ts.Vhost("/").streams.get(ts.Vhost("/").queue("s")).log.Stats().NextOffset)
			confirmPublishAll(t, conn, "s", "new")
			if spec == "timestamp-future" {
				expectNone(t, d, cch, ch)
				return
			}
			recvOffset(t, d, "new", next)
		})
	}
}

func TestStreamTimestampSeeksIntoTheMiddle(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", nil)
	confirmPublishAll(t, conn, "s", numbered(0, 5)...)
	// AMQP timestamps have one-second resolution: wait until the clock passes
	// a whole second after the first batch.
	mark := time.Now().Truncate(time.Second).Add(time.Second)
	waitFor(t, 3*time.Second, "the next second", func() bool { return time.Now().After(mark) })
	confirmPublishAll(t, conn, "s", numbered(5, 8)...)
	cch, d := consumeStreamAt(t, conn, "s", amqp091.Table{"x-stream-offset": mark})
	defer cch.Close()
	for i := 5; i < 8; i++ {
		recvOffset(t, d, "m"+strconv.Itoa(i), int64(i))
	}
	expectNone(t, d, cch, ch)
}

func TestStreamManyConsumersAndPrefetchCredit(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", nil)
	confirmPublishAll(t, conn, "s", numbered(0, 30)...)

	// A consumer with prefetch 3 gets 3 and no more until it acks.
	slow, err := conn.Channel()
	must(t, err)
	must(t, slow.Qos(3, 0, false))
	sd, err := slow.Consume("s", "slow", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
	must(t, err)
	var held []amqp091.Delivery
	for range 3 {
		held = append(held, recv(t, sd))
	}
	expectNone(t, sd, slow, ch)

	// Meanwhile another consumer reads the tail region unaffected.
	fast, fd := consumeStreamAt(t, conn, "s", amqp091.Table{"x-stream-offset": int64(20)})
	defer fast.Close()
	for i := 20; i < 30; i++ {
		recvOffset(t, fd, "m"+strconv.Itoa(i), int64(i))
	}
	must(t, held[2].Ack(true)) // returns all three credits
	for i := 3; i < 6; i++ {
		recvOffset(t, sd, "m"+strconv.Itoa(i), int64(i))
	}
	// Acking never removes anything: a new consumer still reads from 0.
	again, ad := consumeStreamAt(t, conn, "s", amqp091.Table{"x-stream-offset": "first"})
	defer again.Close()
	recvOffset(t, ad, "m0", 0)
	must(t, slow.Cancel("slow", false))
}

func TestStreamRefusals(t *testing.T) {
	ts := startServer(t)
	conn := ts.dial(t)
	ch, err := conn.Channel()
	must(t, err)
	for name, declare := range map[string]func(*amqp091.Channel) error{
		"non-durable": func(c *amqp091.Channel) error {
			_, err := c.QueueDeclare("s1", false, false, false, false, streamArgsTable)
			return err
		},
		"exclusive": func(c *amqp091.Channel) error {
			_, err := c.QueueDeclare("s2", true, false, true, false, streamArgsTable)
			return err
		},
		"message-ttl": func(c *amqp091.Channel) error {
			_, err := c.QueueDeclare("s3", true, false, false, false, amqp091.Table{"x-queue-type": "stream", "x-message-ttl": int32(10)})
			return err
		},
		"single-active-consumer": func(c *amqp091.Channel) error {
			_, err := c.QueueDeclare("s5", true, false, false, false, amqp091.Table{"x-queue-type": "stream", "x-single-active-consumer": true})
			var ae *amqp091.Error
			if errors.As(err, &ae) && ae.Reason != "PRECONDITION_FAILED - invalid arg 'x-single-active-consumer' for queue 's5' in vhost '/' of queue type rabbit_stream_queue" {
				t.Errorf("refusal text %q differs from RabbitMQ 3.10's", ae.Reason)
			}
			return err
		},
		"bad-max-age": func(c *amqp091.Channel) error {
			_, err := c.QueueDeclare("s4", true, false, false, false, amqp091.Table{"x-queue-type": "stream", "x-max-age": "10x"})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := conn.Channel()
			must(t, err)
			expectCode(t, declare(c), 406)
		})
	}

	declareStream(t, ch, "s", nil)
	confirmPublishAll(t, conn, "s", "a", "b")

	// Consuming without basic.qos: 406, as RabbitMQ.
	c1, err := conn.Channel()
	must(t, err)
	_, err = c1.Consume("s", "", false, false, false, false, nil)
	expectCode(t, err, 406)

	// A bad offset specification: 406.
	c3, err := conn.Channel()
	must(t, err)
	must(t, c3.Qos(5, 0, false))
	_, err = c3.Consume("s", "", false, false, false, false, amqp091.Table{"x-stream-offset": "yesterday"})
	expectCode(t, err, 406)

	// basic.get: 540 NOT_IMPLEMENTED, which closes the connection.
	_, _, err = ch.Get("s", false)
	expectCode(t, err, 540)

	// Requeue: 540 as well.
	conn2 := ts.dial(t)
	c4, d := consumeStreamAt(t, conn2, "s", amqp091.Table{"x-stream-offset": "first"})
	closed := conn2.NotifyClose(make(chan *amqp091.Error, 1))
	m := recv(t, d)
	must(t, m.Nack(false, true))
	if e := waitClose(t, closed); e == nil || e.Code != 540 {
		t.Fatalf("nack with requeue: %v, want 540", e)
	}
	_ = c4
}

func TestStreamRetentionBySize(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", amqp091.Table{"x-max-length-bytes": int64(8 << 10), "x-stream-max-segment-size-bytes": int64(2 << 10)})
	body := make([]byte, 200)
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 200))
	must(t, ch.Confirm(false))
	for range 200 {
		must(t, ch.Publish("", "s", false, false, amqp091.Publishing{Body: body}))
	}
	for range 200 {
		if !nextConfirm(t, confirms).Ack {
			t.Fatal("nack")
		}
	}
	st := ts.Vhost("/").streams.get(ts.Vhost("/").queue("s"))
	waitFor(t, 5*time.Second, "retention by size", func() bool {
		s := st.log.Stats()
		return s.Bytes <= 8<<10 && s.FirstOffset > 0
	})
	s := st.log.Stats()
	if s.NextOffset != 200 || s.Segments < 2 {
		t.Fatalf("after retention: %+v", s)
	}
	// "first" now starts at the oldest kept segment.
	cch, d := consumeStreamAt(t, conn, "s", amqp091.Table{"x-stream-offset": "first"})
	defer cch.Close()
	m := recv(t, d)
	if got := m.Headers["x-stream-offset"].(int64); uint64(got) != s.FirstOffset {
		t.Fatalf("first delivery at %d, want %d", got, s.FirstOffset)
	}
}

func TestStreamRetentionByAge(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	declareStream(t, ch, "s", amqp091.Table{"x-max-age": "1s", "x-stream-max-segment-size-bytes": int64(1024)})
	body := make([]byte, 300)
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 20))
	must(t, ch.Confirm(false))
	for range 20 {
		must(t, ch.Publish("", "s", false, false, amqp091.Publishing{Body: body}))
	}
	for range 20 {
		nextConfirm(t, confirms)
	}
	st := ts.Vhost("/").streams.get(ts.Vhost("/").queue("s"))
	before := st.log.Stats()
	if before.Segments < 5 {
		t.Fatalf("want many segments, got %+v", before)
	}
	waitFor(t, 5*time.Second, "retention by age", func() bool { return st.log.Stats().Segments == 1 })
	after := st.log.Stats()
	if after.NextOffset != 20 || after.FirstOffset == 0 {
		t.Fatalf("after age retention: %+v", after)
	}
}

func TestStreamOffsetTrackingAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", nil)
	confirmPublishAll(t, conn, "s", numbered(0, 10)...)
	track := amqp091.Table{"x-stream-offset": "first", "x-stream-offset-tracking-name": "app1"}
	cch, d := consumeStreamAt(t, conn, "s", track)
	for i := range 4 {
		recvOffset(t, d, "m"+strconv.Itoa(i), int64(i))
	}
	// A reconnect on the same broker resumes after offset 3.
	must(t, cch.Close())
	cch, d = consumeStreamAt(t, conn, "s", track)
	recvOffset(t, d, "m4", 4)
	recvOffset(t, d, "m5", 5)
	must(t, cch.Close())
	must(t, ts.Close())

	ts2 := startServer(t, withDataDir(dir))
	conn2, _ := ts2.channel(t)
	confirmPublishAll(t, conn2, "s", "m10")
	_, d2 := consumeStreamAt(t, conn2, "s", track)
	for i := 6; i < 10; i++ {
		recvOffset(t, d2, "m"+strconv.Itoa(i), int64(i))
	}
	// Tracking snapshots took offsets after m9: m10 comes later.
	if off := recvBody(t, d2, "m10"); off <= 10 {
		t.Fatalf("m10 at offset %d, want past the tracking snapshots", off)
	}
	if _, err := os.Stat(filepath.Join(ts2.Vhost("/").streams.get(ts2.Vhost("/").queue("s")).dir, legacyTrackingFile)); !os.IsNotExist(err) {
		t.Fatalf("offsets.json exists (%v): tracking belongs in the log", err)
	}
	// Without a tracking name the offset spec applies.
	_, d3 := consumeStreamAt(t, conn2, "s", amqp091.Table{"x-stream-offset": "first"})
	recvOffset(t, d3, "m0", 0)
}

func TestStreamDeleteCancelsConsumersAndRemovesFiles(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", nil)
	confirmPublishAll(t, conn, "s", "a")
	cch, _ := consumeStreamAt(t, conn, "s", amqp091.Table{"x-stream-offset": "first"})
	cancels := cch.NotifyCancel(make(chan string, 1))
	st := ts.Vhost("/").streams.get(ts.Vhost("/").queue("s"))
	_, err := ch.QueueDelete("s", false, false, false)
	must(t, err)
	select {
	case tag := <-cancels:
		if tag == "" {
			t.Fatal("empty cancel tag")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no basic.cancel after deleting the stream")
	}
	if _, err := os.Stat(st.dir); !os.IsNotExist(err) {
		t.Fatalf("stream directory after delete: %v", err)
	}
}

func TestStreamReaderStopsWithItsChannel(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", nil)
	st := ts.Vhost("/").streams.get(ts.Vhost("/").queue("s"))
	count := func() int {
		st.mu.Lock()
		defer st.mu.Unlock()
		return len(st.consumers)
	}
	c1, _ := consumeStreamAt(t, conn, "s", nil)
	c2, _ := consumeStreamAt(t, conn, "s", nil)
	waitFor(t, 5*time.Second, "two stream consumers", func() bool { return count() == 2 })
	must(t, c1.Close())
	waitFor(t, 5*time.Second, "the closed channel's reader to stop", func() bool { return count() == 1 })
	_ = c2
	must(t, conn.Close())
	waitFor(t, 5*time.Second, "the closed connection's reader to stop", func() bool { return count() == 0 })
}

// A message routed to a stream and to a durable classic queue is confirmed
// once both are durable.
func TestStreamAndClassicQueueShareAConfirm(t *testing.T) {
	ts := startServer(t)
	f := newConfirmFixture(t, ts) // stream s and durable queue q on amq.fanout
	for i := range 10 {
		must(t, f.pub.Publish("amq.fanout", "", false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte("m" + strconv.Itoa(i))}))
	}
	for i := range 10 {
		if c := nextConfirm(t, f.confirms); !c.Ack || c.DeliveryTag != uint64(i+1) {
			t.Fatalf("confirm %d: %+v", i, c)
		}
	}
	_, d := consumeStreamAt(t, ts.dial(t), "s", amqp091.Table{"x-stream-offset": "first"})
	for i := range 10 {
		recvOffset(t, d, "m"+strconv.Itoa(i), int64(i))
	}
	if n, _ := ts.Vhost("/").queue("q").counts(); n != 10 {
		t.Fatalf("classic queue holds %d, want 10", n)
	}
}

func TestStreamFlushPolicyPerStream(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "os", amqp091.Table{"x-stream-flush": "os"})
	declareStream(t, ch, "msgs", amqp091.Table{"x-stream-flush": "messages", "x-stream-flush-messages": int32(3)})
	declareStream(t, ch, "dflt", nil)
	vh := ts.Vhost("/")
	for name, want := range map[string]msgstore.FlushPolicy{"os": msgstore.FlushOS, "msgs": msgstore.FlushMessages, "dflt": ts.cfg.Flush} {
		if got := vh.streams.get(vh.queue(name)).log.Stats().FlushPolicy; got != want {
			t.Errorf("stream %s: flush policy %v, want %v", name, got, want)
		}
		confirmPublishAll(t, conn, name, "a", "b", "c", "d")
	}
	_, err := ch.QueueDeclare("bad", true, false, false, false, amqp091.Table{"x-queue-type": "stream", "x-stream-flush": "sometimes"})
	expectCode(t, err, 406)
}

// A stream without x-stream-flush takes its vhost's flush policy.
func TestStreamFlushPolicyDefaultsToTheVhosts(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.Vhosts = []string{"fast"}
		c.VhostFlush = map[string]msgstore.FlushPolicy{"fast": msgstore.FlushOS}
	})
	ts.grant(t, "guest", "fast", Permission{".*", ".*", ".*"})
	conn, err := amqp091.Dial(ts.url + "fast")
	must(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	must(t, err)
	declareStream(t, ch, "s", nil)
	declareStream(t, ch, "synced", amqp091.Table{"x-stream-flush": "fsync"})
	vh := ts.Vhost("fast")
	for name, want := range map[string]msgstore.FlushPolicy{"s": msgstore.FlushOS, "synced": msgstore.FlushFsync} {
		if got := vh.streams.get(vh.queue(name)).log.Stats().FlushPolicy; got != want {
			t.Errorf("stream %s in vhost fast: flush policy %v, want %v", name, got, want)
		}
	}
}

func TestStreamDeliveryKeepsPublisherProperties(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", nil)
	must(t, ch.Publish("", "s", false, false, amqp091.Publishing{
		Headers: amqp091.Table{"k": "v"}, ContentType: "text/plain", MessageId: "id1", Body: []byte("x"),
	}))
	_, d := consumeStreamAt(t, conn, "s", amqp091.Table{"x-stream-offset": "first"})
	m := recv(t, d)
	if m.Headers["k"] != "v" || m.Headers["x-stream-offset"] != int64(0) || m.ContentType != "text/plain" || m.MessageId != "id1" || m.RoutingKey != "s" {
		t.Fatalf("delivery lost properties: %+v", m)
	}
}

// publishPadded publishes n messages of size bytes to q with confirms.
func publishPadded(t testing.TB, conn *amqp091.Connection, q string, n, size int) {
	t.Helper()
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = strings.Repeat("b", size)
	}
	confirmPublishAll(t, conn, q, bodies...)
}

func streamInfo(t testing.TB, ts *testServer, q string) StreamInfo {
	t.Helper()
	info, ok := ts.Vhost("/").queue(q).StreamInfo()
	if !ok {
		t.Fatalf("%s is not an open stream", q)
	}
	return info
}

// A policy's max-length-bytes and stream-max-segment-size-bytes shape a
// stream declared without retention arguments.
func TestStreamRetentionByPolicy(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "ps", nil)
	_, err := ts.PutPolicy(Policy{Vhost: "/", Name: "retain", Pattern: "^ps", ApplyTo: ApplyToQueues,
		Definition: map[string]any{"max-length-bytes": int64(8192), "stream-max-segment-size-bytes": int64(2048)}}, false)
	must(t, err)
	declareStream(t, ch, "ps-later", nil) // declared under the policy
	for _, q := range []string{"ps", "ps-later"} {
		if info := streamInfo(t, ts, q); info.MaxLengthBytes != 8192 || info.SegmentSize != 2048 || info.MaxAge != 0 {
			t.Fatalf("%s: effective retention %+v", q, info)
		}
	}
	publishPadded(t, conn, "ps", 200, 200)
	confirmPublishAll(t, conn, "ps", "newest")
	waitFor(t, 5*time.Second, "retention by the policy's size", func() bool {
		info := streamInfo(t, ts, "ps")
		return info.FirstOffset > 0 && info.Bytes <= 8192
	})
	if info := streamInfo(t, ts, "ps"); info.Segments < 2 || info.NextOffset != 201 {
		t.Fatalf("after retention: %+v", info)
	}
	// The active segment stays: the newest message is still there.
	_, d := consumeStreamAt(t, conn, "ps", amqp091.Table{"x-stream-offset": "last"})
	recvOffset(t, d, "newest", 200)
}

// A policy set on an existing stream changes its retention at once, and its
// max-length-bytes wins over the declared argument (also when larger);
// removing the policy restores the argument.
func TestStreamPolicyAppliesToExistingStream(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "es", amqp091.Table{"x-stream-max-segment-size-bytes": int64(2048), "x-max-length-bytes": int64(1 << 20)})
	publishPadded(t, conn, "es", 200, 200)
	if info := streamInfo(t, ts, "es"); info.Segments < 10 || info.FirstOffset != 0 {
		t.Fatalf("before the policy: %+v", info)
	}
	p := Policy{Vhost: "/", Name: "small", Pattern: "^es$", ApplyTo: ApplyToQueues, Definition: map[string]any{"max-length-bytes": int64(8192)}}
	_, err := ts.PutPolicy(p, false)
	must(t, err)
	waitFor(t, 5*time.Second, "retention without another publish", func() bool {
		info := streamInfo(t, ts, "es")
		return info.FirstOffset > 0 && info.Bytes <= 8192
	})
	must(t, ts.DeletePolicy("/", "small", false))
	if info := streamInfo(t, ts, "es"); info.MaxLengthBytes != 1<<20 || info.SegmentSize != 2048 {
		t.Fatalf("after removing the policy: %+v", info)
	}
	p.Definition = map[string]any{"max-length-bytes": int64(1 << 30)}
	_, err = ts.PutPolicy(p, false)
	must(t, err)
	if info := streamInfo(t, ts, "es"); info.MaxLengthBytes != 1<<30 {
		t.Fatalf("a larger policy value does not win: %+v", info)
	}
}

// A policy's max-age removes old segments of an existing stream.
func TestStreamRetentionByPolicyAge(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "as", amqp091.Table{"x-stream-max-segment-size-bytes": int64(1024)})
	publishPadded(t, conn, "as", 20, 300)
	before := streamInfo(t, ts, "as")
	if before.Segments < 5 {
		t.Fatalf("want many segments, got %+v", before)
	}
	_, err := ts.PutPolicy(Policy{Vhost: "/", Name: "age", Pattern: "^as$", ApplyTo: ApplyToQueues,
		Definition: map[string]any{"max-age": "1s"}}, false)
	must(t, err)
	if info := streamInfo(t, ts, "as"); info.MaxAge != time.Second {
		t.Fatalf("effective max-age %v", info.MaxAge)
	}
	waitFor(t, 5*time.Second, "retention by the policy's age", func() bool { return streamInfo(t, ts, "as").Segments == 1 })
	if after := streamInfo(t, ts, "as"); after.NextOffset != before.NextOffset || after.FirstOffset == 0 {
		t.Fatalf("after age retention: %+v", after)
	}
}

// After a restart the policy applies again, the segment size included
// (msgstore.Log.SetSegmentSize on the reopened log).
func TestStreamPolicySurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	_, ch := ts.channel(t)
	declareStream(t, ch, "rs", nil)
	_, err := ts.PutPolicy(Policy{Vhost: "/", Name: "r", Pattern: "^rs$", ApplyTo: ApplyToQueues,
		Definition: map[string]any{"max-length-bytes": int64(4096), "stream-max-segment-size-bytes": int64(1024)}}, false)
	must(t, err)
	must(t, ts.Close())

	ts2 := startServer(t, withDataDir(dir))
	if info := streamInfo(t, ts2, "rs"); info.MaxLengthBytes != 4096 || info.SegmentSize != 1024 {
		t.Fatalf("after restart: %+v", info)
	}
	conn2, _ := ts2.channel(t)
	publishPadded(t, conn2, "rs", 60, 200)
	waitFor(t, 5*time.Second, "retention after restart", func() bool {
		info := streamInfo(t, ts2, "rs")
		return info.FirstOffset > 0 && info.Bytes <= 4096 && info.Segments > 1
	})
}
