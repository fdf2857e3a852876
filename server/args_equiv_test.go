package server

import (
	"errors"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// equivalenceCase declares an object with first, redeclares it with second
// and expects declare-ok (want "") or a 406 with exactly want as reply text.
type equivalenceCase struct {
	name          string
	first, second amqp091.Table
	want          string
}

// expectRedeclare checks err against a case's expected outcome.
func expectRedeclare(t *testing.T, c equivalenceCase, err error) {
	t.Helper()
	if c.want == "" {
		if err != nil {
			t.Fatalf("redeclare: %v, want declare-ok", err)
		}
		return
	}
	var ae *amqp091.Error
	if !errors.As(err, &ae) || ae.Code != 406 || ae.Reason != c.want {
		t.Fatalf("redeclare: %v\nwant 406 %q", err, c.want)
	}
}

// redeclareQueueCases runs each case on a fresh queue called name: declared
// with first, then redeclared with second.
func redeclareQueueCases(t *testing.T, name string, durable bool, cases []equivalenceCase) {
	t.Helper()
	ts := startServer(t)
	conn := ts.dial(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch, err := conn.Channel()
			must(t, err)
			_, err = ch.QueueDelete(name, false, false, false)
			must(t, err)
			_, err = ch.QueueDeclare(name, durable, false, false, false, c.first)
			must(t, err)
			_, err = ch.QueueDeclare(name, durable, false, false, false, c.second)
			expectRedeclare(t, c, err)
			if err == nil {
				must(t, ch.Close())
			}
		})
	}
}

// The reply texts below are RabbitMQ 3.10.8's, read off a running node for the
// same declarations.
const ineqPrefix = "PRECONDITION_FAILED - inequivalent arg "

