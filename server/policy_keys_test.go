package server

import (
	"errors"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestPolicyKeysOfNewerReleases: every key of RabbitMQ 3.10 to 4.x exports
// is accepted with a valid value, stored and shown as the queue's effective
// policy; an invalid value is refused with RabbitMQ's text (as the 3.10.8
// reference node answered PUT /api/policies, HTML-escaped as it sends it).
func TestPolicyKeysOfNewerReleases(t *testing.T) {
	ts := startServer(t)
	if _, err := ts.DeclareQueue("/", QueueSpec{Name: "k.q", Durable: true}); err != nil {
		t.Fatal(err)
	}
	valid := map[string]any{
		"queue-version": int64(2), "queue-master-locator": "client-local", "queue-leader-locator": "balanced",
		"dead-letter-strategy": "at-least-once", "max-in-memory-length": int64(10), "max-in-memory-bytes": int64(0),
		"initial-cluster-size": int64(3), "target-group-size": int64(3), "stream-filter-size-bytes": int64(16),
		"federation-upstream": "up", "federation-upstream-set": "all", "federation-upstream-pattern": "^up",
		"ha-mode": "exactly", "ha-params": int64(2), "ha-sync-mode": "automatic",
		"delivery-limit": int64(5), "max-age": "1D", "stream-max-segment-size-bytes": int64(1 << 20),
	}
	for k, v := range valid {
		def := map[string]any{k: v}
		switch k {
		case "ha-params":
			def["ha-mode"] = "exactly"
		case "ha-mode":
			def["ha-params"] = int64(2) // exactly takes a count (rabbit_mirror_queue_misc)
		}
		p := Policy{Vhost: "/", Name: "k", Pattern: "^k\\.", ApplyTo: ApplyToQueues, Definition: def}
		if _, err := ts.PutPolicy(p, false); err != nil {
			t.Errorf("%s: %v", k, err)
			continue
		}
		if st := ts.Vhost("/").LookupQueue("k.q").Status(); st.Policy != "k" || st.EffectivePolicy[k] != v {
			t.Errorf("%s: queue's policy %q, effective %v", k, st.Policy, st.EffectivePolicy)
		}
	}
	for want, def := range map[string]map[string]any{
		"3 is not a valid queue-version value":                             {"queue-version": int64(3)},
		"-1 is not a valid maximum memory in bytes":                        {"max-in-memory-length": int64(-1)},
		`&lt;&lt;"x"&gt;&gt; is not a valid dead letter strategy`:          {"dead-letter-strategy": "x"},
		`&lt;&lt;"x"&gt;&gt; is not a valid queue leader locator value`:    {"queue-leader-locator": "x"},
		`&lt;&lt;"x"&gt;&gt; invalid queue-master-locator value`:           {"queue-master-locator": "x"},
		"-1 is not a valid cluster size":                                   {"initial-cluster-size": int64(-1)},
		"0 is not a valid qq target count value":                           {"target-group-size": int64(0)},
		"300 is not a valid filter size. Valid range is 16-255":            {"stream-filter-size-bytes": int64(300)},
		"7 is not a valid federation upstream name":                        {"federation-upstream": int64(7)},
		"could not compile pattern ( to a regular expression":              {"federation-upstream-pattern": "("},
		"cannot specify federation-upstream, federation-upstream-set or f": {"federation-upstream": "a", "federation-upstream-set": "all"},
		`ha-mode="exactly" takes an integer, none given`:                   {"ha-mode": "exactly"},
		`ha-mode="exactly" takes an integer, 0 given`:                      {"ha-mode": "exactly", "ha-params": int64(0)},
		`ha-mode="all" does not take parameters`:                           {"ha-mode": "all", "ha-params": int64(2)},
		`ha-mode="nodes" list must be non-empty`:                           {"ha-mode": "nodes", "ha-params": []any{}},
		`ha-mode="nodes" takes a list of strings, [1] was not a string`:    {"ha-mode": "nodes", "ha-params": []any{int64(1)}},
		"0 is not a valid ha-min-isr value":                                {"ha-min-isr": int64(0)},
	} {
		_, err := ts.PutPolicy(Policy{Vhost: "/", Name: "bad", Pattern: ".*", ApplyTo: ApplyToQueues, Definition: def}, false)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "Validation failed\n\n"+want) {
			t.Errorf("%v: %v, want %q", def, err, want)
		}
	}
	// The memory and group-size keys are operator policy keys too, as in RabbitMQ.
	op := Policy{Vhost: "/", Name: "op", Pattern: ".*", ApplyTo: ApplyToQueues,
		Definition: map[string]any{"max-in-memory-length": int64(5), "target-group-size": int64(3)}}
	if _, err := ts.PutPolicy(op, true); err != nil {
		t.Errorf("operator policy: %v", err)
	}
}

