package server

import (
	"strconv"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// Tests of the hashing and random exchange types on Warren alone: where
// Warren refuses what RabbitMQ would crash on, and the random types, whose
// choices cannot be compared message by message.

// TestConsistentHashWeightLimit: RabbitMQ allocates one bucket per unit of
// weight, so a huge binding key exhausts the node's memory (observed: the
// 3.10.8 reference node died on 99999999999999999999). Warren keeps one ring
// segment per queue and refuses weights above route.MaxWeight; it refuses a
// hash-header or hash-property that is not a string with a 406 where
// RabbitMQ's plugin crashes (541 INTERNAL_ERROR, connection closed).
func TestConsistentHashWeightLimit(t *testing.T) {
	ts := startServer(t)
	b := hashBroker{url: ts.url}
	c := newHashClient(t, b, ts.url)
	c.queues(false, "big", "small")
	c.exchange("hx", "x-consistent-hash", false, nil)
	for _, key := range []string{"2147483648", "99999999999999999999"} {
		ch, err := c.conn.Channel()
		must(t, err)
		err = ch.QueueBind("big", key, "hx", false, nil)
		if e, ok := err.(*amqp091.Error); !ok || e.Code != 406 || e.Reason != "PRECONDITION_FAILED - The binding key must be at most 2147483647" {
			t.Errorf("weight %s: %v", key, err)
		}
	}
	c.bind("big", "2147483647", "hx")
	c.bind("small", "1", "hx")
	msgs, keys := routingKeys(200)
	c.publishAll("hx", msgs, keys)
	where := c.where(len(msgs), "big", "small")
	for i, q := range where {
		if q != "big" {
			t.Errorf("%s went to %q; with weights 2147483647:1 it goes to big", keys[i], q)
		}
	}
	for _, tc := range []struct {
		args amqp091.Table
		text string
	}{
		{amqp091.Table{"hash-header": int32(5)}, "hash-header must be a longstr, not signedint"},
		{amqp091.Table{"hash-property": []byte("message_id")}, "hash-property must be a longstr, not binary"},
		{amqp091.Table{"hash-header": int32(1), "hash-property": "message_id"}, "hash-header must be a longstr, not signedint"},
	} {
		ch, err := c.conn.Channel()
		must(t, err)
		err = ch.ExchangeDeclare("bad", "x-consistent-hash", false, false, false, false, tc.args)
		if e, ok := err.(*amqp091.Error); !ok || e.Code != 406 || e.Reason != "PRECONDITION_FAILED - "+tc.text {
			t.Errorf("%v: %v, want 406 %s", tc.args, err, tc.text)
		}
	}
}

// TestConsistentHashIgnoresCC: RabbitMQ routes through a hashing exchange
// once per message, so CC and BCC keys never add a second queue.
func TestConsistentHashIgnoresCC(t *testing.T) {
	ts := startServer(t)
	c := newHashClient(t, hashBroker{url: ts.url}, ts.url)
	qs := []string{"q1", "q2", "q3"}
	c.queues(false, qs...)
	c.exchange("hx", "x-consistent-hash", false, nil)
	for _, q := range qs {
		c.bind(q, "1", "hx")
	}
	msgs, keys := routingKeys(100)
	for i := range msgs {
		msgs[i].Headers = amqp091.Table{"CC": []any{"cc-" + strconv.Itoa(i), "x"}, "BCC": []any{"y"}}
	}
	c.publishAll("hx", msgs, keys)
	for i, q := range c.where(len(msgs), qs...) { // where fails on a second copy
		if q == "" {
			t.Errorf("message %d routed nowhere", i)
		}
	}
}

// TestRandomExchange: x-random picks a binding uniformly, so a queue bound
// twice gets twice the share.
func TestRandomExchange(t *testing.T) {
	ts := startServer(t)
	c := newHashClient(t, hashBroker{url: ts.url}, ts.url)
	qs := []string{"twice", "once-a", "once-b"}
	c.queues(false, qs...)
	c.exchange("rx", "x-random", false, nil)
	c.bind("twice", "a", "rx")
	c.bind("twice", "b", "rx")
	c.bind("once-a", "", "rx")
	c.bind("once-b", "whatever", "rx")
	msgs, keys := routingKeys(4000)
	c.publishAll("rx", msgs, keys)
	counts := countWhere(c.where(len(msgs), qs...))
	// Expected 2000, 1000, 1000; the bounds are more than 7 standard deviations out.
	if n := counts["twice"]; n < 1700 || n > 2300 {
		t.Errorf("twice got %d of 4000, want about 2000 (%v)", n, counts)
	}
	for _, q := range qs[1:] {
		if n := counts[q]; n < 800 || n > 1200 {
			t.Errorf("%s got %d of 4000, want about 1000 (%v)", q, n, counts)
		}
	}
	if counts[""] != 0 {
		t.Errorf("%d messages routed nowhere", counts[""])
	}
}

// TestLocalRandomExchange: x-local-random (RabbitMQ 4.0) takes only queue
// bindings with an empty key to classic queues, and on one node picks any of
// them at random. Texts as in rabbit_exchange_type_local_random.erl.
func TestLocalRandomExchange(t *testing.T) {
	ts := startServer(t)
	c := newHashClient(t, hashBroker{url: ts.url}, ts.url)
	qs := []string{"lr1", "lr2"}
	c.queues(false, qs...)
	c.exchange("lx", "x-local-random", false, nil)
	_, err := c.ch.QueueDeclare("lr-stream", true, false, false, false, amqp091.Table{"x-queue-type": "stream"})
	must(t, err)
	for _, tc := range []struct {
		bind func(ch *amqp091.Channel) error
		text string
	}{
		{func(ch *amqp091.Channel) error { return ch.QueueBind("lr1", "k", "lx", false, nil) },
			"Non empty binding 'k' key not permitted"},
		{func(ch *amqp091.Channel) error { return ch.ExchangeBind("amq.direct", "", "lx", false, nil) },
			"Destination not found"},
		{func(ch *amqp091.Channel) error { return ch.QueueBind("lr-stream", "", "lx", false, nil) },
			"Queue type rabbit_stream_queue not valid for this exchange type"},
	} {
		ch, err := c.conn.Channel()
		must(t, err)
		err = tc.bind(ch)
		if e, ok := err.(*amqp091.Error); !ok || e.Code != 406 || e.Reason != "PRECONDITION_FAILED - "+tc.text {
			t.Errorf("%v, want 406 %s", err, tc.text)
		}
	}
	for _, q := range qs {
		c.bind(q, "", "lx")
	}
	msgs, keys := routingKeys(2000)
	c.publishAll("lx", msgs, keys)
	counts := countWhere(c.where(len(msgs), qs...))
	for _, q := range qs {
		if n := counts[q]; n < 800 || n > 1200 {
			t.Errorf("%s got %d of 2000, want about 1000 (%v)", q, n, counts)
		}
	}
}

func countWhere(where []string) map[string]int {
	counts := make(map[string]int)
	for _, q := range where {
		counts[q]++
	}
	return counts
}
