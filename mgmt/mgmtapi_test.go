package mgmt

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/testcert"
	"github.com/warrenmq/warren/server"
)

// refHashedUsers are the users of testdata/rabbitmq-3.10.8-hashed-users.json:
// their hashes were made by the reference RabbitMQ 3.10.8 node
// (rabbit_password:hash/2 with each hashing module), the users created
// there with PUT /api/users and exported with GET /api/definitions.
var refHashedUsers = []struct{ name, password, algorithm string }{
	{"ref-u256", "l1-secret-sha256", "rabbit_password_hashing_sha256"},
	{"ref-u512", "l1-secret-sha512", "rabbit_password_hashing_sha512"},
	{"ref-umd5", "l1-secret-md5", "rabbit_password_hashing_md5"},
}

// TestMgmtImportedRabbitMQHashesLogIn imports RabbitMQ-made hashes of each
// algorithm and logs in with the passwords behind them over AMQP and HTTP;
// the export carries each user's hash and algorithm unchanged.
func TestMgmtImportedRabbitMQHashesLogIn(t *testing.T) {
	e := newEnv(t)
	defs, err := os.ReadFile("testdata/rabbitmq-3.10.8-hashed-users.json")
	if err != nil {
		t.Fatal(err)
	}
	e.must(e.do("POST", "/api/definitions", defs), 204, "import")
	exported := map[string]map[string]any{}
	for _, u := range field(e.must(e.get("/api/definitions"), 200, "export").object(t), "users").([]any) {
		m := u.(map[string]any)
		exported[m["name"].(string)] = m
	}
	for _, u := range refHashedUsers {
		url := "amqp://" + u.name + ":" + u.password + "@" + e.srv.Addr().String() + "/"
		e.dial(url).Close()
		if c, err := amqp091.Dial(strings.Replace(url, u.password, "wrong", 1)); err == nil {
			c.Close()
			t.Errorf("%s logged in with a wrong password", u.name)
		}
		e.must(e.get("/api/whoami", asUser(u.name, u.password)), 200, u.name+" whoami")
		if got := exported[u.name]["hashing_algorithm"]; got != u.algorithm {
			t.Errorf("%s exported with hashing_algorithm %v, want %s", u.name, got, u.algorithm)
		}
		if got := e.must(e.get("/api/users/"+u.name), 200, "user").object(t)["hashing_algorithm"]; got != u.algorithm {
			t.Errorf("%s shown with hashing_algorithm %v, want %s", u.name, got, u.algorithm)
		}
	}
	if got := exported["ref-u512"]["password_hash"]; got != "7xB/55tHzXZt4EHlAIXGiVR/XqqDzlG2tt3eQQlQKUzrwMn+wFFi2yWVSjC9qAMoLhUympzOz/sNiqMrGDXCuE/nqXY=" {
		t.Errorf("exported SHA-512 hash %v", got)
	}
}

