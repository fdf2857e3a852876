package mgmt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sharedDefinitions are the definitions files of testdata/definitions at the
// repository root: one exported from RabbitMQ 3.10.8, the others written by
// hand to the 3.11, 3.12, 3.13, 4.0 and 4.1 export formats (see its README).
var sharedDefinitions = []struct {
	file string
	// metadata is set when the format carries vhost metadata (the 3.12
	// rabbitmqctl export, and 3.13 and later; 3.10's and 3.11's HTTP API
	// exports have names only).
	metadata bool
	// policies are the policies queues must have: those of the newer keys
	// and apply-to values each version's file adds.
	policies map[string]string
}{
	{"rabbitmq-3.10.8.json", false, nil},
	{"rabbitmq-3.11.28.json", false, map[string]string{"seams-orders/orders.quorum": "qq-tuning", "seams-events/events.audit": "cq-v2",
		"seams-events/events.stream": "retention"}},
	{"rabbitmq-3.12.14.json", true, map[string]string{"seams-orders/orders.quorum": "qq-tuning", "seams-events/events.audit": "cq-v2"}},
	{"rabbitmq-3.13.7.json", true, nil},
	// 4.0's policies select by queue type: qq-tuning (quorum_queues, the
	// highest priority on ^orders\.) leaves orders.classic to ttl-and-dlx.
	{"rabbitmq-4.0.9.json", true, map[string]string{"seams-orders/orders.quorum": "qq-tuning", "seams-orders/orders.dead": "qq-tuning",
		"seams-orders/orders.classic": "ttl-and-dlx", "seams-events/events.audit": "cq-v2", "seams-events/events.stream": "stream-filters"}},
	{"rabbitmq-4.1.0.json", true, nil},
}

// TestMgmtImportsSharedDefinitions imports each RabbitMQ version's
// definitions into a fresh broker and checks that every kind of object they
// hold arrived: users log in over AMQP with their RabbitMQ password hashes,
// and vhosts, permissions, topic permissions, policies, operator policies,
// limits, global parameters, queues, exchanges and bindings are there.
func TestMgmtImportsSharedDefinitions(t *testing.T) {
	for _, fx := range sharedDefinitions {
		t.Run(fx.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("..", "testdata", "definitions", fx.file))
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t)
			e.must(e.do("POST", "/api/definitions", body), 204, "import")
			checkSharedDefinitions(t, e)
			checkVhostMetadata(t, e, fx.metadata)
			checkParametersKept(t, e)
			checkQueuePolicies(t, e, fx.policies)
		})
	}
}

func checkSharedDefinitions(t *testing.T, e *env) {
	t.Helper()
	addr := e.srv.Addr().String()
	// The hashes were made by RabbitMQ 3.10.8 for these passwords.
	e.dial("amqp://seams-app:s3cret-app@" + addr + "/seams-orders")
	e.dial("amqp://seams-admin:s3cret-admin@" + addr + "/seams-orders")
	admin := e.must(e.get("/api/users/seams-admin"), 200, "user").object(t)
	if tags := admin["tags"].([]any); len(tags) != 1 || tags[0] != "administrator" {
		t.Errorf("seams-admin tags %v", admin["tags"])
	}
	perm := e.must(e.get("/api/permissions/seams-orders/seams-app"), 200, "permission").object(t)
	if perm["configure"] != `^app\.` || perm["write"] != `^(app\.|orders)` {
		t.Errorf("seams-app permission %v", perm)
	}
	if tp := e.must(e.get("/api/topic-permissions/seams-orders/seams-app"), 200, "topic permission").array(t); len(tp) != 1 {
		t.Errorf("topic permissions %v", tp)
	}
	for _, path := range []string{
		"/api/policies/seams-orders/ttl-and-dlx", "/api/policies/seams-events/retention",
		"/api/operator-policies/seams-orders/cap",
		"/api/queues/seams-orders/orders.classic", "/api/queues/seams-orders/orders.quorum",
		"/api/queues/seams-orders/app.transient", "/api/queues/seams-events/events.stream",
		"/api/exchanges/seams-orders/orders.headers", "/api/exchanges/seams-orders/orders.dlx",
	} {
		e.must(e.get(path), 200, path)
	}
	q := e.get("/api/queues/seams-orders/orders.classic").object(t)
	if num(t, field(q, "arguments.x-max-priority")) != 10 || q["policy"] != "ttl-and-dlx" || q["operator_policy"] != "cap" {
		t.Errorf("orders.classic %v", q)
	}
	if s := e.get("/api/queues/seams-events/events.stream").object(t); s["type"] != "stream" {
		t.Errorf("events.stream type %v", s["type"])
	}
	if n := len(e.get("/api/bindings/seams-orders/e/orders.topic/e/orders.direct").array(t)); n != 1 {
		t.Errorf("%d e2e bindings orders.topic → orders.direct", n)
	}
	if n := len(e.get("/api/bindings/seams-orders/e/orders.headers/q/orders.classic").array(t)); n != 1 {
		t.Errorf("%d headers bindings", n)
	}
}

