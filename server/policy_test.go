package server

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/warrenmq/warren/amqp"
)

func TestPolicyEffectiveArgs(t *testing.T) {
	cases := []struct {
		name     string
		declared amqp.Table
		def      map[string]any
		check    func(queueArgs) bool
	}{
		{"policy fills in", nil, map[string]any{"max-length": int64(5), "message-ttl": int64(100)},
			func(q queueArgs) bool { return q.maxLength == 5 && q.messageTTL == 100 }},
		{"smaller declared wins", amqp.Table{"x-max-length": int32(2)}, map[string]any{"max-length": int64(5)},
			func(q queueArgs) bool { return q.maxLength == 2 }},
		{"smaller policy wins", amqp.Table{"x-max-length": int32(9)}, map[string]any{"max-length": int64(5)},
			func(q queueArgs) bool { return q.maxLength == 5 }},
		{"declared dead-letter exchange wins", amqp.Table{"x-dead-letter-exchange": "mine"}, map[string]any{"dead-letter-exchange": "theirs"},
			func(q queueArgs) bool { return q.dlx == "mine" }},
		{"declared overflow wins", amqp.Table{"x-overflow": "reject-publish"}, map[string]any{"overflow": "drop-head"},
			func(q queueArgs) bool { return q.overflow == overflowRejectPublish }},
		{"routing key without an exchange is dropped", nil, map[string]any{"dead-letter-routing-key": "k"},
			func(q queueArgs) bool { return !q.hasDLRK && !q.hasDLX }},
		{"routing key with a declared exchange", amqp.Table{"x-dead-letter-exchange": "d"}, map[string]any{"dead-letter-routing-key": "k"},
			func(q queueArgs) bool { return q.hasDLRK && q.dlrk == "k" }},
		{"stored-only keys ignored", nil, map[string]any{"ha-mode": "all", "queue-mode": "lazy", "alternate-exchange": "x"},
			func(q queueArgs) bool { return q.maxLength == -1 && q.messageTTL == -1 }},
		{"delivery limit and consumer timeout", nil, map[string]any{"delivery-limit": int64(3), "consumer-timeout": int64(1000)},
			func(q queueArgs) bool { return q.deliveryLimit == 3 && q.consumerTimeout.Milliseconds() == 1000 }},
	}
	for _, c := range cases {
		fallback, _ := parseQueueArgs("q", "/", c.declared)
		got := effectiveQueueArgs("q", "/", c.declared, c.def, fallback)
		if !c.check(got) {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
}

func TestPolicyMatchAndMerge(t *testing.T) {
	mk := func(name string, prio int64, pattern, applyTo string, def map[string]any) *compiledPolicy {
		p := Policy{Name: name, Priority: prio, Pattern: pattern, ApplyTo: applyTo, Definition: def}
		if err := ValidatePolicy(p, name == "op"); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return &compiledPolicy{Policy: p, re: regexp.MustCompile(pattern)}
	}
	ps := &policySet{
		user: []*compiledPolicy{
			mk("low", 1, ".*", ApplyToAll, map[string]any{"max-length": int64(10), "expires": int64(5000)}),
			mk("high", 9, "^orders", ApplyToQueues, map[string]any{"max-length": int64(100), "message-ttl": int64(60000)}),
			mk("ex", 20, "^orders", ApplyToExchanges, map[string]any{"alternate-exchange": "ae"}),
		},
		operator: []*compiledPolicy{mk("op", 0, ".*", ApplyToQueues, map[string]any{"max-length": int64(50), "delivery-limit": int64(4)})},
	}
	sortPolicies(ps.user)
	u, o, def := ps.match(targetClassic, "orders.eu")
	if u.Name != "high" || o.Name != "op" {
		t.Fatalf("matched %s and %s", u.Name, o.Name)
	}
	if def["max-length"] != int64(50) || def["message-ttl"] != int64(60000) || def["delivery-limit"] != int64(4) {
		t.Errorf("merged definition %v", def)
	}
	if u, _, def := ps.match(targetExchange, "orders.x"); u == nil || u.Name != "ex" || def["alternate-exchange"] != "ae" {
		t.Errorf("exchange match %v %v", u, def)
	}
	if u, _, _ := ps.match(targetClassic, "billing"); u.Name != "low" {
		t.Errorf("fallback policy %s", u.Name)
	}
}

func TestPolicyValidationMessages(t *testing.T) {
	err := ValidatePolicy(Policy{Name: "p", Pattern: ".*", ApplyTo: ApplyToAll, Definition: map[string]any{"expires": "x"}}, false)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `Validation failed`) ||
		!strings.Contains(err.Error(), `&lt;&lt;"x"&gt;&gt; is not a valid queue expiry`) {
		t.Errorf("expires error: %v", err)
	}
	err = ValidatePolicy(Policy{Name: "p", Pattern: ".*", ApplyTo: ApplyToAll, Definition: map[string]any{"b": 1, "a": 2}}, false)
	if err == nil || !strings.Contains(err.Error(), `[&lt;&lt;"a"&gt;&gt;,&lt;&lt;"b"&gt;&gt;] are not recognised policy settings`) {
		t.Errorf("unknown keys error: %v", err)
	}
	if err := ValidatePolicy(Policy{Name: "p", Pattern: ".*", ApplyTo: ApplyToQueues, Definition: map[string]any{"overflow": "reject-publish"}}, true); err == nil {
		t.Error("operator policy accepted overflow")
	}
}

// Stream retention keys validate as RabbitMQ's do and are not operator keys.
func TestPolicyStreamKeysValidation(t *testing.T) {
	valid := map[string]any{"max-age": "7D", "stream-max-segment-size-bytes": int64(1 << 20), "max-length-bytes": int64(0)}
	if err := ValidatePolicy(Policy{Name: "p", Pattern: ".*", ApplyTo: ApplyToQueues, Definition: valid}, false); err != nil {
		t.Fatal(err)
	}
	// RabbitMQ 3.10 takes segment sizes from 0 to 3e9.
	for _, size := range []int64{0, 1000, 3_000_000_000} {
		def := map[string]any{"stream-max-segment-size-bytes": size}
		if err := ValidatePolicy(Policy{Name: "p", Pattern: ".*", ApplyTo: ApplyToQueues, Definition: def}, false); err != nil {
			t.Errorf("segment size %d: %v", size, err)
		}
	}
	for def, want := range map[string]map[string]any{
		"is not a valid max age":            {"max-age": "10x"},
		"3000000001 is not a valid segment": {"stream-max-segment-size-bytes": int64(3_000_000_001)},
		"-1 is not a valid segment":         {"stream-max-segment-size-bytes": int64(-1)},
		"is not a valid segment size":       {"stream-max-segment-size-bytes": "big"},
	} {
		err := ValidatePolicy(Policy{Name: "p", Pattern: ".*", ApplyTo: ApplyToQueues, Definition: want}, false)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), def) {
			t.Errorf("%v: %v", want, err)
		}
	}
	if err := ValidatePolicy(Policy{Name: "p", Pattern: ".*", ApplyTo: ApplyToQueues, Definition: map[string]any{"max-age": "1h"}}, true); err == nil {
		t.Error("operator policy accepted max-age")
	}
}

