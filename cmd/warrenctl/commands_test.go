package main

import (
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDeclareQueue(t *testing.T) {
	f := newFakeAPI(t)
	f.on("PUT", "/api/queues/%2F/orders", reply{status: http.StatusCreated})
	r := f.ctl("declare", "queue", "orders", "--arg", "x-max-length=10", "--arg", "x-overflow=reject-publish",
		"--arguments", `{"x-message-ttl":60000}`, "--type", "quorum").mustOK(t)
	if !strings.Contains(r.stdout, `queue "orders" in vhost "/" declared`) {
		t.Errorf("stdout %q", r.stdout)
	}
	body := bodyOf(t, f.last())
	want := map[string]any{
		"durable": true, "auto_delete": false,
		"arguments": map[string]any{"x-max-length": 10.0, "x-overflow": "reject-publish", "x-message-ttl": 60000.0, "x-queue-type": "quorum"},
	}
	if !reflect.DeepEqual(body, want) {
		t.Errorf("body %v, want %v", body, want)
	}

	// An existing, equivalent queue: 204.
	f.on("PUT", "/api/queues/v1/orders", reply{status: http.StatusNoContent})
	r = f.ctl("--vhost", "v1", "declare", "queue", "--durable=false", "--auto-delete", "orders").mustOK(t)
	if !strings.Contains(r.stdout, "already exists") {
		t.Errorf("stdout %q", r.stdout)
	}
	if body := bodyOf(t, f.last()); body["durable"] != false || body["auto_delete"] != true || !reflect.DeepEqual(body["arguments"], map[string]any{}) {
		t.Errorf("body %v", body)
	}
}

func TestDeclareQueueInequivalent(t *testing.T) {
	f := newFakeAPI(t)
	f.on("PUT", "/api/queues/%2F/q", reply{status: http.StatusBadRequest,
		body: `{"error":"bad_request","reason":"inequivalent arg 'durable' for queue 'q' in vhost '/': received 'true' but current is 'false'"}`})
	r := f.ctl("declare", "queue", "q")
	if r.code != exitFailed {
		t.Fatalf("exit %d", r.code)
	}
	want := "warrenctl: PUT /api/queues/%2F/q: 400 Bad Request: bad_request: inequivalent arg 'durable' for queue 'q' in vhost '/': received 'true' but current is 'false'\n"
	if r.stderr != want {
		t.Errorf("stderr %q\nwant   %q", r.stderr, want)
	}
}

func TestDeleteAndPurgeQueue(t *testing.T) {
	f := newFakeAPI(t)
	f.on("DELETE", "/api/queues/%2F/q%201", reply{status: http.StatusNoContent})
	f.on("DELETE", "/api/queues/%2F/q%201/contents", reply{status: http.StatusNoContent})
	f.ctl("delete", "queue", "q 1", "--if-empty", "--if-unused").mustOK(t)
	if q := f.last().query; q != "if-empty=true&if-unused=true" {
		t.Errorf("query %q", q)
	}
	f.ctl("delete", "queue", "q 1").mustOK(t)
	if q := f.last().query; q != "" {
		t.Errorf("query %q", q)
	}
	r := f.ctl("purge", "queue", "q 1").mustOK(t)
	if !strings.Contains(r.stdout, "purged") || f.last().method != "DELETE" {
		t.Errorf("purge: %q %v", r.stdout, f.last())
	}
	// A missing queue: RabbitMQ's 404 body, exit 1.
	r = f.ctl("delete", "queue", "nope")
	if r.code != exitFailed || !strings.Contains(r.stderr, "404 Not Found: Object Not Found: Not Found") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestDeclareAndDeleteExchange(t *testing.T) {
	f := newFakeAPI(t)
	f.on("PUT", "/api/exchanges/%2F/events", reply{status: http.StatusCreated})
	f.on("DELETE", "/api/exchanges/%2F/events", reply{status: http.StatusNoContent})
	f.ctl("declare", "exchange", "events", "--type", "topic", "--internal", "--arg", "alternate-exchange=ae").mustOK(t)
	want := map[string]any{"type": "topic", "durable": true, "auto_delete": false, "internal": true,
		"arguments": map[string]any{"alternate-exchange": "ae"}}
	if body := bodyOf(t, f.last()); !reflect.DeepEqual(body, want) {
		t.Errorf("body %v, want %v", body, want)
	}
	f.ctl("delete", "exchange", "events", "--if-unused").mustOK(t)
	if q := f.last().query; q != "if-unused=true" {
		t.Errorf("query %q", q)
	}
}

func TestDeclareBinding(t *testing.T) {
	f := newFakeAPI(t)
	// RabbitMQ answers 201 with a relative Location whose last segment is the
	// properties key, percent-encoded once more.
	f.on("POST", "/api/bindings/%2F/e/amq.topic/q/orders", reply{status: http.StatusCreated,
		header: map[string]string{"Location": "orders/order.%252A"}})
	f.on("POST", "/api/bindings/%2F/e/up/e/down", reply{status: http.StatusCreated})
	r := f.ctl("declare", "binding", "--source", "amq.topic", "--destination", "orders", "--routing-key", "order.*").mustOK(t)
	if !strings.Contains(r.stdout, "(properties key order.%2A)") {
		t.Errorf("stdout %q", r.stdout)
	}
	if body := bodyOf(t, f.last()); body["routing_key"] != "order.*" || !reflect.DeepEqual(body["arguments"], map[string]any{}) {
		t.Errorf("body %v", body)
	}
	f.ctl("declare", "binding", "--source", "up", "--destination", "down", "--destination-type", "exchange",
		"--arg", "x-match=any").mustOK(t)
	if body := bodyOf(t, f.last()); !reflect.DeepEqual(body["arguments"], map[string]any{"x-match": "any"}) {
		t.Errorf("body %v", body)
	}
	for _, bad := range [][]string{
		{"declare", "binding", "--destination", "q"},
		{"declare", "binding", "--source", "x", "--destination", "q", "--destination-type", "stream"},
	} {
		if r := f.ctl(bad...); r.code != exitUsage {
			t.Errorf("%v: exit %d, stderr %q", bad, r.code, r.stderr)
		}
	}
}

func TestDeleteBindingFindsPropertiesKey(t *testing.T) {
	f := newFakeAPI(t)
	list := `[
	 {"source":"ex","vhost":"/","destination":"q1","destination_type":"queue","routing_key":"a.*","arguments":{},"properties_key":"a.%2A"},
	 {"source":"ex","vhost":"/","destination":"q1","destination_type":"queue","routing_key":"a.*","arguments":{"x":1},"properties_key":"a.%2A~9nmLZQ"},
	 {"source":"ex","vhost":"/","destination":"q1","destination_type":"queue","routing_key":"b","arguments":{},"properties_key":"b"}]`
	f.on("GET", "/api/bindings/%2F/e/ex/q/q1", reply{body: list})
	f.on("DELETE", "/api/bindings/%2F/e/ex/q/q1/a.%252A~9nmLZQ", reply{status: http.StatusNoContent})
	f.on("DELETE", "/api/bindings/%2F/e/ex/q/q1/b", reply{status: http.StatusNoContent})

	// Two bindings share the key: the arguments must say which.
	r := f.ctl("delete", "binding", "--source", "ex", "--destination", "q1", "--routing-key", "a.*")
	if r.code != exitUsage || !strings.Contains(r.stderr, "2 bindings match") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	f.ctl("delete", "binding", "--source", "ex", "--destination", "q1", "--routing-key", "a.*", "--arguments", `{"x":1}`).mustOK(t)
	if p := f.last().path; p != "/api/bindings/%2F/e/ex/q/q1/a.%252A~9nmLZQ" {
		t.Errorf("deleted %s", p)
	}
	f.ctl("delete", "binding", "--source", "ex", "--destination", "q1", "--routing-key", "b").mustOK(t)
	r = f.ctl("delete", "binding", "--source", "ex", "--destination", "q1", "--routing-key", "zzz")
	if r.code != exitFailed || !strings.Contains(r.stderr, `no binding from exchange "ex" to queue "q1" with routing key "zzz"`) {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	// --properties-key skips the lookup.
	before := len(f.requests())
	f.ctl("delete", "binding", "--source", "ex", "--destination", "q1", "--properties-key", "b").mustOK(t)
	if n := len(f.requests()) - before; n != 1 {
		t.Errorf("%d requests with --properties-key, want 1", n)
	}
}

func TestPublish(t *testing.T) {
	f := newFakeAPI(t)
	f.on("POST", "/api/exchanges/%2F/amq.default/publish", reply{file: "exchange-publish"})
	f.on("POST", "/api/exchanges/v/ex/publish", reply{file: "exchange-publish-unrouted"})

	r := f.ctl("publish", "--routing-key", "orders", "--payload", "hello", "--persistent",
		"--property", "content_type=text/plain", "--header", "n=1", "--header", "s=x").mustOK(t)
	if !strings.Contains(r.stdout, "published and routed") {
		t.Errorf("stdout %q", r.stdout)
	}
	want := map[string]any{
		"routing_key": "orders", "payload": "hello", "payload_encoding": "string",
		"properties": map[string]any{"delivery_mode": 2.0, "content_type": "text/plain", "headers": map[string]any{"n": 1.0, "s": "x"}},
	}
	if body := bodyOf(t, f.last()); !reflect.DeepEqual(body, want) {
		t.Errorf("body %v\nwant %v", body, want)
	}

	// Binary from stdin travels base64-encoded; not routed is said plainly.
	bin := "\xff\x00\x01binary"
	r = cli(t, bin, "--url", f.srv.URL, "--vhost", "v", "publish", "--exchange", "ex", "--payload-file", "-").mustOK(t)
	if !strings.Contains(r.stdout, "NOT routed") {
		t.Errorf("stdout %q", r.stdout)
	}
	body := bodyOf(t, f.last())
	if body["payload_encoding"] != "base64" || body["payload"] != base64.StdEncoding.EncodeToString([]byte(bin)) {
		t.Errorf("body %v", body)
	}
	r = f.ctl("--format", "json", "--vhost", "v", "publish", "--exchange", "ex").mustOK(t)
	if strings.TrimSpace(r.stdout) != "{\n  \"routed\": false\n}" {
		t.Errorf("JSON stdout %q", r.stdout)
	}
	file := filepath.Join(t.TempDir(), "payload.txt")
	if err := os.WriteFile(file, []byte("from a file"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.ctl("publish", "--routing-key", "q", "--payload-file", file).mustOK(t)
	if body := bodyOf(t, f.last()); body["payload"] != "from a file" {
		t.Errorf("body %v", body)
	}
	if r := f.ctl("publish", "--payload", "a", "--payload-file", file); r.code != exitUsage {
		t.Errorf("both payload flags: exit %d", r.code)
	}
}

func TestGet(t *testing.T) {
	f := newFakeAPI(t)
	f.on("POST", "/api/queues/%2F/warrenctl-recorder-get/get", reply{file: "queue-get"})
	f.on("POST", "/api/queues/%2F/empty/get", reply{body: "[]"})
	r := f.ctl("get", "warrenctl-recorder-get", "--count", "5", "--ackmode", "ack_requeue_false").mustOK(t)
	rows := table(r.stdout)
	if len(rows) != 2 || rows[1][0] != "warrenctl-recorder-get" || rows[1][len(rows[1])-1] != "hello" {
		t.Errorf("table:\n%s", r.stdout)
	}
	want := map[string]any{"count": 5.0, "ackmode": "ack_requeue_false", "encoding": "auto"}
	if body := bodyOf(t, f.last()); !reflect.DeepEqual(body, want) {
		t.Errorf("body %v, want %v", body, want)
	}
	r = f.ctl("get", "empty").mustOK(t)
	if !strings.Contains(r.stdout, "is empty") {
		t.Errorf("stdout %q", r.stdout)
	}
	if body := bodyOf(t, f.last()); body["ackmode"] != "ack_requeue_true" || body["count"] != 1.0 {
		t.Errorf("defaults: %v", body)
	}
	for _, bad := range [][]string{{"get", "q", "--ackmode", "nope"}, {"get", "q", "--count", "0"}, {"get"}, {"get", "a", "b"}} {
		if r := f.ctl(bad...); r.code != exitUsage {
			t.Errorf("%v: exit %d", bad, r.code)
		}
	}
}

func TestCloseConnection(t *testing.T) {
	f := newFakeAPI(t)
	name := "127.0.0.1:41112 -> 127.0.0.1:5672"
	f.on("DELETE", "/api/connections/127.0.0.1:41112%20-%3E%20127.0.0.1:5672", reply{status: http.StatusNoContent})
	f.ctl("close", "connection", name, "--reason", "maintenance").mustOK(t)
	if got := f.last().header.Get("X-Reason"); got != "maintenance" {
		t.Errorf("X-Reason %q", got)
	}
	f.ctl("close", "connection", name).mustOK(t)
	if got := f.last().header.Get("X-Reason"); got != "" {
		t.Errorf("X-Reason %q without --reason", got)
	}
}

func TestExportAndImport(t *testing.T) {
	f := newFakeAPI(t)
	f.on("GET", "/api/definitions", reply{file: "definitions"})
	f.on("GET", "/api/definitions/%2F", reply{file: "definitions-vhost"})
	f.on("POST", "/api/definitions", reply{status: http.StatusNoContent})
	f.on("POST", "/api/definitions/%2F", reply{status: http.StatusNoContent})
	dir := t.TempDir()

	file := filepath.Join(dir, "defs.json")
	r := f.ctl("export", file).mustOK(t)
	if !strings.Contains(r.stdout, "Exported definitions to "+file) {
		t.Errorf("stdout %q", r.stdout)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, data, fixture(t, "definitions")) {
		t.Errorf("exported file differs from the API's answer")
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("exported file mode %v (%v); definitions hold password hashes", st.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".defs.json.*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// To stdout, and one vhost's with --vhost.
	r = f.ctl("export", "--vhost", "/").mustOK(t)
	if !jsonEqual(t, []byte(r.stdout), fixture(t, "definitions-vhost")) {
		t.Errorf("stdout export differs:\n%s", r.stdout)
	}

	f.ctl("import", file).mustOK(t)
	req := f.last()
	if req.method != "POST" || req.path != "/api/definitions" || string(req.body) != string(data) {
		t.Errorf("import sent %s %s with %d bytes", req.method, req.path, len(req.body))
	}
	if ct := req.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	r = cli(t, string(fixture(t, "definitions-vhost")), "--url", f.srv.URL, "--vhost", "/", "import").mustOK(t)
	if !strings.Contains(r.stdout, "from standard input") || f.last().path != "/api/definitions/%2F" {
		t.Errorf("stdin import: %q to %s", r.stdout, f.last().path)
	}

	// Broken input fails before anything is sent.
	before := len(f.requests())
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"queues": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"import", bad}, {"import", filepath.Join(dir, "missing.json")}} {
		if r := f.ctl(args...); r.code != exitFailed || r.stderr == "" {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if n := len(f.requests()) - before; n != 0 {
		t.Errorf("%d requests sent for broken input", n)
	}
	// Export into a directory that does not exist.
	if r := f.ctl("export", filepath.Join(dir, "no", "such", "dir.json")); r.code != exitFailed {
		t.Errorf("export to a missing directory: exit %d", r.code)
	}
}

func TestUsersAndPermissions(t *testing.T) {
	f := newFakeAPI(t)
	f.on("PUT", "/api/users/alice", reply{status: http.StatusCreated})
	f.on("DELETE", "/api/users/alice", reply{status: http.StatusNoContent})
	f.on("PUT", "/api/permissions/rabbit%2Fhole/alice", reply{status: http.StatusCreated})

	r := f.ctl("add", "user", "alice", "s3cret", "--tags", "management,policymaker").mustOK(t)
	if !strings.Contains(r.stdout, `user "alice" created`) {
		t.Errorf("stdout %q", r.stdout)
	}
	if body := bodyOf(t, f.last()); !reflect.DeepEqual(body, map[string]any{"password": "s3cret", "tags": "management,policymaker"}) {
		t.Errorf("body %v", body)
	}
	cli(t, "from-stdin\n", "--url", f.srv.URL, "add", "user", "alice", "--password-stdin").mustOK(t)
	if body := bodyOf(t, f.last()); body["password"] != "from-stdin" {
		t.Errorf("body %v", body)
	}
	f.ctl("add", "user", "alice", "--password-hash", "AWAKRk4d").mustOK(t)
	if body := bodyOf(t, f.last()); body["password_hash"] != "AWAKRk4d" || body["password"] != nil {
		t.Errorf("body %v", body)
	}
	f.ctl("add", "user", "alice", "--no-password").mustOK(t)
	if body := bodyOf(t, f.last()); !reflect.DeepEqual(body, map[string]any{"tags": ""}) {
		t.Errorf("body %v", body)
	}
	for _, bad := range [][]string{{"add", "user", "alice"}, {"add", "user", "alice", "pw", "--no-password"}} {
		if r := f.ctl(bad...); r.code != exitUsage {
			t.Errorf("%v: exit %d", bad, r.code)
		}
	}
	f.ctl("delete", "user", "alice").mustOK(t)

	f.ctl("--vhost", "rabbit/hole", "set", "permissions", "alice", "^alice-.*", "", ".*").mustOK(t)
	if body := bodyOf(t, f.last()); !reflect.DeepEqual(body, map[string]any{"configure": "^alice-.*", "write": "", "read": ".*"}) {
		t.Errorf("body %v", body)
	}
	if r := f.ctl("set", "permissions", "alice", ".*"); r.code != exitUsage {
		t.Errorf("too few arguments: exit %d", r.code)
	}
}

func TestVhosts(t *testing.T) {
	f := newFakeAPI(t)
	f.on("PUT", "/api/vhosts/rabbit%2Fhole", reply{status: http.StatusCreated})
	f.on("DELETE", "/api/vhosts/rabbit%2Fhole", reply{status: http.StatusNoContent})
	f.ctl("add", "vhost", "rabbit/hole", "--description", "test").mustOK(t)
	if body := bodyOf(t, f.last()); body["description"] != "test" {
		t.Errorf("body %v", body)
	}
	f.ctl("delete", "vhost", "rabbit/hole").mustOK(t)
}

func TestStatus(t *testing.T) {
	f := newFakeAPI(t)
	f.on("GET", "/api/overview", reply{file: "overview"})
	f.on("GET", "/api/nodes", reply{file: "nodes"})
	out := f.ctl("status").mustOK(t).stdout
	for _, want := range []string{
		"Product:", "RabbitMQ 3.10.8", "Cluster:", "rabbit@vm", "Objects:", "exchanges=", "queues=",
		"Messages:", "Listeners:", "amqp [::]:5672", "Node rabbit@vm:", "memory ", "disk free", "no alarms",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	r := f.ctl("status", "--format", "json").mustOK(t)
	var doc map[string]any
	if err := decodeJSON([]byte(r.stdout), &doc, "status"); err != nil {
		t.Fatal(err)
	}
	if doc["overview"] == nil || doc["nodes"] == nil {
		t.Errorf("JSON status keys: %v", sortedKeys(doc))
	}

	// Without the monitoring tag /api/nodes is refused: the overview still
	// prints and the refusal is reported.
	f.on("GET", "/api/nodes", reply{status: http.StatusUnauthorized, body: `{"error":"not_authorised","reason":"Not monitor user"}`})
	r = f.ctl("status").mustOK(t)
	if !strings.Contains(r.stdout, "Product:") || !strings.Contains(r.stderr, "node details unavailable") || !strings.Contains(r.stderr, "Not monitor user") {
		t.Errorf("stdout %q\nstderr %q", r.stdout, r.stderr)
	}
}

func TestAlarmsAndHealth(t *testing.T) {
	f := newFakeAPI(t)
	f.on("GET", "/api/health/checks/alarms", reply{file: "health-alarms"})
	f.on("GET", "/api/health/checks/local-alarms", reply{file: "health-alarms"})
	f.on("GET", "/api/health/checks/virtual-hosts", reply{file: "health-virtual-hosts"})
	f.on("GET", "/api/health/checks/port-listener/5672", reply{body: `{"status":"ok","port":5672}`})

	if r := f.ctl("alarms").mustOK(t); r.stdout != "No alarms in effect\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	r := f.ctl("health").mustOK(t)
	for _, c := range healthChecks {
		if !strings.Contains(r.stdout, c) {
			t.Errorf("health output lacks %s:\n%s", c, r.stdout)
		}
	}
	f.ctl("health", "port-listener", "5672").mustOK(t)

	f.on("GET", "/api/health/checks/alarms", reply{status: http.StatusServiceUnavailable, file: "health-alarms-failed"})
	r = f.ctl("alarms")
	if r.code != exitUnhealthy || !strings.Contains(r.stdout, "Alarms in effect:") || !strings.Contains(r.stdout, "memory alarm on node rabbit@vm") {
		t.Errorf("exit %d\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
	}
	if r.stderr != "" {
		t.Errorf("a failed health check is a result, not an error: stderr %q", r.stderr)
	}
	r = f.ctl("health")
	if r.code != exitUnhealthy || !strings.Contains(r.stdout, "alarms                   FAILED: There are alarms in effect in the cluster") {
		t.Errorf("exit %d\nstdout %q", r.code, r.stdout)
	}
	r = f.ctl("--format", "json", "alarms")
	if r.code != exitUnhealthy || !jsonEqual(t, []byte(r.stdout), fixture(t, "health-alarms-failed")) {
		t.Errorf("exit %d\nstdout %q", r.code, r.stdout)
	}
	// A check the API does not have is an error, not a failed check.
	r = f.ctl("health", "no-such-check")
	if r.code != exitFailed || !strings.Contains(r.stderr, "404") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}