// TestPolicyApplyToQueueType: apply-to classic_queues, quorum_queues and
// streams (RabbitMQ 4.x) select queues by type whatever the priorities, and
// "queues" and "all" take every type; the classic and quorum limits apply.
func TestPolicyApplyToQueueType(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	declareDurable(t, ch, "t.classic", nil)
	declareDurable(t, ch, "t.quorum", amqp091.Table{"x-queue-type": "quorum"})
	declareDurable(t, ch, "t.stream", amqp091.Table{"x-queue-type": "stream"})
	declareDurable(t, ch, "t.other", nil)
	if err := ch.ExchangeDeclare("t.x", "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []Policy{
		{Name: "any-queue", Pattern: "^t\\.", ApplyTo: ApplyToQueues, Priority: 0, Definition: map[string]any{"message-ttl": int64(600000)}},
		{Name: "classic", Pattern: "^t\\.classic$", ApplyTo: ApplyToClassicQueues, Priority: 1, Definition: map[string]any{"max-length": int64(1)}},
		{Name: "quorum", Pattern: "^t\\.", ApplyTo: ApplyToQuorumQueues, Priority: 2, Definition: map[string]any{"max-length": int64(2)}},
		{Name: "streams", Pattern: "^t\\.", ApplyTo: ApplyToStreams, Priority: 3, Definition: map[string]any{"max-age": "1D"}},
		{Name: "everything", Pattern: "^t\\.x$", ApplyTo: ApplyToAll, Priority: 4, Definition: map[string]any{"alternate-exchange": "ae"}},
	} {
		p.Vhost = "/"
		if _, err := ts.PutPolicy(p, false); err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
	}
	vh := ts.Vhost("/")
	for q, want := range map[string]string{"t.classic": "classic", "t.quorum": "quorum", "t.stream": "streams", "t.other": "any-queue"} {
		if got := vh.LookupQueue(q).Status().Policy; got != want {
			t.Errorf("%s: policy %q, want %q", q, got, want)
		}
	}
	if got := ts.Vhost("/").exchange("t.x").Info().Policy; got != "everything" {
		t.Errorf("exchange policy %q, want everything", got)
	}
	for i := 0; i < 3; i++ {
		publish(t, ch, "", "t.classic", "m")
		publish(t, ch, "", "t.quorum", "m")
	}
	for q, want := range map[string]int{"t.classic": 1, "t.quorum": 2} {
		waitFor(t, 5e9, q+" trimmed by its type's policy", func() bool {
			got, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
			return err == nil && got.Messages == want
		})
	}
	_, err := ts.PutPolicy(Policy{Vhost: "/", Name: "bad", Pattern: ".*", ApplyTo: "queue", Definition: map[string]any{"max-length": int64(1)}}, false)
	if want := "apply-to 'queue' unrecognised; should be one of: 'queues', 'classic_queues',  'quorum_queues', 'streams', 'exchanges', or 'all'"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("apply-to queue: %v", err)
	}
}

// TestVhostDefaultQueueType: a declare without x-queue-type in a vhost
// whose default queue type is quorum makes a quorum queue when it can be
// one (durable, not exclusive, not auto-delete) and a classic queue
// otherwise; redeclaring it the same way is equivalent, while a classic
// queue made before the default was set is now inequivalent, as in
// RabbitMQ 3.11+ (rabbit_amqqueue:augment_declare_args). A definitions
// import takes the default too; an unknown type is refused.
func TestVhostDefaultQueueType(t *testing.T) {
	ts := startServer(t)
	ts.addVhost(t, "dqt")
	ts.grant(t, "guest", "dqt", Permission{".*", ".*", ".*"})
	conn, err := amqp091.Dial(ts.url + "dqt")
	must(t, err)
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	must(t, err)
	declareDurable(t, ch, "before", nil)
	if _, err := ts.PutVhost("dqt", VhostMeta{DefaultQueueType: "quorum"}); err != nil {
		t.Fatal(err)
	}
	declareDurable(t, ch, "durable", nil)
	declareDurable(t, ch, "durable", nil) // the redeclare is augmented the same way
	if _, err := ch.QueueDeclare("excl", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ts.ImportDefinitions(Definitions{Queues: []QueueDefinition{{Vhost: "dqt", QueueSpec: QueueSpec{Name: "imported", Durable: true}}}}, ""); err != nil {
		t.Fatal(err)
	}
	vh := ts.Vhost("dqt")
	for q, want := range map[string]string{"before": "classic", "durable": "quorum", "excl": "classic", "imported": "quorum"} {
		if got := vh.LookupQueue(q).Status().Type; got != want {
			t.Errorf("%s: type %q, want %q", q, got, want)
		}
	}
	_, err = ch.QueueDeclare("before", true, false, false, false, nil)
	expectCode(t, err, 406)
	if want := "inequivalent arg 'x-queue-type' for queue 'before' in vhost 'dqt': received the value 'quorum' of type 'longstr' but current is none"; !strings.Contains(err.Error(), want) {
		t.Errorf("redeclare of the older classic queue: %v, want %q", err, want)
	}
	if _, err := ts.PutVhost("dqt", VhostMeta{DefaultQueueType: "fifo"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("default queue type fifo: %v", err)
	}
}

func declareDurable(t *testing.T, ch *amqp091.Channel, name string, args amqp091.Table) {
	t.Helper()
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		t.Fatalf("declare %q: %v", name, err)
	}
}
