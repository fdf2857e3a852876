package mgmt

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// The golden tests compare Warren's responses with responses recorded from
// RabbitMQ 3.10 by testdata/record.sh: the same topology is built through
// Warren's API, the same requests are sent, and key sets, JSON types and
// statuses must match. Keys RabbitMQ has that Warren deliberately does not
// produce are listed in notProduced with the reason; keys Warren adds are
// listed in warrenExtras.

const goldenDir = "testdata/rabbitmq"

// notProduced are RabbitMQ keys Warren leaves out, by key name.
var notProduced = map[string]string{
	// Erlang runtime internals with no Go equivalent.
	"garbage_collection": "erlang", "reductions": "erlang", "reductions_details": "erlang",
	"backing_queue_status": "erlang", "memory": "erlang process memory", "recoverable_slaves": "mirroring",
	"pending_raft_commands": "quorum queues", "metrics_gc_queue_length": "erlang", "ra_open_file_metrics": "erlang",
	"context_switches": "erlang", "context_switches_details": "erlang", "gc_num": "erlang", "gc_num_details": "erlang",
	"gc_bytes_reclaimed": "erlang", "gc_bytes_reclaimed_details": "erlang", "run_queue_details": "erlang",
	"mnesia_disk_tx_count": "mnesia", "mnesia_disk_tx_count_details": "mnesia", "mnesia_ram_tx_count": "mnesia",
	"mnesia_ram_tx_count_details": "mnesia", "release_series_support_status": "rabbitmq release policy",
	"user_who_performed_action": "not tracked",
	// Storage counters of RabbitMQ's classic queue implementation.
	"io_read_avg_time": "rabbit io", "io_read_avg_time_details": "rabbit io", "io_read_bytes": "rabbit io",
	"io_read_bytes_details": "rabbit io", "io_read_count": "rabbit io", "io_read_count_details": "rabbit io",
	"io_reopen_count": "rabbit io", "io_reopen_count_details": "rabbit io", "io_seek_avg_time": "rabbit io",
	"io_seek_avg_time_details": "rabbit io", "io_seek_count": "rabbit io", "io_seek_count_details": "rabbit io",
	"io_sync_avg_time": "rabbit io", "io_sync_avg_time_details": "rabbit io", "io_sync_count": "rabbit io",
	"io_sync_count_details": "rabbit io", "io_write_avg_time": "rabbit io", "io_write_avg_time_details": "rabbit io",
	"io_write_bytes": "rabbit io", "io_write_bytes_details": "rabbit io", "io_write_count": "rabbit io",
	"io_write_count_details": "rabbit io", "msg_store_read_count": "rabbit io", "msg_store_read_count_details": "rabbit io",
	"msg_store_write_count": "rabbit io", "msg_store_write_count_details": "rabbit io",
	"queue_index_read_count": "rabbit io", "queue_index_read_count_details": "rabbit io",
	"queue_index_write_count": "rabbit io", "queue_index_write_count_details": "rabbit io",
	"disk_reads": "rabbit io", "disk_reads_details": "rabbit io", "disk_writes": "rabbit io", "disk_writes_details": "rabbit io",
	// Churn and per-resource rates not sampled.
	"churn_rates": "churn not counted", "channel_closed": "churn", "channel_closed_details": "churn",
	"channel_created": "churn", "channel_created_details": "churn", "connection_closed": "churn",
	"connection_closed_details": "churn", "connection_created": "churn", "connection_created_details": "churn",
	"queue_created": "churn", "queue_created_details": "churn", "queue_declared": "churn",
	"queue_declared_details": "churn", "queue_deleted": "churn", "queue_deleted_details": "churn",
	"fd_used_details": "node rates", "proc_used_details": "node rates", "mem_used_details": "node rates",
	"sockets_used_details": "node rates", "disk_free_details": "node rates",
	// Queue and channel figures Warren does not track.
	"deliver": "queues count deliveries without the ack split", "deliver_details": "see deliver",
	"deliver_no_ack": "see deliver", "deliver_no_ack_details": "see deliver", "get": "see deliver",
	"get_details": "see deliver", "get_no_ack": "see deliver", "get_no_ack_details": "see deliver",
	"get_empty": "see deliver", "get_empty_details": "see deliver",
	"idle_since": "channels: not tracked", "messages_uncommitted": "not tracked", "acks_uncommitted": "not tracked",
	"send_cnt": "writes are coalesced, not counted",
	"ssl_opts": "no TLS", "cowboy_opts": "erlang web server",
}