// TestMgmtPutUserWithHashingAlgorithm creates users from RabbitMQ-made hashes
// with PUT /api/users, as rabbit-hole's PutUser with PasswordHash and
// HashingAlgorithm does, and checks the 400s for hashes that cannot be used.
func TestMgmtPutUserWithHashingAlgorithm(t *testing.T) {
	e := newEnv(t)
	hashes := map[string]string{
		"rabbit_password_hashing_sha256": "GDPSC1mg9OmuJuwVvxOsQ1SHMIFEWXI/SwMDu3E8J6wHUE52",
		"rabbit_password_hashing_sha512": "7xB/55tHzXZt4EHlAIXGiVR/XqqDzlG2tt3eQQlQKUzrwMn+wFFi2yWVSjC9qAMoLhUympzOz/sNiqMrGDXCuE/nqXY=",
		"rabbit_password_hashing_md5":    "00OZ1U4QnmEsRLgZtjX5OWhVccc=",
	}
	for _, u := range refHashedUsers {
		e.must(e.put("/api/users/"+u.name, map[string]any{
			"password_hash": hashes[u.algorithm], "hashing_algorithm": u.algorithm, "tags": "management",
		}), 201, "put "+u.name)
		e.must(e.put("/api/permissions/%2F/"+u.name, map[string]string{"configure": ".*", "write": ".*", "read": ".*"}), 201, "perm")
		e.dial("amqp://" + u.name + ":" + u.password + "@" + e.srv.Addr().String() + "/").Close()
		if r := e.get("/api/whoami", asUser(u.name, "wrong")); r.status != 401 {
			t.Errorf("%s with a wrong password: %d", u.name, r.status)
		}
	}
	// RabbitMQ 3.10 answers a hash that is not base64 with 400
	// ["not_base64","!!!"] (Warren's reason is a string, see golden_test.go).
	// It stores an unknown algorithm or a hash of the wrong length and then
	// refuses every login; Warren refuses them at once with a 400.
	for what, b := range map[string]map[string]any{
		"not base64":        {"password_hash": "!!!", "tags": ""},
		"unknown algorithm": {"password_hash": hashes["rabbit_password_hashing_sha256"], "hashing_algorithm": "rabbit_password_hashing_nope", "tags": ""},
		"wrong length":      {"password_hash": hashes["rabbit_password_hashing_md5"], "hashing_algorithm": "rabbit_password_hashing_sha512", "tags": ""},
		"too short":         {"password_hash": "AAAA", "tags": ""},
	} {
		r := e.put("/api/users/bad", b)
		if r.status != 400 || r.object(t)["error"] != "bad_request" {
			t.Errorf("%s: %d %s", what, r.status, r.body)
		}
	}
	e.must(e.get("/api/users/bad"), 404, "refused user")
}

// TestMgmtAuthSettings checks /api/auth: RabbitMQ 3.10 answers it without
// credentials with its UAA settings, off unless configured.
func TestMgmtAuthSettings(t *testing.T) {
	e := newEnv(t)
	m := e.must(e.get("/api/auth", noAuth()), 200, "auth").object(t)
	if len(m) != 3 || m["enable_uaa"] != false || m["uaa_client_id"] != "" || m["uaa_location"] != "" {
		t.Errorf("/api/auth %s, RabbitMQ 3.10 {\"enable_uaa\":false,\"uaa_client_id\":\"\",\"uaa_location\":\"\"}", e.get("/api/auth").body)
	}
}

// TestMgmtQueueActions checks POST /api/queues/{vhost}/{queue}/actions
// against RabbitMQ 3.10.8's answers for a queue with no mirrors.
func TestMgmtQueueActions(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/queues/%2F/qa", map[string]any{"durable": true}), 201, "declare")
	e.must(e.put("/api/queues/%2F/qa-stream", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "stream"}}), 201, "declare stream")
	for _, q := range []string{"qa", "qa-stream"} {
		for _, action := range []string{"sync", "cancel_sync"} {
			e.must(e.do("POST", "/api/queues/%2F/"+q+"/actions", `{"action":"`+action+`"}`), 204, q+" "+action)
		}
	}
	for _, c := range []struct{ body, reason string }{
		{`{"action":"bogus"}`, `{unknown,<<"bogus">>}`}, // RabbitMQ: ["unknown","bogus"]
		{`{"action":5}`, `{unknown,5}`},                 // RabbitMQ: ["unknown",5]
		{`{}`, "[{key_missing,action}]"},
		{`notjson`, "not_json"},
	} {
		expectBody(t, e.do("POST", "/api/queues/%2F/qa/actions", c.body), 400, "bad_request", c.reason)
	}
	e.must(e.do("POST", "/api/queues/%2F/nosuch/actions", `{"action":"sync"}`), 404, "missing queue")
	e.must(e.put("/api/users/mgr", map[string]any{"password": "pw", "tags": "management"}), 201, "user")
	e.must(e.put("/api/permissions/%2F/mgr", map[string]string{"configure": ".*", "write": ".*", "read": ".*"}), 201, "perm")
	expectBody(t, e.do("POST", "/api/queues/%2F/qa/actions", `{"action":"sync"}`, asUser("mgr", "pw")), 401, "not_authorised", "Not administrator user")
	if r := e.get("/api/queues/%2F/qa/actions"); r.status != 405 {
		t.Errorf("GET actions: %d, RabbitMQ 405", r.status)
	}
}

