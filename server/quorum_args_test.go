package server

import (
	"errors"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// quorumTable is the arguments of a quorum queue plus extra.
func quorumTable(extra amqp091.Table) amqp091.Table {
	t := amqp091.Table{"x-queue-type": "quorum"}
	for k, v := range extra {
		t[k] = v
	}
	return t
}

// TestQuorumDeclareRefusals declares quorum queues the way RabbitMQ 3.10.8
// refuses them and checks the reply code and text (rabbit_amqqueue's
// check_declare_arguments, rabbit_quorum_queue:declare, read from the
// v3.10.8 sources, as no reference node could run here).
func TestQuorumDeclareRefusals(t *testing.T) {
	ts := startServer(t)
	conn := ts.dial(t)
	type decl struct {
		durable, autoDelete, exclusive bool
		args                           amqp091.Table
	}
	durable := func(extra amqp091.Table) decl { return decl{durable: true, args: quorumTable(extra)} }
	cases := []struct {
		name string
		d    decl
		code int
		text string
	}{
		{"non-durable", decl{args: quorumTable(nil)}, 406, "invalid property 'non-durable' for queue 'q' in vhost '/'"},
		{"auto-delete", decl{durable: true, autoDelete: true, args: quorumTable(nil)}, 406, "invalid property 'auto-delete' for queue 'q' in vhost '/'"},
		{"exclusive", decl{durable: true, exclusive: true, args: quorumTable(nil)}, 406, "invalid property 'exclusive-owner' for queue 'q' in vhost '/'"},
		// auto-delete is checked before exclusive and non-durable.
		{"all-properties", decl{autoDelete: true, exclusive: true, args: quorumTable(nil)}, 406, "invalid property 'auto-delete' for queue 'q' in vhost '/'"},
		// Arguments are checked before the properties.
		{"args-before-properties", decl{args: quorumTable(amqp091.Table{"x-max-priority": int32(5)})}, 406, "invalid arg 'x-max-priority' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue"},
		{"max-priority", durable(amqp091.Table{"x-max-priority": int32(5)}), 406, "invalid arg 'x-max-priority' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue"},
		{"queue-mode", durable(amqp091.Table{"x-queue-mode": "lazy"}), 406, "invalid arg 'x-queue-mode' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue"},
		{"queue-version", durable(amqp091.Table{"x-queue-version": int32(2)}), 406, "invalid arg 'x-queue-version' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue"},
		{"master-locator", durable(amqp091.Table{"x-queue-master-locator": "random"}), 406, "invalid arg 'x-queue-master-locator' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue"},
		{"max-age", durable(amqp091.Table{"x-max-age": "1D"}), 406, "invalid arg 'x-max-age' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue"},
		{"initial-cluster-size", durable(amqp091.Table{"x-initial-cluster-size": int32(3)}), 406, "invalid arg 'x-initial-cluster-size' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue"},
		{"segment-size", durable(amqp091.Table{"x-stream-max-segment-size-bytes": int32(3)}), 406, "invalid arg 'x-stream-max-segment-size-bytes' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue"},
		{"group-size-zero", durable(amqp091.Table{"x-quorum-initial-group-size": int32(0)}), 406, "invalid arg 'x-quorum-initial-group-size' for queue 'q' in vhost '/': {value_zero,0}"},
		{"group-size-negative", durable(amqp091.Table{"x-quorum-initial-group-size": int32(-1)}), 406, "invalid arg 'x-quorum-initial-group-size' for queue 'q' in vhost '/': {value_negative,-1}"},
		{"group-size-string", durable(amqp091.Table{"x-quorum-initial-group-size": "3"}), 406, "invalid arg 'x-quorum-initial-group-size' for queue 'q' in vhost '/': \"expected integer, got longstr\""},
		{"leader-locator", durable(amqp091.Table{"x-queue-leader-locator": "nearest"}), 406, "invalid arg 'x-queue-leader-locator' for queue 'q' in vhost '/': invalid_queue_locator_arg"},
		{"dlx-strategy", durable(amqp091.Table{"x-dead-letter-strategy": "sometimes"}), 406, "invalid arg 'x-dead-letter-strategy' for queue 'q' in vhost '/': invalid_dlx_strategy"},
		{"in-memory-length", durable(amqp091.Table{"x-max-in-memory-length": int32(-2)}), 406, "invalid arg 'x-max-in-memory-length' for queue 'q' in vhost '/': {value_negative,-2}"},
		// A value error of an argument quorum takes comes before the
		// refusal of another type's argument.
		{"value-before-key", durable(amqp091.Table{"x-max-length": int32(-1), "x-queue-mode": "lazy"}), 406, "invalid arg 'x-max-length' for queue 'q' in vhost '/': {value_negative,-1}"},
		{"server-named", decl{durable: true, args: quorumTable(nil)}, 406, "Cannot declare a server-named queue for type rabbit_quorum_queue"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch, err := conn.Channel()
			must(t, err)
			name := "q"
			if c.name == "server-named" {
				name = ""
			}
			_, err = ch.QueueDeclare(name, c.d.durable, c.d.autoDelete, c.d.exclusive, false, c.d.args)
			var ae *amqp091.Error
			if !errors.As(err, &ae) {
				t.Fatalf("declare: want %d, got %v", c.code, err)
			}
			if ae.Code != c.code || ae.Reason != amqp091ReasonPrefix(c.code)+c.text {
				t.Fatalf("declare:\n got %d %q\nwant %d %q", ae.Code, ae.Reason, c.code, amqp091ReasonPrefix(c.code)+c.text)
			}
		})
	}
	// What 3.10.8 accepts: x-overflow reject-publish-dlx (it logs and uses
	// drop-head), the in-memory limits, at-most-once, a group size larger
	// than the cluster.
	ch, err := conn.Channel()
	must(t, err)
	_, err = ch.QueueDeclare("ok", true, false, false, false, quorumTable(amqp091.Table{
		"x-overflow": "reject-publish-dlx", "x-max-in-memory-length": int32(10), "x-max-in-memory-bytes": int32(1000),
		"x-dead-letter-strategy": "at-most-once", "x-quorum-initial-group-size": int32(7),
		"x-queue-leader-locator": "balanced", "x-delivery-limit": int32(3), "x-message-ttl": int32(60000),
	}))
	must(t, err)
}