// warrenExtras are keys Warren adds that the 3.10 recording lacks (most are
// in management-api.md's field lists from later releases).
var warrenExtras = map[string]bool{
	"statistics_db_node": true, "default_queue_type": true, "is_internal_user": true, "auth_backend": true,
	"consumer_timeout": true, "priority": true, "owner_pid_details": true, "avg": true, "avg_rate": true,
	"samples": true, "being_drained": true, "idle_since": true, "consumer_details": true,
	// Vhost metadata in definitions, as RabbitMQ 3.11+ exports it (3.10
	// imports description and tags too).
	"description": true, "tags": true, "metadata": true,
	// A vhost's message store and flush policy (Warren's extension).
	"message_store": true,
	// The overview repeats the node's auth_mechanisms.
	"auth_mechanisms": true,
}

// knownDeviations are recorded answers Warren deliberately differs from.
var knownDeviations = map[string]string{
	// RabbitMQ 3.10 answers an Erlang term, ["not_base64","!!!"]; clients
	// decode reason as a string (rabbit-hole fails on the array).
	"user-put-badhash": "reason is a string",
}

func splitPort(addr string) (string, string) {
	i := strings.LastIndex(addr, ":")
	return addr[:i], addr[i+1:]
}

// opaque keys hold objects whose keys are data (arguments, properties), not schema.
var opaque = map[string]bool{
	"arguments": true, "client_properties": true, "definition": true, "effective_policy_definition": true,
	"cluster_state": true, "headers": true, "properties": true, "socket_opts": true, "value": true,
	"limits": true,
}

// queueOnlyOmissions apply where queues omit a key other objects have.
var queueOnlyOmissions = map[string]bool{"deliver": true, "get": true}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number, float64:
		return "number"
	case bool:
		return "bool"
	}
	return fmt.Sprintf("%T", v)
}

// unionShape merges the objects of an array into one object holding every
// key seen, with the first non-null value of each, so lists whose rows
// differ (a queue with consumers and one without) compare as one.
func unionShape(a []any) any {
	var out map[string]any
	for _, v := range a {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		if out == nil {
			out = map[string]any{}
		}
		for k, x := range m {
			if cur, seen := out[k]; !seen || cur == nil {
				out[k] = x
			} else if cm, ok := cur.(map[string]any); ok {
				if xm, ok := x.(map[string]any); ok {
					out[k] = unionShape([]any{cm, xm})
				}
			}
		}
	}
	if out == nil {
		return nil
	}
	return out
}

// compareShape reports differences in key sets and JSON types between a
// Warren response and a recorded RabbitMQ one.
func compareShape(got, want any, path string, errs *[]string) {
	gt, wt := jsonType(got), jsonType(want)
	if gt == "null" || wt == "null" {
		return
	}
	if gt != wt {
		*errs = append(*errs, fmt.Sprintf("%s: type %s, RabbitMQ has %s", path, gt, wt))
		return
	}
	switch w := want.(type) {
	case []any:
		g := got.([]any)
		if len(g) > 0 && len(w) > 0 {
			compareShape(unionShape(g), unionShape(w), path+"[]", errs)
		}
	case map[string]any:
		g := got.(map[string]any)
		name := path[strings.LastIndex(path, ".")+1:]
		if opaque[name] {
			return
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				if _, skip := notProduced[k]; !skip {
					*errs = append(*errs, fmt.Sprintf("%s.%s: missing (RabbitMQ has it)", path, k))
				}
				continue
			}
			compareShape(gv, wv, path+"."+k, errs)
		}
		for k := range g {
			if _, ok := w[k]; !ok && !warrenExtras[k] && !queueOnlyOmissions[k] {
				*errs = append(*errs, fmt.Sprintf("%s.%s: not in RabbitMQ's response", path, k))
			}
		}
	}
}

