package server

import (
	"errors"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp"
)

// The reply texts in this file are RabbitMQ 3.10.8's, read off a running node
// for the same operations.

// expectReason fails unless err is an AMQP exception with code and reason.
func expectReason(t testing.TB, err error, code int, reason string) {
	t.Helper()
	var ae *amqp091.Error
	if !errors.As(err, &ae) || ae.Code != code || ae.Reason != reason {
		t.Fatalf("got %v\nwant %d %q", err, code, reason)
	}
}

func TestStreamPurgeIsNotImplemented(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", nil)
	confirmPublishAll(t, conn, "s", "a", "b")

	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	_, err := ch.QueuePurge("s", false)
	expectReason(t, err, 540, "NOT_IMPLEMENTED - queue.purge not supported by stream queues queue 's' in vhost '/'")
	if e := waitClose(t, closed); e == nil || e.Code != 540 {
		t.Fatalf("connection close: %v, want 540", e)
	}
	// Nothing was purged.
	_, d := consumeStreamAt(t, ts.dial(t), "s", amqp091.Table{"x-stream-offset": "first"})
	recvOffset(t, d, "a", 0)
	recvOffset(t, d, "b", 1)

	if _, err := ts.PurgeQueue("/", "s"); err == nil {
		t.Fatal("management purge of a stream succeeded")
	}
}

func TestStreamConsumeChecksAsRabbitMQ(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", nil)

	// The prefetch is checked first, also for automatic acknowledgement.
	c1, err := conn.Channel()
	must(t, err)
	_, err = c1.Consume("s", "", true, false, false, false, nil)
	expectReason(t, err, 406, "PRECONDITION_FAILED - consumer prefetch count is not set for 'queue 's' in vhost '/''")

	c2, err := conn.Channel()
	must(t, err)
	must(t, c2.Qos(10, 0, false))
	_, err = c2.Consume("s", "", false, false, false, false, amqp091.Table{"x-stream-offset": "1x"})
	expectReason(t, err, 406, "PRECONDITION_FAILED - invalid arg 'x-stream-offset' for queue 's' in vhost '/': {invalid_stream_offset_arg,{longstr,<<\"1x\">>}}")

	// Automatic acknowledgement: 540, which closes the connection.
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	c3, err := conn.Channel()
	must(t, err)
	must(t, c3.Qos(10, 0, false))
	_, err = c3.Consume("s", "", true, false, false, false, nil)
	expectReason(t, err, 540, "NOT_IMPLEMENTED - automatic acknowledgement not supported by stream queues queue 's' in vhost '/'")
	if e := waitClose(t, closed); e == nil || e.Code != 540 {
		t.Fatalf("connection close: %v, want 540", e)
	}
}

// A negative x-stream-offset starts at the first record, as in RabbitMQ.
func TestStreamNegativeOffsetStartsAtFirst(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", nil)
	confirmPublishAll(t, conn, "s", numbered(0, 3)...)
	for _, off := range []any{int32(-1), int64(-5), int8(-1), []byte("first")} {
		c, d := consumeStreamAt(t, conn, "s", amqp091.Table{"x-stream-offset": off})
		for i, body := range numbered(0, 3) {
			recvOffset(t, d, body, int64(i))
		}
		must(t, c.Close())
	}
}

func TestStreamDeclareRefusesAsRabbitMQ(t *testing.T) {
	const s = "for queue 's' in vhost '/'"
	stream := streamDeclareArgs
	unsupported := func(arg string) string {
		return "PRECONDITION_FAILED - invalid arg '" + arg + "' " + s + " of queue type rabbit_stream_queue"
	}
	invalid := func(arg, reason string) string {
		return "PRECONDITION_FAILED - invalid arg '" + arg + "' " + s + ": " + reason
	}
	cases := []struct {
		name    string
		durable bool
		args    amqp091.Table
		want    string // "" = declare-ok
	}{
		{"queue-mode", true, stream("x-queue-mode", "lazy"), unsupported("x-queue-mode")},
		{"queue-version", true, stream("x-queue-version", int32(2)), unsupported("x-queue-version")},
		{"queue-master-locator", true, stream("x-queue-master-locator", "min-masters"), unsupported("x-queue-master-locator")},
		{"quorum-initial-group-size", true, stream("x-quorum-initial-group-size", int32(1)), unsupported("x-quorum-initial-group-size")},
		{"max-in-memory-length", true, stream("x-max-in-memory-length", int32(1)), unsupported("x-max-in-memory-length")},
		{"max-in-memory-bytes", true, stream("x-max-in-memory-bytes", int32(1)), unsupported("x-max-in-memory-bytes")},
		{"dead-letter-strategy", true, stream("x-dead-letter-strategy", "at-most-once"), unsupported("x-dead-letter-strategy")},
		{"delivery-limit", true, stream("x-delivery-limit", int32(1)), unsupported("x-delivery-limit")},
		{"expires", true, stream("x-expires", int32(1)), unsupported("x-expires")},
		// The key is refused before its value is looked at.
		{"negative message-ttl", true, stream("x-message-ttl", int32(-1)), unsupported("x-message-ttl")},
		// A value a stream takes is checked before the keys it refuses.
		{"bad max-age and ttl", true, stream("x-max-age", "1x", "x-message-ttl", int32(5)), invalid("x-max-age", "invalid_max_age")},
		{"max-age not a string", true, stream("x-max-age", int32(5)), invalid("x-max-age", "{unacceptable_type,signedint}")},
		{"max-age zero", true, stream("x-max-age", "0D"), invalid("x-max-age", "invalid_max_age")},
		{"max-age very long", true, stream("x-max-age", "1000000000000Y"), ""},
		{"max-length-bytes string", true, stream("x-max-length-bytes", "5"), invalid("x-max-length-bytes", `"expected integer, got longstr"`)},
		{"max-length-bytes negative", true, stream("x-max-length-bytes", int32(-1)), invalid("x-max-length-bytes", "{value_negative,-1}")},
		{"leader locator", true, stream("x-queue-leader-locator", "balanced"), ""},
		{"bad leader locator", true, stream("x-queue-leader-locator", "bogus"), invalid("x-queue-leader-locator", "invalid_queue_locator_arg")},
		{"leader locator type", true, stream("x-queue-leader-locator", int32(1)), invalid("x-queue-leader-locator", "{unacceptable_type,signedint}")},
		{"initial cluster size", true, stream("x-initial-cluster-size", int32(1)), ""},
		{"initial cluster size 0", true, stream("x-initial-cluster-size", int32(0)), invalid("x-initial-cluster-size", "{value_zero,0}")},
		{"initial cluster size string", true, stream("x-initial-cluster-size", "1"), invalid("x-initial-cluster-size", `"expected integer, got longstr"`)},
		{"queue type binary", true, amqp091.Table{"x-queue-type": []byte("stream")}, invalid("x-queue-type", "{unacceptable_type,binary}")},
		{"queue type unknown", true, amqp091.Table{"x-queue-type": "bogus"}, invalid("x-queue-type", `"unsupported queue type 'bogus'"`)},
	}
	ts := startServer(t)
	conn := ts.dial(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch, err := conn.Channel()
			must(t, err)
			_, err = ch.QueueDeclare("s", c.durable, false, false, false, c.args)
			if c.want == "" {
				must(t, err)
				_, err = ch.QueueDelete("s", false, false, false)
				must(t, err)
				return
			}
			expectReason(t, err, 406, c.want)
		})
	}
}