// TestPolicyPersistence stores and deletes policies and checks both
// survive a restart, applied to the recovered queue.
func TestPolicyPersistence(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	if _, err := ts.DeclareQueue("/", QueueSpec{Name: "dq", Durable: true}); err != nil {
		t.Fatal(err)
	}
	keep := Policy{Vhost: "/", Name: "keep", Pattern: "^dq$", ApplyTo: ApplyToQueues, Priority: 1, Definition: map[string]any{"max-length": int64(7)}}
	drop := Policy{Vhost: "/", Name: "drop", Pattern: ".*", ApplyTo: ApplyToAll, Priority: 9, Definition: map[string]any{"max-length": int64(1)}}
	cap := Policy{Vhost: "/", Name: "cap", Pattern: ".*", ApplyTo: ApplyToQueues, Definition: map[string]any{"message-ttl": int64(50000)}}
	for _, p := range []Policy{keep, drop} {
		if _, err := ts.PutPolicy(p, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ts.PutPolicy(cap, true); err != nil {
		t.Fatal(err)
	}
	if created, err := ts.PutPolicy(keep, false); err != nil || created {
		t.Fatalf("re-put: created=%v err=%v", created, err)
	}
	must(t, ts.DeletePolicy("/", "drop", false))
	if err := ts.DeletePolicy("/", "drop", false); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	must(t, ts.Close())
	ts2 := startServer(t, withDataDir(dir))
	if got := ts2.Policies("", false); len(got) != 1 || got[0].Name != "keep" || got[0].Definition["max-length"] != int64(7) {
		t.Fatalf("policies after restart: %+v", got)
	}
	if got := ts2.Policies("/", true); len(got) != 1 || got[0].Name != "cap" {
		t.Fatalf("operator policies after restart: %+v", got)
	}
	q := ts2.Vhost("/").LookupQueue("dq")
	q.mu.Lock()
	qa := q.qa
	q.mu.Unlock()
	if qa.maxLength != 7 || qa.messageTTL != 50000 {
		t.Errorf("recovered queue's arguments: max-length %d ttl %d", qa.maxLength, qa.messageTTL)
	}
	if st := q.Status(); st.Policy != "keep" || st.OperatorPolicy != "cap" {
		t.Errorf("status %s/%s", st.Policy, st.OperatorPolicy)
	}
}

// FuzzDecodeDefinition checks that stored policy definitions decode without
// panicking and that validation handles whatever they contain.
func FuzzDecodeDefinition(f *testing.F) {
	f.Add([]byte(`{"max-length":10,"message-ttl":1.5,"ha-params":[1,2],"x":{"y":null}}`))
	f.Add([]byte(`{"expires":-1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		def, err := decodeDefinition(b)
		if err != nil {
			return
		}
		_ = ValidatePolicy(Policy{Name: "p", Pattern: ".*", ApplyTo: ApplyToAll, Definition: def}, false)
		_ = effectiveQueueArgs("q", "/", nil, def, queueArgs{})
	})
}