// recorded is one line of testdata/rabbitmq/status.tsv.
type recorded struct {
	name, method, path, location string
	status                       int
}

func readStatuses(t *testing.T) map[string]recorded {
	t.Helper()
	f, err := os.Open(filepath.Join(goldenDir, "status.tsv"))
	if err != nil {
		t.Fatalf("recorded statuses: %v", err)
	}
	defer f.Close()
	out := make(map[string]recorded)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Split(sc.Text(), "\t")
		if len(parts) < 4 {
			continue
		}
		r := recorded{name: parts[0], method: parts[1], path: parts[2]}
		fmt.Sscan(parts[3], &r.status)
		if len(parts) > 4 {
			r.location = parts[4]
		}
		out[r.name] = r
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading status.tsv: %v", err)
	}
	return out
}

func readGolden(t *testing.T, name string) (any, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, name+".json"))
	if os.IsNotExist(err) || (err == nil && len(bytes.TrimSpace(b)) == 0) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("golden %s: %v", name, err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("golden %s: %v", name, err)
	}
	return v, true
}

// buildRecordedTopology creates, through the API, what record.sh creates
// in RabbitMQ before recording.
func buildRecordedTopology(t *testing.T, e *env) {
	t.Helper()
	steps := []struct {
		method, path, body string
		status             int
	}{
		{"PUT", "/api/vhosts/rabbit%2Fhole", `{"description":"recorded","tags":"a,b"}`, 201},
		{"PUT", "/api/permissions/rabbit%2Fhole/guest", `{"configure":".*","write":".*","read":".*"}`, 201},
		{"PUT", "/api/users/alice", `{"password":"s3cret","tags":"monitoring"}`, 201},
		{"PUT", "/api/users/nopass", `{"password_hash":"","tags":""}`, 201},
		{"PUT", "/api/permissions/%2F/alice", `{"configure":"^alice","write":".*","read":".*"}`, 201},
		{"PUT", "/api/topic-permissions/%2F/alice", `{"exchange":"amq.topic","write":"^a","read":".*"}`, 201},
		{"PUT", "/api/queues/%2F/q1", `{"durable":true,"arguments":{"x-max-length":1000}}`, 201},
		{"PUT", "/api/queues/%2F/q2", `{"durable":false,"auto_delete":false}`, 201},
		{"PUT", "/api/exchanges/%2F/ex1", `{"type":"topic","durable":true}`, 201},
		{"PUT", "/api/exchanges/%2F/ex2", `{"type":"fanout","durable":true,"arguments":{"alternate-exchange":"amq.fanout"}}`, 201},
		{"POST", "/api/bindings/%2F/e/ex1/q/q1", `{"routing_key":"q1.#"}`, 201},
		{"POST", "/api/bindings/%2F/e/ex1/e/ex2", `{"routing_key":"x","arguments":{"a":1}}`, 201},
		{"PUT", "/api/policies/%2F/ttl", `{"pattern":"^q","definition":{"message-ttl":600000,"max-length":5000},"priority":1,"apply-to":"queues"}`, 201},
		{"PUT", "/api/operator-policies/%2F/cap", `{"pattern":".*","definition":{"max-length":2000},"priority":0,"apply-to":"queues"}`, 201},
		{"PUT", "/api/queues/rabbit%2Fhole/q3", `{"durable":true}`, 201},
	}
	for _, s := range steps {
		e.must(e.do(s.method, s.path, s.body), s.status, s.method+" "+s.path)
	}
}

