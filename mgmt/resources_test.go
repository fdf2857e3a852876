package mgmt

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/server"
)

func TestMgmtQueueLifecycle(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/queues/%2F/work", map[string]any{"durable": true, "arguments": map[string]any{"x-max-priority": 5}}), 201, "create")
	e.must(e.put("/api/queues/%2F/work", map[string]any{"durable": true, "arguments": map[string]any{"x-max-priority": 5}}), 204, "redeclare")
	r := e.put("/api/queues/%2F/work", map[string]any{"durable": true})
	if r.status != 400 || !strings.Contains(r.object(t)["reason"].(string), "inequivalent arg 'x-max-priority'") {
		t.Errorf("inequivalent redeclare: %d %s", r.status, r.body)
	}
	for _, bad := range []any{`{"arguments":[1]}`, `{"durable":"maybe"}`, `[]`, `{"arguments":{"x-max-priority":1000}}`} {
		if r := e.put("/api/queues/%2F/bad", bad); r.status != 400 || r.object(t)["error"] != "bad_request" {
			t.Errorf("PUT %s: %d %s", bad, r.status, r.body)
		}
	}
	q := e.must(e.get("/api/queues/%2F/work"), 200, "get").object(t)
	if q["durable"] != true || q["type"] != "classic" || field(q, "arguments.x-max-priority") == nil {
		t.Errorf("queue %v", q)
	}
	if _, ok := q["consumer_details"].([]any); !ok {
		t.Errorf("consumer_details missing: %v", q["consumer_details"])
	}
	for i := 0; i < 3; i++ {
		pub := map[string]any{"properties": map[string]any{}, "routing_key": "work", "payload": "m", "payload_encoding": "string"}
		if got := e.must(e.do("POST", "/api/exchanges/%2F/amq.default/publish", pub), 200, "publish").object(t)["routed"]; got != true {
			t.Fatalf("routed %v", got)
		}
	}
	if r := e.do("DELETE", "/api/queues/%2F/work?if-empty=true", nil); r.status != 400 {
		t.Errorf("if-empty on a full queue: %d", r.status)
	}
	e.must(e.do("DELETE", "/api/queues/%2F/work/contents", nil), 204, "purge")
	if n := num(t, e.get("/api/queues/%2F/work").object(t)["messages"]); n != 0 {
		t.Errorf("%v messages after purge", n)
	}
	conn := e.dial("")
	ch := e.channel(conn)
	if _, err := ch.Consume("work", "c1", false, false, false, false, nil); err != nil {
		t.Fatalf("consume: %v", err)
	}
	if r := e.do("DELETE", "/api/queues/%2F/work?if-unused=true", nil); r.status != 400 {
		t.Errorf("if-unused with a consumer: %d %s", r.status, r.body)
	}
	e.must(e.do("DELETE", "/api/queues/%2F/work", nil), 204, "delete")
	e.must(e.do("DELETE", "/api/queues/%2F/work", nil), 404, "delete again")
	if r := e.put("/api/queues/nosuch/q", map[string]any{}); r.status != 404 || string(r.body) != `{"error":"not_found","reason":"vhost_not_found"}`+"\n" {
		t.Errorf("queue in a missing vhost: %d %s", r.status, r.body)
	}
}