// checkQueuePolicies checks the policy each queue has (vhost/name keys).
func checkQueuePolicies(t *testing.T, e *env, want map[string]string) {
	t.Helper()
	for q, p := range want {
		vh, name, _ := strings.Cut(q, "/")
		if got := e.must(e.get("/api/queues/"+vh+"/"+name), 200, q).object(t)["policy"]; got != p {
			t.Errorf("%s: policy %v, want %s", q, got, p)
		}
	}
}

func checkVhostMetadata(t *testing.T, e *env, exported bool) {
	t.Helper()
	v := e.must(e.get("/api/vhosts/seams-orders"), 200, "vhost").object(t)
	want := map[string]any{"description": "", "default_queue_type": "undefined"}
	if exported {
		want = map[string]any{"description": "order processing", "default_queue_type": "quorum"}
	}
	for k, w := range want {
		if v[k] != w {
			t.Errorf("vhost seams-orders %s = %v, want %v", k, v[k], w)
		}
	}
	if tags, _ := v["tags"].([]any); exported && (len(tags) != 2 || tags[0] != "production") {
		t.Errorf("vhost seams-orders tags %v", v["tags"])
	}
	// orders.dead is declared without x-queue-type: the vhost's default
	// queue type, when the file has one, makes it a quorum queue.
	wantType := "classic"
	if exported {
		wantType = "quorum"
	}
	if q := e.get("/api/queues/seams-orders/orders.dead").object(t); q["type"] != wantType {
		t.Errorf("orders.dead type %v, want %s", q["type"], wantType)
	}
	// The export carries the default queue type again, so it survives a
	// round trip.
	if !exported {
		return
	}
	for _, v := range e.must(e.get("/api/definitions"), 200, "export").object(t)["vhosts"].([]any) {
		vm := v.(map[string]any)
		if vm["name"] == "seams-orders" && (vm["default_queue_type"] != "quorum" || field(vm, "metadata.default_queue_type") != "quorum") {
			t.Errorf("exported vhost seams-orders %v", vm)
		}
	}
}

// Runtime and global parameters Warren does not act on (vhost-limits, a
// user's own global parameter) are kept and exported again.
func checkParametersKept(t *testing.T, e *env) {
	t.Helper()
	out := e.must(e.get("/api/definitions"), 200, "export").object(t)
	found := map[string]bool{}
	for _, p := range out["parameters"].([]any) {
		pm := p.(map[string]any)
		found[pm["component"].(string)+"/"+pm["name"].(string)] = true
	}
	for _, g := range out["global_parameters"].([]any) {
		found["global/"+g.(map[string]any)["name"].(string)] = true
	}
	for _, k := range []string{"vhost-limits/limits", "global/seams_note"} {
		if !found[k] {
			t.Errorf("%s missing from the export after the import: %v", k, found)
		}
	}
}