// mechanismNames reads the names of an auth_mechanisms list.
func mechanismNames(t *testing.T, v any) []string {
	t.Helper()
	var out []string
	for _, m := range v.([]any) {
		m := m.(map[string]any)
		if m["enabled"] != true || m["description"] == "" {
			t.Errorf("mechanism %v", m)
		}
		out = append(out, m["name"].(string))
	}
	return out
}

// TestMgmtAuthMechanismsAsOffered checks that the node and the overview list
// the SASL mechanisms the broker offers (RabbitMQ 3.10's node object lists
// PLAIN and AMQPLAIN, EXTERNAL only with rabbitmq_auth_mechanism_ssl), and
// that connections show the mechanism and connection_name their client used.
func TestMgmtAuthMechanismsAsOffered(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"/api/nodes/" + testNode, "/api/overview"} {
		if got := strings.Join(mechanismNames(t, field(e.get(path).object(t), "auth_mechanisms")), " "); got != "PLAIN AMQPLAIN" {
			t.Errorf("%s auth_mechanisms %q, want PLAIN AMQPLAIN", path, got)
		}
	}
	for _, c := range []struct {
		mech string
		auth amqp091.Authentication
	}{{"PLAIN", &amqp091.PlainAuth{Username: "guest", Password: "guest"}}, {"AMQPLAIN", &amqp091.AMQPlainAuth{Username: "guest", Password: "guest"}}} {
		conn, err := amqp091.DialConfig(e.amqpURL, amqp091.Config{
			SASL: []amqp091.Authentication{c.auth}, Properties: amqp091.Table{"connection_name": "app-" + c.mech},
		})
		if err != nil {
			t.Fatalf("%s: %v", c.mech, err)
		}
		defer conn.Close()
	}
	byName := map[string]string{}
	for _, c := range e.must(e.get("/api/connections"), 200, "connections").array(t) {
		m := c.(map[string]any)
		byName[m["user_provided_name"].(string)] = m["auth_mechanism"].(string)
	}
	if byName["app-PLAIN"] != "PLAIN" || byName["app-AMQPLAIN"] != "AMQPLAIN" {
		t.Errorf("connections by user_provided_name: auth_mechanism %v", byName)
	}

	dir := t.TempDir()
	certFile, keyFile, _ := testcert.SelfSigned(t, dir)
	tlsEnv := newEnv(t, func(s *server.Config, _ *Config) {
		s.AMQPSListen, s.TLSCertFile, s.TLSKeyFile, s.TLSCAFile, s.TLSVerifyPeer = "127.0.0.1:0", certFile, keyFile, certFile, true
	})
	if got := strings.Join(mechanismNames(t, field(tlsEnv.get("/api/overview").object(t), "auth_mechanisms")), " "); got != "PLAIN AMQPLAIN EXTERNAL" {
		t.Errorf("with client certificates verified: auth_mechanisms %q, want PLAIN AMQPLAIN EXTERNAL", got)
	}
}