func TestQueueRedeclareComparesArgumentsAsRabbitMQ(t *testing.T) {
	const q = "for queue 'q' in vhost '/': "
	cases := []equivalenceCase{
		{"int32 vs int16", amqp091.Table{"x-message-ttl": int32(1000)}, amqp091.Table{"x-message-ttl": int16(1000)}, ""},
		{"int32 vs int64", amqp091.Table{"x-message-ttl": int32(1000)}, amqp091.Table{"x-message-ttl": int64(1000)}, ""},
		{"int32 vs uint32", amqp091.Table{"x-message-ttl": int32(1000)}, amqp091.Table{"x-message-ttl": uint32(1000)}, ""},
		{"int32 vs uint16", amqp091.Table{"x-message-ttl": int32(1000)}, amqp091.Table{"x-message-ttl": uint16(1000)}, ""},
		{"uint8 vs int8", amqp091.Table{"x-max-priority": uint8(5)}, amqp091.Table{"x-max-priority": int8(5)}, ""},
		{"timestamp equals its seconds", amqp091.Table{"x-max-length": int64(5)}, amqp091.Table{"x-max-length": time.Unix(5, 0)}, ""},
		{"longstr vs binary", amqp091.Table{"x-dead-letter-exchange": "abc"}, amqp091.Table{"x-dead-letter-exchange": []byte("abc")}, ""},
		{"classic vs no type", amqp091.Table{"x-queue-type": "classic"}, nil, ""},
		{"no type vs classic", nil, amqp091.Table{"x-queue-type": "classic"}, ""},
		{"argument not compared", amqp091.Table{"x-foo": int32(1)}, amqp091.Table{"x-foo": "bar"}, ""},
		{"extension not compared", amqp091.Table{"x-consumer-timeout": int32(10000)}, amqp091.Table{"x-consumer-timeout": int32(20000)}, ""},

		{"other value", amqp091.Table{"x-message-ttl": int16(300)}, amqp091.Table{"x-message-ttl": int64(999)},
			ineqPrefix + "'x-message-ttl' " + q + "received '999' but current is '300'"},
		{"received none", amqp091.Table{"x-message-ttl": int64(300)}, nil,
			ineqPrefix + "'x-message-ttl' " + q + "received none but current is the value '300' of type 'long'"},
		{"current none", nil, amqp091.Table{"x-message-ttl": int32(300)},
			ineqPrefix + "'x-message-ttl' " + q + "received the value '300' of type 'signedint' but current is none"},
		{"unsignedshort", amqp091.Table{"x-message-ttl": uint16(300)}, nil,
			ineqPrefix + "'x-message-ttl' " + q + "received none but current is the value '300' of type 'unsignedshort'"},
		{"string vs integer", amqp091.Table{"x-max-length": int32(5)}, amqp091.Table{"x-max-length": "5"},
			ineqPrefix + "'x-max-length' " + q + "received '5' but current is '5'"},
		{"double", amqp091.Table{"x-max-length": int32(5)}, amqp091.Table{"x-max-length": float64(1000)},
			ineqPrefix + "'x-max-length' " + q + "received '1.0e3' but current is '5'"},
		{"float", amqp091.Table{"x-max-length": int32(5)}, amqp091.Table{"x-max-length": float32(5)},
			ineqPrefix + "'x-max-length' " + q + "received '5.0' but current is '5'"},
		{"bool vs integer", amqp091.Table{"x-max-length": int64(5)}, amqp091.Table{"x-max-length": true},
			ineqPrefix + "'x-max-length' " + q + "received 'true' but current is '5'"},
		{"table", amqp091.Table{"x-max-length": int64(5)}, amqp091.Table{"x-max-length": amqp091.Table{"a": int32(1)}},
			ineqPrefix + "'x-max-length' " + q + "received '[{<<\"a\">>,signedint,1}]' but current is '5'"},
		{"array", amqp091.Table{"x-max-length": int64(5)}, amqp091.Table{"x-max-length": []any{int32(1), "b"}},
			ineqPrefix + "'x-max-length' " + q + "received '[{signedint,1},{longstr,<<\"b\">>}]' but current is '5'"},
		// Binaries inside a table print as ~p prints them: bytes read as
		// Latin-1 characters, escaped, else a list of byte values.
		{"nested binaries", amqp091.Table{"x-max-length": int64(5)},
			amqp091.Table{"x-max-length": amqp091.Table{"a": "a\nb", "b": "é", "c": []byte{0xe9}, "d": "€", "e": []byte{1, 2}}},
			ineqPrefix + "'x-max-length' " + q + "received '[{<<\"a\">>,longstr,<<\"a\\nb\">>},{<<\"b\">>,longstr,<<\"é\">>}," +
				"{<<\"c\">>,binary,<<\"\xe9\">>},{<<\"d\">>,longstr,<<226,130,172>>},{<<\"e\">>,binary,<<1,2>>}]' but current is '5'"},
		{"nested decimal", amqp091.Table{"x-max-length": int64(5)}, amqp091.Table{"x-max-length": amqp091.Table{"a": amqp091.Decimal{Scale: 2, Value: -1}}},
			ineqPrefix + "'x-max-length' " + q + "received '[{<<\"a\">>,decimal,{2,4294967295}}]' but current is '5'"},
		{"timestamp before 1970", amqp091.Table{"x-max-length": int64(5)}, amqp091.Table{"x-max-length": time.Unix(-1, 0)},
			ineqPrefix + "'x-max-length' " + q + "received '18446744073709551615' but current is '5'"},
		{"strings", amqp091.Table{"x-dead-letter-exchange": "abc"}, amqp091.Table{"x-dead-letter-exchange": "abd"},
			ineqPrefix + "'x-dead-letter-exchange' " + q + "received 'abd' but current is 'abc'"},
		{"string received none", amqp091.Table{"x-dead-letter-exchange": "abc"}, nil,
			ineqPrefix + "'x-dead-letter-exchange' " + q + "received none but current is the value 'abc' of type 'longstr'"},
		{"booleans", amqp091.Table{"x-single-active-consumer": true}, amqp091.Table{"x-single-active-consumer": false},
			ineqPrefix + "'x-single-active-consumer' " + q + "received 'false' but current is 'true'"},
		{"boolean current none", nil, amqp091.Table{"x-single-active-consumer": false},
			ineqPrefix + "'x-single-active-consumer' " + q + "received the value 'false' of type 'bool' but current is none"},
		{"void received", nil, amqp091.Table{"x-queue-master-locator": nil},
			ineqPrefix + "'x-queue-master-locator' " + q + "received the value 'undefined' of type 'void' but current is none"},
		{"void current", amqp091.Table{"x-queue-master-locator": nil}, amqp091.Table{"x-queue-master-locator": "min-masters"},
			ineqPrefix + "'x-queue-master-locator' " + q + "received 'min-masters' but current is none"},
		// Several differ: RabbitMQ names the first in its own order, not the
		// table's, nor the alphabet's.
		{"several", amqp091.Table{"x-message-ttl": int32(300), "x-max-length": int32(5), "x-expires": int32(10000), "x-overflow": "drop-head"},
			amqp091.Table{"x-message-ttl": int32(301), "x-max-length": int32(6), "x-expires": int32(10001), "x-overflow": "reject-publish"},
			ineqPrefix + "'x-expires' " + q + "received '10001' but current is '10000'"},
		{"ttl before max-length", amqp091.Table{"x-message-ttl": int32(300), "x-max-length": int32(5), "x-max-priority": int32(3)},
			amqp091.Table{"x-message-ttl": int32(301), "x-max-length": int32(6), "x-max-priority": int32(4)},
			ineqPrefix + "'x-message-ttl' " + q + "received '301' but current is '300'"},
		// Only the argument that really differs is named.
		{"the one that differs", amqp091.Table{"x-message-ttl": int16(1000), "x-max-length": int32(5)},
			amqp091.Table{"x-message-ttl": int64(1000), "x-max-length": int32(6)},
			ineqPrefix + "'x-max-length' " + q + "received '6' but current is '5'"},
	}
	redeclareQueueCases(t, "q", false, cases)
}