// startRecordClient does what testdata/recordclient does: a consumer with
// prefetch 10 acking every other message of q1, a confirm-mode publisher of
// 20 persistent messages, and a no-ack consumer on q2.
func startRecordClient(t *testing.T, e *env) *amqp091.Connection {
	t.Helper()
	conn, err := amqp091.DialConfig(e.amqpURL, amqp091.Config{
		Properties: amqp091.Table{"connection_name": "record-client"}, Heartbeat: 30 * time.Second,
	})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	ch := e.channel(conn)
	if err := ch.Qos(10, 0, false); err != nil {
		t.Fatalf("qos: %v", err)
	}
	msgs, err := ch.Consume("q1", "record-consumer", false, false, false, false, amqp091.Table{"x-priority": int32(3)})
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	pub := e.channel(conn)
	if err := pub.Confirm(false); err != nil {
		t.Fatalf("confirm: %v", err)
	}
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, 32))
	for i := 0; i < 20; i++ {
		err := pub.Publish("ex1", "q1.key", false, false, amqp091.Publishing{
			ContentType: "text/plain", DeliveryMode: 2, Body: []byte(fmt.Sprintf("message %d", i)),
		})
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		if c := <-confirms; !c.Ack {
			t.Fatalf("publish %d nacked", i)
		}
	}
	go func() {
		n := 0
		for d := range msgs {
			if n%2 == 0 {
				_ = d.Ack(false)
			}
			n++
		}
	}()
	if _, err := ch.Consume("q2", "", true, false, false, false, nil); err != nil {
		t.Fatalf("consume q2: %v", err)
	}
	// Once the consumer holds its 10 unacknowledged messages, later
	// publishes stay ready (recordclient's ticker did the same).
	waitFor(t, 5*time.Second, func() error {
		if n := num(t, e.get("/api/queues/%2F/q1").object(t)["messages_unacknowledged"]); n != 10 {
			return errorf("messages_unacknowledged %v, want 10", n)
		}
		return nil
	})
	for i := 0; i < 5; i++ {
		if err := pub.Publish("ex1", "q1.key", false, false, amqp091.Publishing{Body: []byte("tick")}); err != nil {
			t.Fatalf("publish: %v", err)
		}
		<-confirms
	}
	return conn
}

// waitForStats waits until the sampler has seen the traffic twice, so rates
// and message_stats are present as in the recording.
func waitForStats(t *testing.T, e *env) {
	t.Helper()
	waitFor(t, 5*time.Second, func() error {
		q := e.get("/api/queues/%2F/q1").object(t)
		if field(q, "message_stats.publish_details.rate") == nil || field(q, "messages_unacknowledged") == nil {
			return errorf("no message_stats yet: %s", q["message_stats"])
		}
		if n := num(t, q["messages_unacknowledged"]); n != 10 {
			return errorf("messages_unacknowledged %v, want 10", n)
		}
		return nil
	})
	e.api.stats.sample(time.Now())
	e.api.stats.sample(time.Now().Add(time.Millisecond))
}

func TestMgmtGoldenShapes(t *testing.T) {
	e := newEnv(t)
	buildRecordedTopology(t, e)
	startRecordClient(t, e)
	waitForStats(t, e)
	conns := e.must(e.get("/api/connections"), 200, "connections").array(t)
	if len(conns) != 1 {
		t.Fatalf("%d connections, want 1", len(conns))
	}
	connName := conns[0].(map[string]any)["name"].(string)
	statuses := readStatuses(t)
	names := make([]string, 0, len(statuses))
	for name := range statuses {
		names = append(names, name)
	}
	sort.Strings(names)
	compared := 0
	for _, name := range names {
		rec := statuses[name]
		if rec.method != "GET" || rec.status != 200 || strings.HasPrefix(name, "alice-") {
			continue
		}
		want, ok := readGolden(t, name)
		if !ok {
			continue
		}
		path := "/api" + rec.path
		switch name {
		case "node":
			path = "/api/nodes/" + testNode
		case "connection":
			path = "/api/connections/" + esc(connName)
		case "connection-channels":
			path = "/api/connections/" + esc(connName) + "/channels"
		case "channel":
			path = "/api/channels/" + esc(connName+" (2)")
		case "health-port-listener":
			_, port := splitPort(e.srv.Addr().String())
			path = "/api/health/checks/port-listener/" + port
		}
		t.Run(name, func(t *testing.T) {
			r := e.get(path)
			if r.status != 200 {
				t.Fatalf("GET %s: %d %s", path, r.status, r.body)
			}
			var errs []string
			compareShape(r.value(t), want, name, &errs)
			sort.Strings(errs)
			for _, msg := range errs {
				t.Error(msg)
			}
		})
		compared++
	}
	if compared < 50 {
		t.Fatalf("compared %d recorded responses; the recording seems incomplete", compared)
	}
}