// TestMgmtQueueMessageFigures checks a queue's message counts and bytes as
// RabbitMQ 3.10 shows them (on the reference node two messages, 4 bytes
// persistent with timestamp 1700000000 and 2 bytes transient, show
// messages_persistent 1, message_bytes 6, message_bytes_persistent 4,
// messages_ram 2 and head_message_timestamp 1700000000), with a head of two
// messages so the rest is paged out to disk.
func TestMgmtQueueMessageFigures(t *testing.T) {
	e := newEnv(t, func(s *server.Config, _ *Config) { s.QueueHeadMessages = 2 })
	e.must(e.put("/api/queues/%2F/figs", map[string]any{"durable": true}), 201, "declare")
	ch := e.channel(e.dial(""))
	pub := func(body string, mode uint8, ts int64) {
		p := amqp091.Publishing{Body: []byte(body), DeliveryMode: mode}
		if ts != 0 {
			p.Timestamp = time.Unix(ts, 0)
		}
		if err := ch.PublishWithContext(context.Background(), "", "figs", false, false, p); err != nil {
			t.Fatal(err)
		}
	}
	pub("abcd", amqp091.Persistent, 1700000000)  // head
	pub("xy", amqp091.Transient, 1700000500)     // head
	pub("persisted", amqp091.Persistent, 0)      // paged out, 9 bytes
	pub("transient-paged", amqp091.Transient, 0) // paged out, 15 bytes
	figures := func(want map[string]float64) {
		t.Helper()
		waitFor(t, 5*time.Second, func() error {
			q := e.must(e.get("/api/queues/%2F/figs"), 200, "queue").object(t)
			for k, v := range want {
				if got, ok := q[k].(json.Number); !ok || got.String() != strconv.FormatFloat(v, 'f', -1, 64) {
					return errorf("%s = %v, want %v", k, q[k], v)
				}
			}
			return nil
		})
	}
	figures(map[string]float64{
		"messages": 4, "messages_persistent": 2, "message_bytes_unacknowledged": 0, "message_bytes_ram": 6,
		"messages_ram": 2, "messages_paged_out": 2, "head_message_timestamp": 1700000000,
	})
	// Paged-out messages count with their stored size (body, properties
	// and routing), which the queue index keeps, so no record is read back.
	q := e.get("/api/queues/%2F/figs").object(t)
	paged := num(t, q["message_bytes_paged_out"])
	if paged < 24 || num(t, q["message_bytes"]) != 6+paged || num(t, q["message_bytes_ready"]) != 6+paged {
		t.Errorf("paged out %v bytes; message_bytes %v, message_bytes_ready %v", paged, q["message_bytes"], q["message_bytes_ready"])
	}
	if p := num(t, q["message_bytes_persistent"]); p < 4+9 || p >= 6+paged {
		t.Errorf("message_bytes_persistent %v of %v", p, 6+paged)
	}
	if mem := num(t, q["memory"]); mem < 6 {
		t.Errorf("memory %v for a queue holding 6 bytes of bodies", mem)
	}
	// One message taken without an ack: it moves to the unacknowledged
	// figures and the next message becomes the head.
	m, ok, err := ch.Get("figs", false)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	figures(map[string]float64{
		"messages": 4, "messages_persistent": 2, "message_bytes": 30, "message_bytes_ready": 26,
		"message_bytes_unacknowledged": 4, "message_bytes_persistent": 13, "head_message_timestamp": 1700000500,
	})
	if err := m.Ack(false); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if m, ok, err := ch.Get("figs", true); err != nil || !ok {
			t.Fatalf("get %v: %v %v", m.Body, ok, err)
		}
	}
	figures(map[string]float64{"messages": 0, "messages_persistent": 0, "message_bytes": 0, "message_bytes_persistent": 0,
		"message_bytes_ram": 0, "messages_ram": 0})
	if q := e.get("/api/queues/%2F/figs").object(t); q["head_message_timestamp"] != nil {
		t.Errorf("empty queue head_message_timestamp %v", q["head_message_timestamp"])
	}
}