// x-stream-max-segment-size-bytes takes 0 to 3e9, as RabbitMQ; a stream with
// a segment size below msgstore's smallest still stores and delivers.
func TestStreamSegmentSizeBoundsAsRabbitMQ(t *testing.T) {
	const arg = "x-stream-max-segment-size-bytes"
	ts := startServer(t)
	conn := ts.dial(t)
	for _, size := range []any{int32(0), int32(1), int32(500), int64(2<<30 + 1), int64(3_000_000_000)} {
		ch, err := conn.Channel()
		must(t, err)
		declareStream(t, ch, "s", amqp091.Table{arg: size})
		var bodies []string // 700 bytes each: more than one segment of the smallest size
		for _, b := range numbered(0, 5) {
			bodies = append(bodies, b+strings.Repeat(".", 700))
		}
		confirmPublishAll(t, conn, "s", bodies...)
		c, d := consumeStreamAt(t, conn, "s", amqp091.Table{"x-stream-offset": "first"})
		for i, body := range bodies {
			recvOffset(t, d, body, int64(i))
		}
		if _, small := size.(int32); small {
			if n := streamInfo(t, ts, "s").Segments; n < 2 {
				t.Errorf("segment size %v: %d segments, want several", size, n)
			}
		}
		must(t, c.Close())
		_, err = ch.QueueDelete("s", false, false, false)
		must(t, err)
	}
	refusals := []struct {
		durable bool
		size    any
		want    string
	}{
		{true, int32(-1), "PRECONDITION_FAILED - invalid arg '" + arg + "' for queue 's' in vhost '/': {value_negative,-1}"},
		{true, "500", "PRECONDITION_FAILED - invalid arg '" + arg + "' for queue 's' in vhost '/': \"expected integer, got longstr\""},
		{true, int64(3_000_000_001), "PRECONDITION_FAILED - Exceeded max value for " + arg},
		// The properties are checked before the upper bound.
		{false, int64(4_000_000_000), "PRECONDITION_FAILED - invalid property 'non-durable' for queue 's' in vhost '/'"},
	}
	for _, r := range refusals {
		ch, err := conn.Channel()
		must(t, err)
		_, err = ch.QueueDeclare("s", r.durable, false, false, false, amqp091.Table{"x-queue-type": "stream", arg: r.size})
		expectReason(t, err, 406, r.want)
	}
}

func TestServerNamedStreamRefused(t *testing.T) {
	ts := startServer(t)
	conn := ts.dial(t)
	for _, qtype := range []string{"stream", "quorum"} {
		ch, err := conn.Channel()
		must(t, err)
		_, err = ch.QueueDeclare("", true, false, false, false, amqp091.Table{"x-queue-type": qtype})
		expectReason(t, err, 406, "PRECONDITION_FAILED - Cannot declare a server-named queue for type rabbit_"+qtype+"_queue")
	}
}

// A stream stored by an earlier release with an argument now refused (it was
// accepted and did nothing) still starts, keeps its records and compares
// redeclares against its arguments as declared.
func TestStreamStoredWithRefusedArgumentStillLoads(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", nil)
	confirmPublishAll(t, conn, "s", "a")
	legacy := amqp.Table{"x-queue-type": "stream", "x-queue-mode": "lazy", "x-initial-cluster-size": int32(0)}
	must(t, ts.meta.put(bucketQueues, metaKey("/", "s"), metaQueue{Vhost: "/", Name: "s", Arguments: tableBytes(legacy)}))
	must(t, ts.Close())

	ts2 := startServer(t, withDataDir(dir))
	conn2, ch2 := ts2.channel(t)
	_, err := ch2.QueueDeclare("s", true, false, false, false, amqp091.Table{"x-queue-type": "stream", "x-initial-cluster-size": int16(0)})
	must(t, err)
	_, d := consumeStreamAt(t, conn2, "s", amqp091.Table{"x-stream-offset": "first"})
	recvOffset(t, d, "a", 0)
}