// TestMgmtPublishAndGet covers publish over HTTP and every get ackmode.
func TestMgmtPublishAndGet(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/exchanges/%2F/dlx", map[string]any{"type": "fanout"}), 201, "dlx")
	e.must(e.put("/api/queues/%2F/dead", map[string]any{}), 201, "dead")
	e.must(e.do("POST", "/api/bindings/%2F/e/dlx/q/dead", map[string]any{}), 201, "bind dead")
	e.must(e.put("/api/queues/%2F/q", map[string]any{"arguments": map[string]any{"x-dead-letter-exchange": "dlx"}}), 201, "q")
	publish := func(payload, enc string, props map[string]any) {
		t.Helper()
		body := map[string]any{"properties": props, "routing_key": "q", "payload": payload, "payload_encoding": enc}
		if got := e.must(e.do("POST", "/api/exchanges/%2F/amq.default/publish", body), 200, "publish").object(t)["routed"]; got != true {
			t.Fatalf("not routed")
		}
	}
	publish("hello", "string", map[string]any{"delivery_mode": 2, "headers": map[string]any{"h": 1}, "content_type": "text/plain"})
	publish(base64.StdEncoding.EncodeToString([]byte{0xff, 0x00, 0x01}), "base64", map[string]any{})
	get := func(count int, mode string) []any {
		t.Helper()
		return e.must(e.do("POST", "/api/queues/%2F/q/get", map[string]any{"count": count, "ackmode": mode, "encoding": "auto", "truncate": 3}), 200, "get").array(t)
	}
	msgs := get(5, "ack_requeue_true")
	if len(msgs) != 2 {
		t.Fatalf("got %d messages, want 2", len(msgs))
	}
	first := msgs[0].(map[string]any)
	if first["payload"] != "hel" || num(t, first["payload_bytes"]) != 5 || first["payload_encoding"] != "string" ||
		first["redelivered"] != false || num(t, first["message_count"]) != 1 {
		t.Errorf("first message %v", first)
	}
	if field(first, "properties.headers.h") == nil || field(first, "properties.delivery_mode") == nil {
		t.Errorf("properties %v", first["properties"])
	}
	if second := msgs[1].(map[string]any); second["payload_encoding"] != "base64" {
		t.Errorf("binary payload not base64: %v", second)
	}
	// Requeued messages come back redelivered.
	again := get(1, "reject_requeue_true")
	if len(again) != 1 || again[0].(map[string]any)["redelivered"] != true {
		t.Errorf("requeued message %v", again)
	}
	if got := get(1, "ack_requeue_false"); len(got) != 1 {
		t.Fatalf("ack_requeue_false got %v", got)
	}
	// reject_requeue_false dead-letters the last message.
	if got := get(1, "reject_requeue_false"); len(got) != 1 {
		t.Fatalf("reject_requeue_false got %v", got)
	}
	if got := get(1, "ack_requeue_false"); len(got) != 0 {
		t.Errorf("queue should be empty, got %v", got)
	}
	waitFor(t, 2*time.Second, func() error {
		if n := num(t, e.get("/api/queues/%2F/dead").object(t)["messages"]); n != 1 {
			return errorf("dead-letter queue has %v messages", n)
		}
		return nil
	})
	if r := e.do("POST", "/api/queues/%2F/q/get", map[string]any{"count": 1, "ackmode": "bogus"}); r.status != 400 {
		t.Errorf("bad ackmode: %d", r.status)
	}
	e.must(e.put("/api/exchanges/%2F/lonely", map[string]any{"type": "direct"}), 201, "lonely")
	r := e.do("POST", "/api/exchanges/%2F/lonely/publish", map[string]any{"properties": map[string]any{}, "routing_key": "x", "payload": "p", "payload_encoding": "string"})
	if e.must(r, 200, "unrouted").object(t)["routed"] != false {
		t.Errorf("unrouted publish: %s", r.body)
	}
	if r := e.do("POST", "/api/exchanges/%2F/lonely/publish", map[string]any{"routing_key": "x"}); r.status != 400 {
		t.Errorf("publish without payload: %d", r.status)
	}
	if r := e.do("POST", "/api/exchanges/%2F/nosuch/publish", map[string]any{}); r.status != 404 {
		t.Errorf("publish to a missing exchange: %d", r.status)
	}
}