// TestMgmtNodeMemory checks /api/nodes/{node}/memory: RabbitMQ 3.10's keys,
// filled from what the broker holds (bodies in queues as binary, buffers as
// connection_readers/writers, the store's tables and index pages as
// msg_index), summing to total.rss; and the relative form.
func TestMgmtNodeMemory(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/queues/%2F/memq", map[string]any{"durable": true}), 201, "declare")
	ch := e.channel(e.dial(""))
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 100))
	body := make([]byte, 10<<10)
	for range 100 {
		if err := ch.PublishWithContext(context.Background(), "", "memq", false, false,
			amqp091.Publishing{Body: body, DeliveryMode: amqp091.Persistent}); err != nil {
			t.Fatal(err)
		}
	}
	awaitConfirms(t, confirms, 100)
	mem := e.must(e.get("/api/nodes/"+testNode+"/memory"), 200, "memory").object(t)["memory"].(map[string]any)
	for _, k := range rabbitMemoryKeys {
		if _, ok := mem[k].(json.Number); !ok {
			t.Errorf("memory has no number %s: %v", k, mem[k])
		}
	}
	if b := num(t, mem["binary"]); b != 100*10<<10 {
		t.Errorf("binary %v, want the %d bytes of bodies the queue holds", b, 100*10<<10)
	}
	for _, k := range []string{"queue_procs", "connection_readers", "msg_index", "code", "other_system", "other_proc"} {
		if num(t, mem[k]) <= 0 {
			t.Errorf("%s is 0", k)
		}
	}
	if num(t, mem["connection_readers"]) < 64<<10 {
		t.Errorf("connection_readers %v below one connection's read buffer", mem["connection_readers"])
	}
	if mem["strategy"] != "rss" {
		t.Errorf("strategy %v", mem["strategy"])
	}
	rss := num(t, field(mem, "total.rss"))
	var sum float64
	for _, k := range rabbitMemoryKeys {
		sum += num(t, mem[k])
	}
	if rss <= 0 || (num(t, mem["reserved_unallocated"]) > 0 && sum != rss) || sum < rss {
		t.Errorf("keys sum to %v, total.rss %v", sum, rss)
	}
	rel := e.must(e.get("/api/nodes/"+testNode+"/memory/relative"), 200, "relative").object(t)["memory"].(map[string]any)
	if num(t, rel["total"]) != 100 || num(t, rel["binary"]) < 1 || rel["strategy"] != nil {
		t.Errorf("relative memory %v", rel)
	}
	// Emptying the queue frees its bodies in the breakdown.
	if _, err := ch.QueuePurge("memq", false); err != nil {
		t.Fatal(err)
	}
	mem = e.get("/api/nodes/" + testNode + "/memory").object(t)["memory"].(map[string]any)
	if b := num(t, mem["binary"]); b != 0 {
		t.Errorf("binary %v after purge", b)
	}
	e.must(e.get("/api/nodes/nosuch@host/memory"), 404, "unknown node")
}

// TestMgmtStandaloneHAPolicy: on a standalone node an ha policy cannot
// give a classic queue copies; the queue says so with empty slave_nodes
// and synchronised_slave_nodes (RabbitMQ's fields), naming its one node.
// A queue no ha policy matches has neither field.
func TestMgmtStandaloneHAPolicy(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/policies/%2F/ha", map[string]any{"pattern": "^ha\\.", "apply-to": "queues",
		"definition": map[string]any{"ha-mode": "exactly", "ha-params": 2}}), 201, "policy")
	e.must(e.put("/api/queues/%2F/ha.one", map[string]any{"durable": true}), 201, "declare")
	e.must(e.put("/api/queues/%2F/plain", map[string]any{"durable": true}), 201, "declare")
	q := e.get("/api/queues/%2F/ha.one").object(t)
	for _, k := range []string{"slave_nodes", "synchronised_slave_nodes"} {
		if l, ok := q[k].([]any); !ok || len(l) != 0 {
			t.Errorf("%s = %v, want [] (one copy)", k, q[k])
		}
	}
	if q["node"] != e.srv.NodeName() || q["type"] != "classic" {
		t.Errorf("node %v type %v", q["node"], q["type"])
	}
	if _, has := e.get("/api/queues/%2F/plain").object(t)["slave_nodes"]; has {
		t.Error("slave_nodes on a queue no ha policy matches")
	}
}

// TestMgmtMirroredQueueFields: a mirrored classic queue is rendered with
// RabbitMQ's classic fields: node (its leader), slave_nodes (the other
// replicas) and synchronised_slave_nodes (those in sync), not the quorum
// queue's leader and members.
func TestMgmtMirroredQueueFields(t *testing.T) {
	m := map[string]any{}
	putQuorumJSON(m, server.QueueInfo{Leader: "warren@a", Members: []string{"warren@a", "warren@b", "warren@c"},
		Mirrored: true, SyncedMirrors: []string{"warren@c"}})
	if m["node"] != "warren@a" || fmt.Sprint(m["slave_nodes"]) != "[warren@b warren@c]" ||
		fmt.Sprint(m["synchronised_slave_nodes"]) != "[warren@c]" || m["leader"] != nil || m["members"] != nil {
		t.Fatalf("mirrored queue fields %v", m)
	}
}