func TestStreamRedeclareComparesArgumentsAsRabbitMQ(t *testing.T) {
	const q = "for queue 's' in vhost '/': "
	stream := streamDeclareArgs
	cases := []equivalenceCase{
		{"max-length-bytes widths", stream("x-max-length-bytes", int64(100000)), stream("x-max-length-bytes", int32(100000)), ""},
		{"segment size widths", stream("x-stream-max-segment-size-bytes", int64(100000)), stream("x-stream-max-segment-size-bytes", uint32(100000)), ""},
		// RabbitMQ does not compare what a stream does not support.
		{"message-ttl not compared", stream(), stream("x-message-ttl", int32(5)), ""},
		{"no type", stream(), nil, ineqPrefix + "'x-queue-type' " + q + "received none but current is the value 'stream' of type 'longstr'"},
		{"classic", stream(), amqp091.Table{"x-queue-type": "classic"}, ineqPrefix + "'x-queue-type' " + q + "received 'classic' but current is 'stream'"},
		{"max-age", stream("x-max-age", "7D"), stream("x-max-age", "1D"), ineqPrefix + "'x-max-age' " + q + "received '1D' but current is '7D'"},
		{"several", stream("x-max-length-bytes", int64(1000), "x-max-age", "7D", "x-stream-max-segment-size-bytes", int64(100000)),
			stream("x-max-length-bytes", int64(1001), "x-max-age", "8D", "x-stream-max-segment-size-bytes", int64(100001)),
			ineqPrefix + "'x-max-length-bytes' " + q + "received '1001' but current is '1000'"},
	}
	redeclareQueueCases(t, "s", true, cases)
}

// RabbitMQ 3.10 compares only alternate-exchange of an exchange's arguments.
func TestExchangeRedeclareComparesOnlyAlternateExchange(t *testing.T) {
	const x = "for exchange 'x' in vhost '/': "
	cases := []equivalenceCase{
		{"other value", amqp091.Table{"x-foo": int32(1)}, amqp091.Table{"x-foo": int32(2)}, ""},
		{"dropped", amqp091.Table{"x-foo": int32(1)}, nil, ""},
		{"dedup dropped", amqp091.Table{"x-message-deduplication": true}, nil, ""},
		{"ae as binary", amqp091.Table{"alternate-exchange": "a"}, amqp091.Table{"alternate-exchange": []byte("a")}, ""},
		{"ae other", amqp091.Table{"alternate-exchange": "a"}, amqp091.Table{"alternate-exchange": "b"},
			ineqPrefix + "'alternate-exchange' " + x + "received 'b' but current is 'a'"},
		{"ae dropped", amqp091.Table{"alternate-exchange": "a"}, nil,
			ineqPrefix + "'alternate-exchange' " + x + "received none but current is the value 'a' of type 'longstr'"},
		{"ae added", nil, amqp091.Table{"alternate-exchange": "a"},
			ineqPrefix + "'alternate-exchange' " + x + "received the value 'a' of type 'longstr' but current is none"},
	}
	ts := startServer(t)
	conn := ts.dial(t)
	for _, kind := range []string{"direct", "topic"} {
		for _, c := range cases {
			t.Run(kind+"/"+c.name, func(t *testing.T) {
				ch, err := conn.Channel()
				must(t, err)
				must(t, ch.ExchangeDelete("x", false, false))
				must(t, ch.ExchangeDeclare("x", kind, true, false, false, false, c.first))
				expectRedeclare(t, c, ch.ExchangeDeclare("x", kind, true, false, false, false, c.second))
			})
		}
	}
}
