package mgmt

import (
	"testing"
	"time"
)

// publishN publishes n messages to the default exchange with routing key q.
func (e *env) publishN(q string, n int) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		body := map[string]any{"properties": map[string]any{}, "routing_key": q, "payload": "m", "payload_encoding": "string"}
		e.must(e.do("POST", "/api/exchanges/%2F/amq.default/publish", body), 200, "publish")
	}
}

// waitMessages waits until a queue of the default vhost holds n messages.
func (e *env) waitMessages(q string, n float64) {
	e.t.Helper()
	waitFor(e.t, 5*time.Second, func() error {
		if got := num(e.t, e.get("/api/queues/%2F/" + esc(q)).object(e.t)["messages"]); got != n {
			return errorf("queue %s has %v messages, want %v", q, got, n)
		}
		return nil
	})
}

func TestMgmtPoliciesApplyToQueues(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/queues/%2F/pq", map[string]any{}), 201, "pq")
	e.publishN("pq", 10)
	e.must(e.put("/api/policies/%2F/lim", map[string]any{"pattern": "^pq", "apply-to": "queues", "definition": map[string]any{"max-length": 3}}), 201, "policy")
	e.waitMessages("pq", 3)
	q := e.get("/api/queues/%2F/pq").object(t)
	if q["policy"] != "lim" || num(t, field(q, "effective_policy_definition.max-length")) != 3 || q["operator_policy"] != nil {
		t.Errorf("queue %v / %v / %v", q["policy"], q["effective_policy_definition"], q["operator_policy"])
	}
	// A queue declared after the policy gets it at once.
	e.must(e.put("/api/queues/%2F/pq2", map[string]any{}), 201, "pq2")
	e.publishN("pq2", 5)
	e.waitMessages("pq2", 3)
	// A declared limit below the policy's wins (the smaller applies).
	e.must(e.put("/api/queues/%2F/pq3", map[string]any{"arguments": map[string]any{"x-max-length": 1}}), 201, "pq3")
	e.publishN("pq3", 4)
	e.waitMessages("pq3", 1)
	// A higher-priority policy replaces the first; its message TTL applies to
	// messages published from then on.
	e.must(e.put("/api/queues/%2F/pqttl", map[string]any{}), 201, "pqttl")
	e.must(e.put("/api/policies/%2F/ttl", map[string]any{"pattern": "^pqttl$", "priority": 5, "apply-to": "all", "definition": map[string]any{"message-ttl": 1}}), 201, "ttl")
	if got := e.get("/api/queues/%2F/pqttl").object(t)["policy"]; got != "ttl" {
		t.Errorf("highest-priority policy %v", got)
	}
	e.publishN("pqttl", 3)
	e.waitMessages("pqttl", 0)
	if got := num(t, field(e.get("/api/queues/%2F/pqttl").object(t), "message_stats.publish")); got != 3 {
		t.Errorf("pqttl publish count %v", got)
	}
	// An operator policy caps the user policy: the stricter value wins.
	e.must(e.put("/api/operator-policies/%2F/cap", map[string]any{"pattern": ".*", "apply-to": "queues", "definition": map[string]any{"max-length": 2}}), 201, "operator policy")
	e.waitMessages("pq", 2)
	q = e.get("/api/queues/%2F/pq").object(t)
	if q["operator_policy"] != "cap" || num(t, field(q, "effective_policy_definition.max-length")) != 2 {
		t.Errorf("with operator policy: %v %v", q["operator_policy"], q["effective_policy_definition"])
	}
	// Removing every policy lifts the limits.
	for _, p := range []string{"/api/policies/%2F/ttl", "/api/policies/%2F/lim", "/api/operator-policies/%2F/cap"} {
		e.must(e.do("DELETE", p, nil), 204, "delete "+p)
	}
	e.publishN("pq2", 5)
	e.waitMessages("pq2", 7)
	if q := e.get("/api/queues/%2F/pq2").object(t); q["policy"] != nil || len(q["effective_policy_definition"].(map[string]any)) != 0 {
		t.Errorf("after deleting policies: %v %v", q["policy"], q["effective_policy_definition"])
	}
	e.must(e.do("DELETE", "/api/policies/%2F/lim", nil), 404, "delete missing policy")
}

func TestMgmtPolicyDeadLetteringPrecedence(t *testing.T) {
	e := newEnv(t)
	for _, x := range []string{"declared", "fromPolicy"} {
		e.must(e.put("/api/exchanges/%2F/"+x, map[string]any{"type": "fanout"}), 201, x)
		e.must(e.put("/api/queues/%2F/"+x+"-q", map[string]any{}), 201, x+"-q")
		e.must(e.do("POST", "/api/bindings/%2F/e/"+x+"/q/"+x+"-q", map[string]any{}), 201, "bind")
	}
	e.must(e.put("/api/policies/%2F/dlx", map[string]any{"pattern": "^src", "definition": map[string]any{"dead-letter-exchange": "fromPolicy"}}), 201, "policy")
	e.must(e.put("/api/queues/%2F/src-own", map[string]any{"arguments": map[string]any{"x-dead-letter-exchange": "declared"}}), 201, "src-own")
	e.must(e.put("/api/queues/%2F/src-policy", map[string]any{}), 201, "src-policy")
	for _, q := range []string{"src-own", "src-policy"} {
		e.publishN(q, 1)
		e.must(e.do("POST", "/api/queues/%2F/"+q+"/get", map[string]any{"count": 1, "ackmode": "reject_requeue_false"}), 200, "reject")
	}
	// The declared argument wins for dead-letter-exchange (RabbitMQ's res_arg).
	e.waitMessages("declared-q", 1)
	e.waitMessages("fromPolicy-q", 1)
}

