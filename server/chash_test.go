package server

import (
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// Recorded from RabbitMQ 3.10.8 as exchange_types_test.go describes.
const (
	recordedRingChanges = `bound 1,2,3: hash-q1=156 hash-q2=329 hash-q3=515 hash-q4=0 513655381082
+q4 weight 2: hash-q1=121 hash-q2=241 hash-q3=389 hash-q4=249 7625e8791ef9
-q2: hash-q1=156 hash-q2=0 hash-q3=497 hash-q4=347 28569918e97b
-queue q1: hash-q1=0 hash-q2=0 hash-q3=592 hash-q4=408 a382096c4a9c
q2 bound twice, one unbound: hash-q1=0 hash-q2=0 hash-q3=592 hash-q4=408 a382096c4a9c`
	recordedHeaderHash   = `hash-h1=37 hash-h2=202 hash-h3=161 b1c2c1d48509`
	recordedPropertyHash = `message_id: hash-p-message_id-1=169 hash-p-message_id-2=85 hash-p-message_id-3=46 cbfeff91106e
correlation_id: hash-p-correlation_id-1=179 hash-p-correlation_id-2=75 hash-p-correlation_id-3=46 e5722305854a
timestamp: hash-p-timestamp-1=166 hash-p-timestamp-2=93 hash-p-timestamp-3=41 b9aba0e47f8c`
	recordedRestart = `before: hash-r1=93 hash-r2=332 hash-r3=75 215789050419
after: hash-r1=104 hash-r2=333 hash-r3=63 4b609afb9ca0`
	recordedModulusHash = `hash-m1=182 hash-m2=118 hash-m3=100 5cafd1ef4534`
)

// TestConsistentHashRingChanges routes 1,000 routing keys over queues bound
// with weights 1, 2 and 3, then after each change to the ring, and checks
// that every key lands where RabbitMQ puts it; and that adding a binding only
// moves keys to the new queue.
func TestConsistentHashRingChanges(t *testing.T) {
	compareWithRabbitMQ(t, recordedRingChanges, func(t *testing.T, b hashBroker) string {
		c := newHashClient(t, b, b.url)
		qs := []string{"hash-q1", "hash-q2", "hash-q3", "hash-q4"}
		c.queues(false, qs...)
		c.exchange("hash-x", "x-consistent-hash", false, nil)
		msgs, keys := routingKeys(1000)
		var out []string
		step := func(what string) []string {
			c.publishAll("hash-x", msgs, keys)
			where := c.where(len(msgs), qs...)
			out = append(out, what+": "+summarizeRouting(where, qs))
			return where
		}
		c.bind("hash-q1", "1", "hash-x")
		c.bind("hash-q2", "2", "hash-x")
		c.bind("hash-q3", "3", "hash-x")
		before := step("bound 1,2,3")
		c.bind("hash-q4", "2", "hash-x")
		after := step("+q4 weight 2")
		for i := range before {
			if after[i] != before[i] && after[i] != "hash-q4" {
				t.Errorf("adding hash-q4 moved %s from %s to %s", keys[i], before[i], after[i])
			}
		}
		must(t, c.ch.QueueUnbind("hash-q2", "2", "hash-x", nil))
		step("-q2")
		_, err := c.ch.QueueDelete("hash-q1", false, false, false)
		must(t, err)
		c.queues(false, "hash-q1")
		step("-queue q1")
		c.bind("hash-q2", "1", "hash-x")
		c.bind("hash-q2", "5", "hash-x")                         // a second binding: the ring ignores it...
		must(t, c.ch.QueueUnbind("hash-q2", "5", "hash-x", nil)) // ...and unbinding it takes q2 out
		step("q2 bound twice, one unbound")
		return strings.Join(out, "\n")
	})
}

func summarizeRouting(where, queues []string) string {
	counts := make(map[string]int)
	for _, q := range where {
		counts[q]++
	}
	var parts []string
	for _, q := range queues {
		parts = append(parts, q+"="+strconv.Itoa(counts[q]))
	}
	if counts[""] > 0 {
		parts = append(parts, "unrouted="+strconv.Itoa(counts[""]))
	}
	return strings.Join(parts, " ") + " " + digest(where)
}

// TestConsistentHashHeader hashes the hash-header header, whatever its type,
// and messages without it.
func TestConsistentHashHeader(t *testing.T) {
	compareWithRabbitMQ(t, recordedHeaderHash, func(t *testing.T, b hashBroker) string {
		c := newHashClient(t, b, b.url)
		qs := []string{"hash-h1", "hash-h2", "hash-h3"}
		c.queues(false, qs...)
		c.exchange("hash-hx", "x-consistent-hash", false, amqp091.Table{"hash-header": "user"})
		for i, q := range qs {
			c.bind(q, strconv.Itoa(i+1), "hash-hx")
		}
		n := 400
		msgs, keys := make([]amqp091.Publishing, n), make([]string, n)
		for i := range msgs {
			keys[i] = "same-key"
			var v any
			switch i % 10 {
			case 0:
				continue // no headers at all
			case 1:
				msgs[i].Headers = amqp091.Table{"other": "x"}
				continue
			case 2, 3, 4:
				v = "user-" + strconv.Itoa(i)
			case 5:
				v = int32(i)
			case 6:
				v = int64(i) << 33
			case 7:
				v = i%4 == 3
			case 8:
				v = float64(i) / 7
			case 9:
				v = time.Unix(1700000000+int64(i), 0)
			}
			msgs[i].Headers = amqp091.Table{"user": v}
		}
		c.publishAll("hash-hx", msgs, keys)
		return summarizeRouting(c.where(n, qs...), qs)
	})
}

// TestConsistentHashProperty hashes message_id, correlation_id and timestamp.
func TestConsistentHashProperty(t *testing.T) {
	compareWithRabbitMQ(t, recordedPropertyHash, func(t *testing.T, b hashBroker) string {
		c := newHashClient(t, b, b.url)
		n := 300
		msgs, keys := make([]amqp091.Publishing, n), make([]string, n)
		for i := range msgs {
			keys[i] = "same-key"
			if i%7 == 0 {
				continue // no properties: each hashes undefined
			}
			msgs[i].MessageId = "msg-" + strconv.Itoa(i)
			msgs[i].CorrelationId = strconv.Itoa(i * 31)
			msgs[i].Timestamp = time.Unix(1700000000+int64(i)*97, 0)
		}
		var out []string
		for _, prop := range []string{"message_id", "correlation_id", "timestamp"} {
			ex := "hash-p-" + prop
			qs := []string{ex + "-1", ex + "-2", ex + "-3"}
			c.queues(false, qs...)
			c.exchange(ex, "x-consistent-hash", false, amqp091.Table{"hash-property": prop})
			for i, q := range qs {
				c.bind(q, strconv.Itoa(3-i), ex)
			}
			c.publishAll(ex, msgs, keys)
			out = append(out, prop+": "+summarizeRouting(c.where(n, qs...), qs))
		}
		return strings.Join(out, "\n")
	})
}

// TestConsistentHashRestart binds in an order that is not the ring order
// RabbitMQ rebuilds at boot (sorted by binding key, then queue), and checks
// the routing before and after a restart.
func TestConsistentHashRestart(t *testing.T) {
	compareWithRabbitMQ(t, recordedRestart, func(t *testing.T, b hashBroker) string {
		c := newHashClient(t, b, b.url)
		qs := []string{"hash-r1", "hash-r2", "hash-r3"}
		c.queues(true, qs...)
		c.exchange("hash-rx", "x-consistent-hash", true, nil)
		c.bind("hash-r1", "3", "hash-rx")
		c.bind("hash-r2", "10", "hash-rx")
		c.bind("hash-r3", "2", "hash-rx")
		msgs, keys := routingKeys(500)
		c.publishAll("hash-rx", msgs, keys)
		before := summarizeRouting(c.where(len(msgs), qs...), qs)
		url := b.restart(t, "hash-rx")
		c2 := newHashClient(t, hashBroker{}, url)
		c2.publishAll("hash-rx", msgs, keys)
		after := summarizeRouting(c2.where(len(msgs), qs...), qs)
		return "before: " + before + "\nafter: " + after
	})
}

// TestModulusHash routes by phash2 of all routing keys (CC and BCC too) over
// the bindings in RabbitMQ's route-table order; a queue bound twice counts
// twice.
func TestModulusHash(t *testing.T) {
	compareWithRabbitMQ(t, recordedModulusHash, func(t *testing.T, b hashBroker) string {
		c := newHashClient(t, b, b.url)
		qs := []string{"hash-m1", "hash-m2", "hash-m3"}
		c.queues(false, qs...)
		c.exchange("hash-mx", "x-modulus-hash", false, nil)
		c.bind("hash-m1", "b", "hash-mx")
		c.bind("hash-m2", "a", "hash-mx")
		c.bind("hash-m3", "c", "hash-mx")
		c.bind("hash-m1", "a", "hash-mx")
		msgs, keys := routingKeys(400)
		for i := range msgs {
			switch i % 4 {
			case 1:
				msgs[i].Headers = amqp091.Table{"CC": []any{"cc-" + strconv.Itoa(i)}}
			case 2:
				msgs[i].Headers = amqp091.Table{"CC": []any{"x"}, "BCC": []any{"y", "z"}}
			}
		}
		c.publishAll("hash-mx", msgs, keys)
		return summarizeRouting(c.where(len(msgs), qs...), qs)
	})
}

// Recorded from RabbitMQ 3.10.8 as exchange_types_test.go describes.
const recordedHashErrors = `both hash-header and hash-property: 406 PRECONDITION_FAILED - hash-header and hash-property are mutually exclusive
hash-property app_id: 406 PRECONDITION_FAILED - Unsupported property: app_id
empty hash-header: ok
weight "abc": 406 PRECONDITION_FAILED - The binding key must be an integer: <<"abc">>
weight "": 406 PRECONDITION_FAILED - The binding key must be an integer: <<>>
weight "0": 406 PRECONDITION_FAILED - The binding key must be greater than 0
weight "-1": 406 PRECONDITION_FAILED - The binding key must be greater than 0
weight "-0": 406 PRECONDITION_FAILED - The binding key must be greater than 0
weight "+3": ok
weight "007": ok
weight " 1": 406 PRECONDITION_FAILED - The binding key must be an integer: <<" 1">>
weight "1.0": 406 PRECONDITION_FAILED - The binding key must be an integer: <<"1.0">>
weight "1_000": 406 PRECONDITION_FAILED - The binding key must be an integer: <<"1_000">>
weight "+": 406 PRECONDITION_FAILED - The binding key must be an integer: <<"+">>
weight "héllo": 406 PRECONDITION_FAILED - The binding key must be an integer: <<"héllo">>
weight "\x01\x02": 406 PRECONDITION_FAILED - The binding key must be an integer: <<1,2>>`

// TestConsistentHashInvalidArguments checks the reply to invalid exchange
// arguments and binding keys against RabbitMQ's. Weights too large for
// RabbitMQ are tested on Warren only (TestConsistentHashWeightLimit): a
// binding key of 99999999999999999999 takes the reference node's memory and
// kills it.
func TestConsistentHashInvalidArguments(t *testing.T) {
	compareWithRabbitMQ(t, recordedHashErrors, func(t *testing.T, b hashBroker) string {
		c := newHashClient(t, b, b.url)
		var out []string
		try := func(what string, f func(ch *amqp091.Channel) error) {
			ch, err := c.conn.Channel()
			must(t, err)
			res := "ok"
			if err := f(ch); err != nil {
				e, ok := err.(*amqp091.Error)
				if !ok {
					t.Fatalf("%s: %v", what, err)
				}
				res = strconv.Itoa(e.Code) + " " + e.Reason
			} else {
				ch.Close()
			}
			out = append(out, what+": "+res)
		}
		declare := func(name string, args amqp091.Table) func(*amqp091.Channel) error {
			return func(ch *amqp091.Channel) error {
				err := ch.ExchangeDeclare(name, "x-consistent-hash", false, false, false, false, args)
				if err == nil {
					c.cleanup(func(ch *amqp091.Channel) error { return ch.ExchangeDelete(name, false, false) })
				}
				return err
			}
		}
		try("both hash-header and hash-property", declare("hash-e1", amqp091.Table{"hash-header": "h", "hash-property": "message_id"}))
		try("hash-property app_id", declare("hash-e2", amqp091.Table{"hash-property": "app_id"}))
		try("empty hash-header", declare("hash-e3", amqp091.Table{"hash-header": ""}))
		c.queues(false, "hash-eq")
		for _, key := range []string{"abc", "", "0", "-1", "-0", "+3", "007", " 1", "1.0", "1_000", "+", "héllo", "\x01\x02"} {
			try("weight "+strconv.Quote(key), func(ch *amqp091.Channel) error {
				return ch.QueueBind("hash-eq", key, "hash-e3", false, nil)
			})
		}
		return strings.Join(out, "\n")
	})
}