func amqp091ReasonPrefix(code int) string {
	switch code {
	case 406:
		return "PRECONDITION_FAILED - "
	case 540:
		return "NOT_IMPLEMENTED - "
	}
	return ""
}

// TestQuorumConsumeAndDeleteRefusals: a consume on a channel with a
// global prefetch limit is refused with 540 (a connection error), another
// type's consume argument with 406, and queue.delete with if-unused or
// if-empty with 540, in RabbitMQ 3.10.8's words.
func TestQuorumConsumeAndDeleteRefusals(t *testing.T) {
	ts := startServer(t)
	conn := ts.dial(t)
	ch, err := conn.Channel()
	must(t, err)
	declareQuorum(t, ch, "qq", nil)
	_, err = ch.Consume("qq", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
	want := "PRECONDITION_FAILED - invalid arg 'x-stream-offset' for queue 'qq' in vhost '/' of queue type rabbit_quorum_queue"
	if ae := (*amqp091.Error)(nil); !errors.As(err, &ae) || ae.Code != 406 || ae.Reason != want {
		t.Fatalf("consume with x-stream-offset: %v, want %s", err, want)
	}
	ch, err = conn.Channel()
	must(t, err)
	// A per-consumer prefetch is fine; a global one is not.
	must(t, ch.Qos(10, 0, false))
	_, err = ch.Consume("qq", "c1", false, false, false, false, nil)
	must(t, err)
	must(t, ch.Qos(10, 0, true))
	_, err = ch.Consume("qq", "c2", false, false, false, false, nil)
	want = "NOT_IMPLEMENTED - queue 'qq' in vhost '/' does not support global qos"
	if ae := (*amqp091.Error)(nil); !errors.As(err, &ae) || ae.Code != 540 || ae.Reason != want {
		t.Fatalf("consume with global qos: %v, want %s", err, want)
	}

	for flag, del := range map[string]func(*amqp091.Channel) error{
		"if-unused": func(c *amqp091.Channel) error { _, err := c.QueueDelete("qq", true, false, false); return err },
		"if-empty":  func(c *amqp091.Channel) error { _, err := c.QueueDelete("qq", false, true, false); return err },
	} {
		_, ch := ts.channel(t)
		err := del(ch)
		want := "NOT_IMPLEMENTED - cannot delete queue 'qq' in vhost '/'. queue.delete operations with " + flag + " flag set are not supported by quorum queues"
		if ae := (*amqp091.Error)(nil); !errors.As(err, &ae) || ae.Code != 540 || ae.Reason != want {
			t.Fatalf("delete %s: %v, want %s", flag, err, want)
		}
	}
	_, ch = ts.channel(t)
	if _, err := ch.QueueDelete("qq", false, false, false); err != nil {
		t.Fatalf("plain delete: %v", err)
	}
}

// declareQuorum declares a durable quorum queue with extra arguments.
func declareQuorum(t testing.TB, ch *amqp091.Channel, name string, extra amqp091.Table) {
	t.Helper()
	if _, err := ch.QueueDeclare(name, true, false, false, false, quorumTable(extra)); err != nil {
		t.Fatalf("declare quorum queue %q: %v", name, err)
	}
}