func TestMgmtExchangesAndBindings(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/exchanges/%2F/ex", map[string]any{"type": "topic"}), 201, "ex")
	e.must(e.put("/api/exchanges/%2F/ex2", map[string]any{"type": "fanout", "durable": false}), 201, "ex2")
	e.must(e.put("/api/queues/%2F/q", map[string]any{}), 201, "q")
	if r := e.put("/api/exchanges/%2F/ex", map[string]any{"type": "fanout"}); r.status != 400 {
		t.Errorf("type change: %d", r.status)
	}
	if r := e.put("/api/exchanges/%2F/amq.nope", map[string]any{"type": "direct"}); r.status != 401 {
		t.Errorf("amq. prefix: %d %s", r.status, r.body)
	}
	// POST returns 201 with a relative Location whose last segment is the
	// properties key (Terraform stores it and deletes by it).
	keys := []string{"a.#", "with space", "", "tilde~key"}
	for _, k := range keys {
		for _, args := range []map[string]any{{}, {"x-k": "v"}} {
			r := e.must(e.do("POST", "/api/bindings/%2F/e/ex/q/q", map[string]any{"routing_key": k, "arguments": args}), 201, "bind "+k)
			loc := r.header.Get("Location")
			parts := strings.Split(loc, "/")
			if len(parts) != 2 || parts[0] != "q" {
				t.Fatalf("Location %q", loc)
			}
			got := e.must(e.get("/api/bindings/%2F/e/ex/q/q/"+parts[1]), 200, "binding by Location key "+loc).object(t)
			if got["routing_key"] != k {
				t.Errorf("Location %q names key %q, want %q", loc, got["routing_key"], k)
			}
			pk := got["properties_key"].(string)
			if again := e.get("/api/bindings/%2F/e/ex/q/q/" + esc(pk)); again.status != 200 {
				t.Errorf("properties_key %q does not address its binding: %d", pk, again.status)
			}
		}
	}
	between := e.must(e.get("/api/bindings/%2F/e/ex/q/q"), 200, "between").array(t)
	if len(between) != 2*len(keys) {
		t.Fatalf("%d bindings between, want %d", len(between), 2*len(keys))
	}
	qb := e.must(e.get("/api/queues/%2F/q/bindings"), 200, "queue bindings").array(t)
	if qb[0].(map[string]any)["source"] != "" || qb[0].(map[string]any)["routing_key"] != "q" {
		t.Errorf("default binding first: %v", qb[0])
	}
	e.must(e.do("POST", "/api/bindings/%2F/e/ex/e/ex2", map[string]any{"routing_key": "x"}), 201, "e2e")
	if n := len(e.get("/api/exchanges/%2F/ex2/bindings/destination").array(t)); n != 1 {
		t.Errorf("destination bindings %d", n)
	}
	if n := len(e.get("/api/exchanges/%2F/ex/bindings/source").array(t)); n != 2*len(keys)+1 {
		t.Errorf("source bindings %d", n)
	}
	if n := len(e.get("/api/exchanges/%2F/amq.default/bindings/source").array(t)); n != 1 {
		t.Errorf("default exchange source bindings %d", n)
	}
	// Deleting by the properties key removes exactly one binding.
	for _, b := range between {
		pk := b.(map[string]any)["properties_key"].(string)
		e.must(e.do("DELETE", "/api/bindings/%2F/e/ex/q/q/"+esc(pk), nil), 204, "unbind "+pk)
	}
	if n := len(e.get("/api/bindings/%2F/e/ex/q/q").array(t)); n != 0 {
		t.Errorf("%d bindings left", n)
	}
	e.must(e.do("DELETE", "/api/bindings/%2F/e/ex/q/q/~", nil), 404, "unbind missing")
	if r := e.do("POST", "/api/bindings/%2F/e/amq.default/q/q", map[string]any{}); r.status != 401 {
		t.Errorf("binding the default exchange: %d", r.status)
	}
	if r := e.do("POST", "/api/bindings/%2F/e/nox/q/q", map[string]any{}); r.status != 404 || r.object(t)["error"] != "not_found" {
		t.Errorf("binding a missing exchange: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/api/exchanges/%2F/ex?if-unused=true", nil); r.status != 400 {
		t.Errorf("if-unused exchange with bindings: %d", r.status)
	}
	e.must(e.do("DELETE", "/api/exchanges/%2F/ex", nil), 204, "delete ex")
	e.must(e.do("DELETE", "/api/exchanges/%2F/ex", nil), 404, "delete ex again")
	if r := e.do("DELETE", "/api/exchanges/%2F/amq.default", nil); r.status != 401 {
		t.Errorf("deleting the default exchange: %d", r.status)
	}
	first := e.get("/api/exchanges/%2F").array(t)[0].(map[string]any)
	if first["name"] != "" {
		t.Errorf("default exchange must sort first: %v", first["name"])
	}
}

// TestMgmtConnectionsChannelsConsumers checks the connection, channel and
// consumer views and closing a connection with a reason.
func TestMgmtConnectionsChannelsConsumers(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/queues/%2F/q", map[string]any{}), 201, "q")
	conn := e.dial("")
	ch := e.channel(conn)
	if err := ch.Qos(7, 0, false); err != nil {
		t.Fatalf("qos: %v", err)
	}
	if _, err := ch.Consume("q", "manual", false, false, false, false, nil); err != nil {
		t.Fatalf("consume: %v", err)
	}
	if _, err := ch.Consume("q", "auto", true, false, false, false, nil); err != nil {
		t.Fatalf("consume: %v", err)
	}
	tx := e.channel(conn)
	if err := tx.Tx(); err != nil {
		t.Fatalf("tx: %v", err)
	}
	conns := e.must(e.get("/api/connections"), 200, "connections").array(t)
	if len(conns) != 1 {
		t.Fatalf("%d connections", len(conns))
	}
	c := conns[0].(map[string]any)
	name := c["name"].(string)
	if c["protocol"] != "AMQP 0-9-1" || c["ssl"] != false || c["host"] == "" || num(t, c["channels"]) != 2 ||
		num(t, c["connected_at"]) < float64(time.Now().Add(-time.Minute).UnixMilli()) {
		t.Errorf("connection %v", c)
	}
	chans := e.must(e.get("/api/connections/"+esc(name)+"/channels"), 200, "channels").array(t)
	if len(chans) != 2 {
		t.Fatalf("%d channels", len(chans))
	}
	c1, c2 := chans[0].(map[string]any), chans[1].(map[string]any)
	if num(t, c1["prefetch_count"]) != 7 || num(t, c1["consumer_count"]) != 2 || c1["transactional"] != false || c1["confirm"] != false {
		t.Errorf("consumer channel %v", c1)
	}
	if c2["transactional"] != true || num(t, c2["messages_unacknowledged"]) != 0 {
		t.Errorf("tx channel %v", c2)
	}
	detail := e.must(e.get("/api/channels/"+esc(c1["name"].(string))), 200, "channel").object(t)
	if len(detail["consumer_details"].([]any)) != 2 {
		t.Errorf("channel consumer_details %v", detail["consumer_details"])
	}
	consumers := e.must(e.get("/api/consumers/%2F"), 200, "consumers").array(t)
	acks := map[string]any{}
	for _, x := range consumers {
		m := x.(map[string]any)
		acks[m["consumer_tag"].(string)] = m["ack_required"]
	}
	if acks["manual"] != true || acks["auto"] != false {
		t.Errorf("ack_required %v", acks)
	}
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	e.must(e.do("DELETE", "/api/connections/"+esc(name), nil, withHeader("X-Reason", "maintenance")), 204, "close")
	select {
	case err := <-closed:
		if err == nil || err.Code != 320 || err.Reason != "CONNECTION_FORCED - maintenance" {
			t.Errorf("close error %+v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("connection not closed")
	}
	waitFor(t, 5*time.Second, func() error {
		if n := len(e.get("/api/connections").array(t)); n != 0 {
			return errorf("%d connections listed after close", n)
		}
		return nil
	})
	e.must(e.do("DELETE", "/api/connections/"+esc(name), nil), 404, "close again")
	// Without X-Reason the text is RabbitMQ's.
	conn2 := e.dial("")
	closed2 := conn2.NotifyClose(make(chan *amqp091.Error, 1))
	name2 := e.get("/api/connections").array(t)[0].(map[string]any)["name"].(string)
	e.must(e.do("DELETE", "/api/connections/"+esc(name2), nil), 204, "close default")
	if err := <-closed2; err == nil || err.Reason != "CONNECTION_FORCED - Closed via management plugin" {
		t.Errorf("default close reason %+v", err)
	}
}

// TestMgmtVhostLifecycle checks that deleting a vhost closes its
// connections and removes its objects and permissions.
func TestMgmtVhostLifecycle(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/vhosts/v1", map[string]any{"description": "first", "tags": []string{"a", "b"}}), 201, "create")
	e.must(e.put("/api/vhosts/v1", map[string]any{"description": "changed"}), 204, "update")
	v := e.must(e.get("/api/vhosts/v1"), 200, "get").object(t)
	if v["description"] != "changed" || field(v, "metadata.description") != "changed" {
		t.Errorf("vhost %v", v)
	}
	e.must(e.put("/api/permissions/v1/guest", map[string]string{"configure": ".*", "write": ".*", "read": ".*"}), 201, "perm")
	e.must(e.put("/api/queues/v1/q", map[string]any{"durable": true}), 201, "queue")
	conn := e.dial(strings.TrimSuffix(e.amqpURL, "/") + "/v1")
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	e.must(e.do("DELETE", "/api/vhosts/v1", nil), 204, "delete")
	select {
	case err := <-closed:
		if err == nil || err.Code != 320 {
			t.Errorf("connection close %+v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("connection to the deleted vhost stays open")
	}
	if r := e.get("/api/vhosts/v1"); r.status != 404 {
		t.Errorf("deleted vhost: %d", r.status)
	}
	if r := e.get("/api/permissions/v1/guest"); r.status != 404 {
		t.Errorf("permission on the deleted vhost: %d", r.status)
	}
	e.must(e.put("/api/vhosts/v1", ""), 201, "re-create")
	if n := len(e.get("/api/queues/v1").array(t)); n != 0 {
		t.Errorf("re-created vhost has %d queues", n)
	}
	e.must(e.do("DELETE", "/api/vhosts/nosuch", nil), 404, "delete missing")
}

func TestMgmtUsersAndPermissions(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/users/app", map[string]any{"password": "pw", "tags": []string{"management"}}), 201, "create")
	e.must(e.put("/api/permissions/%2F/app", map[string]string{"configure": ".*", "write": ".*", "read": ".*"}), 201, "perm")
	e.dial("amqp://app:pw@" + e.srv.Addr().String() + "/")
	u := e.must(e.get("/api/users/app"), 200, "get").object(t)
	if u["hashing_algorithm"] != "rabbit_password_hashing_sha256" {
		t.Errorf("user %v", u)
	}
	// The hash shown is the stored one, as RabbitMQ 3.10 shows it: a second
	// user made from it logs in with the first user's password.
	hash, _ := u["password_hash"].(string)
	e.must(e.put("/api/users/app2", map[string]any{"password_hash": hash, "tags": ""}), 201, "create from hash")
	e.must(e.put("/api/permissions/%2F/app2", map[string]string{"configure": ".*", "write": ".*", "read": ".*"}), 201, "perm")
	e.dial("amqp://app2:pw@" + e.srv.Addr().String() + "/")
	if tags := u["tags"].([]any); len(tags) != 1 || tags[0] != "management" {
		t.Errorf("tags %v", u["tags"])
	}
	// Neither password nor hash: the user cannot log in with a password.
	e.must(e.put("/api/users/app", map[string]any{"tags": "management"}), 204, "clear password")
	if _, err := amqp091.Dial("amqp://app:pw@" + e.srv.Addr().String() + "/"); err == nil {
		t.Error("user without a password logged in")
	}
	if u := e.get("/api/users/app").object(t); u["password_hash"] != "" {
		t.Errorf("user without a password shows hash %v", u["password_hash"])
	}
	bad := []map[string]any{
		{"password": "a", "password_hash": "b", "tags": ""},
		{"password_hash": "!!!", "tags": ""},
		{"password_hash": "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR", "hashing_algorithm": "rabbit_password_hashing_sha512", "tags": ""},
		{"password": "x"},
		{"password": 5, "tags": ""},
	}
	for _, b := range bad {
		if r := e.put("/api/users/bad", b); r.status != 400 {
			t.Errorf("PUT user %v: %d %s", b, r.status, r.body)
		}
	}
	if r := e.get("/api/users/bad"); r.status != 404 {
		t.Errorf("rejected user exists: %d", r.status)
	}
	if r := e.put("/api/permissions/nosuch/app", map[string]string{"configure": "", "write": "", "read": ""}); r.status != 400 {
		t.Errorf("permission on a missing vhost: %d", r.status)
	}
	if r := e.put("/api/permissions/%2F/app", map[string]string{"configure": "(", "write": "", "read": ""}); r.status != 400 {
		t.Errorf("bad regexp: %d", r.status)
	}
	e.must(e.put("/api/topic-permissions/%2F/app", map[string]string{"exchange": "amq.topic", "write": "^x", "read": ".*"}), 201, "topic perm")
	if n := len(e.get("/api/users/app/topic-permissions").array(t)); n != 1 {
		t.Errorf("topic permissions %d", n)
	}
	e.must(e.get("/api/topic-permissions/%2F/app/amq.topic"), 200, "topic perm by exchange")
	e.must(e.get("/api/topic-permissions/%2F/app/other"), 404, "topic perm of another exchange")
	e.must(e.do("DELETE", "/api/topic-permissions/%2F/app", nil), 204, "delete topic perms")
	e.must(e.do("POST", "/api/users/bulk-delete", map[string]any{"users": []string{"app", "ghost"}}), 204, "bulk delete")
	if r := e.get("/api/users/app"); r.status != 404 {
		t.Errorf("deleted user: %d", r.status)
	}
	without := e.get("/api/users/without-permissions").array(t)
	for _, u := range without {
		if u.(map[string]any)["name"] == "guest" {
			t.Errorf("guest has permissions but is listed without")
		}
	}
}

// TestMgmtListParameters covers pagination, name filters, sort and columns.
func TestMgmtListParameters(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"alpha", "beta", "gamma", "delta", "Alpaca"} {
		e.must(e.put("/api/queues/%2F/"+n, map[string]any{}), 201, n)
	}
	for _, n := range []string{"beta", "beta", "delta"} {
		e.must(e.do("POST", "/api/exchanges/%2F/amq.default/publish", map[string]any{"properties": map[string]any{}, "routing_key": n, "payload": "x", "payload_encoding": "string"}), 200, "publish")
	}
	names := func(items []any) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.(map[string]any)["name"].(string))
		}
		return strings.Fields(strings.Join(out, " "))
	}
	if got := strings.Join(names(e.get("/api/queues").array(t)), ","); got != "Alpaca,alpha,beta,delta,gamma" {
		t.Errorf("default order %s", got)
	}
	if got := strings.Join(names(e.get("/api/queues?sort=messages&sort_reverse=true").array(t)), ","); got != "beta,delta,gamma,alpha,Alpaca" {
		t.Errorf("by messages, reversed (ties reversed too, as RabbitMQ): %s", got)
	}
	page := e.must(e.get("/api/queues?page=2&page_size=2"), 200, "page").object(t)
	if num(t, page["page"]) != 2 || num(t, page["page_count"]) != 3 || num(t, page["total_count"]) != 5 ||
		num(t, page["item_count"]) != 2 || strings.Join(names(page["items"].([]any)), ",") != "beta,delta" {
		t.Errorf("page 2: %v", page)
	}
	filtered := e.get("/api/queues?page=1&name=AL").object(t)
	if num(t, filtered["filtered_count"]) != 2 || num(t, filtered["total_count"]) != 5 {
		t.Errorf("name filter: %v", filtered)
	}
	re := e.get("/api/queues?page=1&name=%5Ea.*a%24&use_regex=true").object(t)
	if got := strings.Join(names(re["items"].([]any)), ","); got != "Alpaca,alpha" {
		t.Errorf("regex filter: %s", got)
	}
	cols := e.get("/api/queues?columns=name,arguments.none,messages").array(t)
	for _, c := range cols {
		m := c.(map[string]any)
		if len(m) != 3 || m["arguments"] == nil {
			t.Errorf("columns: %v", m)
		}
	}
	for q, wantErr := range map[string]string{
		"page=0":                       "invalid_pagination_parameters",
		"page=1&page_size=501":         "invalid_pagination_parameters",
		"page=x":                       "bad_request",
		"page=9":                       "page_out_of_range",
		"page=1&name=(&use_regex=true": "bad_request",
	} {
		r := e.get("/api/queues?" + q)
		if r.status != 400 || r.object(t)["error"] != wantErr {
			t.Errorf("%s: %d %s", q, r.status, r.body)
		}
	}
	cheap := e.get("/api/queues?disable_stats=true&enable_queue_totals=true").array(t)
	for _, c := range cheap {
		m := c.(map[string]any)
		if m["messages"] == nil || m["message_stats"] != nil || m["messages_details"] != nil {
			t.Errorf("disable_stats row %v", m)
		}
	}
	empty := e.get("/api/connections?page=1").object(t)
	if num(t, empty["total_count"]) != 0 || len(empty["items"].([]any)) != 0 {
		t.Errorf("empty page: %v", empty)
	}
}

func TestMgmtBodyLimits(t *testing.T) {
	e := newEnv(t, func(_ *server.Config, c *Config) { c.MaxBodyBytes = 2048 })
	big := `{"description":"` + strings.Repeat("x", 4096) + `"}`
	if r := e.put("/api/vhosts/big", big); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: %d", r.status)
	}
	if r := e.put("/api/vhosts/big", `{"a":1} trailing`); r.status != 400 {
		t.Errorf("trailing data: %d", r.status)
	}
}