// writeStep is a request of record.sh after the topology is built.
type writeStep struct {
	name, method, path, body string
	// reason, when set, is the exact reason RabbitMQ gave and Warren must give.
	exactReason bool
}

var recordedWrites = []writeStep{
	{"queue-put-create", "PUT", "/queues/%2F/rec1", `{"durable":true,"arguments":{"x-message-ttl":5000}}`, false},
	{"queue-put-update", "PUT", "/queues/%2F/rec1", `{"durable":true,"arguments":{"x-message-ttl":5000}}`, false},
	{"queue-put-inequivalent", "PUT", "/queues/%2F/rec1", `{"durable":false}`, true},
	{"queue-put-badarg", "PUT", "/queues/%2F/rec2", `{"arguments":{"x-message-ttl":"soon"}}`, false},
	{"queue-put-badjson", "PUT", "/queues/%2F/rec2", `{"durable":`, true},
	{"queue-put-novhost", "PUT", "/queues/nosuchvhost/rec2", `{}`, true},
	{"exchange-put-create", "PUT", "/exchanges/%2F/recx", `{"type":"direct"}`, false},
	{"exchange-put-update", "PUT", "/exchanges/%2F/recx", `{"type":"direct"}`, false},
	{"exchange-put-notype", "PUT", "/exchanges/%2F/recy", `{}`, false},
	{"exchange-put-badtype", "PUT", "/exchanges/%2F/recy", `{"type":"nope"}`, false},
	{"exchange-publish", "POST", "/exchanges/%2F/amq.default/publish", `{"properties":{"delivery_mode":2,"headers":{"h":1}},"routing_key":"rec1","payload":"hello","payload_encoding":"string"}`, false},
	{"exchange-publish-unrouted", "POST", "/exchanges/%2F/recx/publish", `{"properties":{},"routing_key":"none","payload":"aGk=","payload_encoding":"base64"}`, false},
	{"queue-get", "POST", "/queues/%2F/rec1/get", `{"count":5,"ackmode":"ack_requeue_true","encoding":"auto","truncate":50000}`, false},
	{"queue-get-empty", "POST", "/queues/%2F/q2/get", `{"count":1,"ackmode":"ack_requeue_false","encoding":"auto"}`, false},
	{"binding-post", "POST", "/bindings/%2F/e/recx/q/rec1", `{"routing_key":"k1","arguments":{}}`, false},
	{"binding-post-args", "POST", "/bindings/%2F/e/recx/q/rec1", `{"routing_key":"k 2","arguments":{"x":"y"}}`, false},
	{"binding-delete", "DELETE", "/bindings/%2F/e/recx/q/rec1/k1", ``, false},
	{"queue-purge", "DELETE", "/queues/%2F/rec1/contents", ``, false},
	{"queue-delete-ifempty", "DELETE", "/queues/%2F/q1?if-empty=true", ``, true},
	{"queue-delete", "DELETE", "/queues/%2F/rec1", ``, false},
	{"queue-delete-missing", "DELETE", "/queues/%2F/rec1", ``, true},
	{"queue-missing", "GET", "/queues/%2F/nosuch", ``, true},
	{"exchange-delete", "DELETE", "/exchanges/%2F/recx", ``, false},
	{"exchange-delete-default", "DELETE", "/exchanges/%2F/amq.direct", ``, true},
	{"vhost-put-create", "PUT", "/vhosts/recvh", `{"description":"d"}`, false},
	{"vhost-put-update", "PUT", "/vhosts/recvh", ``, false},
	{"vhost-delete", "DELETE", "/vhosts/recvh", ``, false},
	{"user-put-create", "PUT", "/users/bob", `{"password":"x","tags":["management"]}`, false},
	{"user-put-update", "PUT", "/users/bob", `{"password_hash":"kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR","tags":"management,policymaker"}`, false},
	{"user-put-badhash", "PUT", "/users/bob2", `{"password_hash":"!!!","tags":""}`, false},
	{"user-put-notags", "PUT", "/users/bob3", `{"password":"x"}`, true},
	{"permission-put-create", "PUT", "/permissions/%2F/bob", `{"configure":".*","write":".*","read":".*"}`, false},
	{"permission-put-update", "PUT", "/permissions/%2F/bob", `{"configure":"","write":".*","read":".*"}`, false},
	{"permission-put-nouser", "PUT", "/permissions/%2F/nobody", `{"configure":".*","write":".*","read":".*"}`, true},
	{"permission-delete", "DELETE", "/permissions/%2F/bob", ``, false},
	{"user-delete", "DELETE", "/users/bob", ``, false},
	{"policy-put-create", "PUT", "/policies/%2F/recpol", `{"pattern":"^rec","definition":{"expires":100000},"apply-to":"queues"}`, false},
	{"policy-put-bad", "PUT", "/policies/%2F/recpol2", `{"pattern":"^rec","definition":{"expires":"x"}}`, true},
	{"policy-delete", "DELETE", "/policies/%2F/recpol", ``, false},
	{"cluster-name-put", "PUT", "/cluster-name", `{"name":"rabbit@vm"}`, false},
	{"definitions-post", "POST", "/definitions", `{"queues":[{"name":"defq","vhost":"/","durable":true,"auto_delete":false,"arguments":{}}]}`, false},
	{"definitions-post-bad", "POST", "/definitions", `{"queues":`, true},
}