func TestMgmtPolicyAlternateExchange(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/exchanges/%2F/src", map[string]any{"type": "direct"}), 201, "src")
	e.must(e.put("/api/exchanges/%2F/ae", map[string]any{"type": "fanout"}), 201, "ae")
	e.must(e.put("/api/queues/%2F/aeq", map[string]any{}), 201, "aeq")
	e.must(e.do("POST", "/api/bindings/%2F/e/ae/q/aeq", map[string]any{}), 201, "bind")
	pub := map[string]any{"properties": map[string]any{}, "routing_key": "nowhere", "payload": "x", "payload_encoding": "string"}
	if e.must(e.do("POST", "/api/exchanges/%2F/src/publish", pub), 200, "publish").object(t)["routed"] != false {
		t.Fatal("routed without an alternate exchange")
	}
	e.must(e.put("/api/policies/%2F/ae", map[string]any{"pattern": "^src$", "apply-to": "exchanges", "definition": map[string]any{"alternate-exchange": "ae"}}), 201, "policy")
	if e.must(e.do("POST", "/api/exchanges/%2F/src/publish", pub), 200, "publish").object(t)["routed"] != true {
		t.Fatal("policy alternate-exchange not applied")
	}
	e.waitMessages("aeq", 1)
	if got := e.get("/api/exchanges/%2F/src").object(t)["policy"]; got != "ae" {
		t.Errorf("exchange policy %v", got)
	}
	// A queues-only policy does not apply to exchanges.
	e.must(e.put("/api/policies/%2F/ae", map[string]any{"pattern": "^src$", "apply-to": "queues", "definition": map[string]any{"alternate-exchange": "ae"}}), 204, "update policy")
	if e.must(e.do("POST", "/api/exchanges/%2F/src/publish", pub), 200, "publish").object(t)["routed"] != false {
		t.Error("queues-only policy applied to an exchange")
	}
	// An exchange declared after the policy gets it.
	e.must(e.put("/api/policies/%2F/ae", map[string]any{"pattern": "^src", "apply-to": "exchanges", "definition": map[string]any{"alternate-exchange": "ae"}}), 204, "update policy")
	e.must(e.put("/api/exchanges/%2F/src2", map[string]any{"type": "direct"}), 201, "src2")
	if e.must(e.do("POST", "/api/exchanges/%2F/src2/publish", pub), 200, "publish").object(t)["routed"] != true {
		t.Error("new exchange did not get the policy")
	}
}

func TestMgmtPolicyValidation(t *testing.T) {
	e := newEnv(t)
	bad := []struct {
		path string
		body any
	}{
		{"/api/policies/%2F/p", map[string]any{"pattern": ".*", "definition": map[string]any{"no-such-key": 1}}},
		{"/api/policies/%2F/p", map[string]any{"pattern": ".*", "definition": map[string]any{"max-length": -1}}},
		{"/api/policies/%2F/p", map[string]any{"pattern": ".*", "definition": map[string]any{"expires": 0}}},
		{"/api/policies/%2F/p", map[string]any{"pattern": ".*", "definition": map[string]any{"overflow": "explode"}}},
		{"/api/policies/%2F/p", map[string]any{"pattern": ".*", "definition": map[string]any{"message-ttl": 1.5}}},
		{"/api/policies/%2F/p", map[string]any{"pattern": "(", "definition": map[string]any{"expires": 10}}},
		{"/api/policies/%2F/p", map[string]any{"pattern": ".*", "apply-to": "stream", "definition": map[string]any{"expires": 10}}}, // 4.x takes "streams"
		{"/api/policies/%2F/p", map[string]any{"pattern": ".*", "definition": map[string]any{}}},
		{"/api/policies/%2F/p", map[string]any{"definition": map[string]any{"expires": 10}}},
		{"/api/policies/%2F/p", map[string]any{"pattern": ".*", "definition": map[string]any{"ha-params": 2}}},
		{"/api/operator-policies/%2F/p", map[string]any{"pattern": ".*", "definition": map[string]any{"dead-letter-exchange": "x"}}},
	}
	for _, b := range bad {
		r := e.put(b.path, b.body)
		if r.status != 400 || r.object(t)["error"] != "bad_request" {
			t.Errorf("PUT %s %v: %d %s", b.path, b.body, r.status, r.body)
		}
	}
	if n := len(e.get("/api/policies").array(t)); n != 0 {
		t.Errorf("%d policies stored after invalid requests", n)
	}
	good := map[string]any{"pattern": ".*", "priority": 2, "definition": map[string]any{
		"queue-mode": "lazy", "ha-mode": "exactly", "ha-params": 2, "ha-sync-mode": "automatic",
		"consumer-timeout": 60000, "delivery-limit": 5, "overflow": "reject-publish", "dead-letter-routing-key": "k",
	}}
	e.must(e.put("/api/policies/%2F/everything", good), 201, "all keys")
	p := e.must(e.get("/api/policies/%2F/everything"), 200, "get").object(t)
	if p["apply-to"] != "all" || num(t, p["priority"]) != 2 || field(p, "definition.ha-mode") != "exactly" {
		t.Errorf("stored policy %v", p)
	}
	if r := e.get("/api/policies/%2F/nosuch"); r.status != 404 {
		t.Errorf("missing policy: %d", r.status)
	}
}