// TestMgmtGoldenWrites replays record.sh's requests and compares statuses,
// error keys, Location headers and response shapes.
func TestMgmtGoldenWrites(t *testing.T) {
	e := newEnv(t)
	buildRecordedTopology(t, e)
	startRecordClient(t, e)
	waitForStats(t, e)
	statuses := readStatuses(t)
	for _, s := range recordedWrites {
		rec, ok := statuses[s.name]
		if !ok {
			t.Fatalf("%s is not in status.tsv", s.name)
		}
		var body any
		if s.body != "" {
			body = s.body
		}
		r := e.do(s.method, "/api"+s.path, body)
		if r.status != rec.status {
			t.Errorf("%s: %s %s: status %d, RabbitMQ %d (%s)", s.name, s.method, s.path, r.status, rec.status, r.body)
			continue
		}
		if rec.location != "" {
			if loc := r.header.Get("Location"); !strings.HasPrefix(rec.location, "rec1/k") || !strings.HasPrefix(loc, "rec1/k") {
				t.Errorf("%s: Location %q, RabbitMQ %q", s.name, loc, rec.location)
			}
		}
		want, ok := readGolden(t, s.name)
		if !ok {
			if len(bytes.TrimSpace(r.body)) > 0 {
				t.Errorf("%s: body %s, RabbitMQ sent none", s.name, r.body)
			}
			continue
		}
		got := r.value(t)
		var errs []string
		compareShape(got, want, s.name, &errs)
		if _, ok := knownDeviations[s.name]; ok {
			errs = nil
		}
		for _, msg := range errs {
			t.Error(msg)
		}
		if rec.status >= 400 {
			g, w := got.(map[string]any), want.(map[string]any)
			if g["error"] != w["error"] {
				t.Errorf("%s: error %q, RabbitMQ %q", s.name, g["error"], w["error"])
			}
			if s.exactReason && g["reason"] != w["reason"] {
				t.Errorf("%s: reason %q, RabbitMQ %q", s.name, g["reason"], w["reason"])
			}
		}
	}
	// The recorded 401s: no credentials, a wrong password, a user without a
	// password, and a monitoring user asking for admin-only or unpermitted data.
	auth := []struct {
		name string
		path string
		opt  reqOpt
	}{
		{"unauthorised-noauth", "/api/overview", noAuth()},
		{"unauthorised-wrong", "/api/overview", asUser("guest", "wrong")},
		{"unauthorised-notmgmt", "/api/overview", asUser("nopass", "")},
		{"alice-users", "/api/users", asUser("alice", "s3cret")},
		{"alice-queues", "/api/queues", asUser("alice", "s3cret")},
		{"alice-vhost-queues", "/api/queues/rabbit%2Fhole", asUser("alice", "s3cret")},
	}
	for _, a := range auth {
		rec := statuses[a.name]
		r := e.get(a.path, a.opt)
		if r.status != rec.status {
			t.Errorf("%s: status %d, RabbitMQ %d", a.name, r.status, rec.status)
		}
		want, ok := readGolden(t, a.name)
		if !ok {
			if len(r.body) != 0 {
				t.Errorf("%s: body %s, RabbitMQ sent none", a.name, r.body)
			}
			if rec.status == http.StatusUnauthorized && r.header.Get("WWW-Authenticate") != `Basic realm="RabbitMQ Management"` {
				t.Errorf("%s: WWW-Authenticate %q", a.name, r.header.Get("WWW-Authenticate"))
			}
			continue
		}
		if rec.status >= 400 && string(bytes.TrimSpace(r.body)) != compactJSON(t, want) {
			t.Errorf("%s: body %s, RabbitMQ %s", a.name, r.body, compactJSON(t, want))
		}
	}
}

func compactJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return string(b)
}

// TestMgmtCompareShapeDetects makes sure the golden comparison can fail:
// missing keys, extra keys and type changes are all reported.
func TestMgmtCompareShapeDetects(t *testing.T) {
	want := map[string]any{"name": "q", "os_pid": "12", "nested": map[string]any{"a": json.Number("1")},
		"list": []any{map[string]any{"x": true}}, "garbage_collection": map[string]any{}}
	cases := map[string]any{
		"missing key":  map[string]any{"os_pid": "12", "nested": map[string]any{"a": 1.0}, "list": []any{map[string]any{"x": true}}},
		"extra key":    map[string]any{"name": "q", "os_pid": "12", "nested": map[string]any{"a": 1.0}, "list": []any{map[string]any{"x": true}}, "bogus": 1},
		"type change":  map[string]any{"name": "q", "os_pid": 12.0, "nested": map[string]any{"a": 1.0}, "list": []any{map[string]any{"x": true}}},
		"nested type":  map[string]any{"name": "q", "os_pid": "12", "nested": map[string]any{"a": "1"}, "list": []any{map[string]any{"x": true}}},
		"in an array":  map[string]any{"name": "q", "os_pid": "12", "nested": map[string]any{"a": 1.0}, "list": []any{map[string]any{"x": "yes"}}},
		"not a object": []any{},
	}
	for name, got := range cases {
		var errs []string
		compareShape(got, want, "x", &errs)
		if len(errs) == 0 {
			t.Errorf("%s: not detected", name)
		}
	}
	var errs []string
	compareShape(map[string]any{"name": "q", "os_pid": "1", "nested": map[string]any{"a": 2.0}, "list": []any{}}, want, "x", &errs)
	if len(errs) != 0 {
		t.Errorf("equal shapes reported: %v", errs)
	}
}
