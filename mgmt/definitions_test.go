package mgmt

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/server"
)

// TestMgmtDefinitionsFromRabbitMQ imports the definitions exported from
// RabbitMQ 3.10 by record.sh: its users keep their password hashes and log
// in over AMQP, and the topology, policies and operator policies apply.
func TestMgmtDefinitionsFromRabbitMQ(t *testing.T) {
	exported, err := os.ReadFile(filepath.Join(goldenDir, "definitions.json"))
	if err != nil {
		t.Fatalf("recorded definitions: %v", err)
	}
	e := newEnv(t)
	e.must(e.do("POST", "/api/definitions", exported), 204, "import")
	// alice's hash was made by RabbitMQ for the password s3cret.
	e.dial("amqp://alice:s3cret@" + e.srv.Addr().String() + "/")
	if _, err := amqp091.Dial("amqp://alice:wrong@" + e.srv.Addr().String() + "/"); err == nil {
		t.Error("alice logged in with a wrong password")
	}
	// guest's hash was RabbitMQ's too, still for the password guest.
	e.dial("")
	if _, err := amqp091.Dial("amqp://nopass:@" + e.srv.Addr().String() + "/"); err == nil {
		t.Error("the user without a password logged in")
	}
	alice := e.must(e.get("/api/users/alice"), 200, "alice").object(t)
	if tags := alice["tags"].([]any); len(tags) != 1 || tags[0] != "monitoring" {
		t.Errorf("alice tags %v", alice["tags"])
	}
	q1 := e.must(e.get("/api/queues/%2F/q1"), 200, "q1").object(t)
	if num(t, field(q1, "arguments.x-max-length")) != 1000 || q1["policy"] != "ttl" || q1["operator_policy"] != "cap" ||
		num(t, field(q1, "effective_policy_definition.max-length")) != 2000 {
		t.Errorf("q1 %v", q1)
	}
	e.must(e.get("/api/queues/rabbit%2Fhole/q3"), 200, "q3")
	ex2 := e.must(e.get("/api/exchanges/%2F/ex2"), 200, "ex2").object(t)
	if ex2["type"] != "fanout" || field(ex2, "arguments.alternate-exchange") != "amq.fanout" {
		t.Errorf("ex2 %v", ex2)
	}
	if n := len(e.get("/api/bindings/%2F/e/ex1/e/ex2").array(t)); n != 1 {
		t.Errorf("%d e2e bindings", n)
	}
	tp := e.must(e.get("/api/topic-permissions/%2F/alice"), 200, "topic permissions").array(t)
	if len(tp) != 1 {
		t.Errorf("topic permissions %v", tp)
	}
	// The export carries the imported hashes, so it round-trips into
	// another broker.
	out := e.must(e.get("/api/definitions"), 200, "export").object(t)
	found := false
	for _, u := range out["users"].([]any) {
		m := u.(map[string]any)
		if m["name"] == "alice" {
			found = true
			if m["password_hash"] != "/1NKgY+LS0O9X0+u/rZS+0SAf8jvsm7OD7WjeqnHITAKjdwz" {
				t.Errorf("exported hash %v", m["password_hash"])
			}
		}
	}
	if !found {
		t.Fatal("alice not exported")
	}
	e2 := newEnv(t)
	e2.must(e2.do("POST", "/api/definitions", e.get("/api/definitions").body), 204, "re-import")
	e2.dial("amqp://alice:s3cret@" + e2.srv.Addr().String() + "/")
	e2.must(e2.get("/api/queues/rabbit%2Fhole/q3"), 200, "q3 after round trip")
	if got := e2.get("/api/cluster-name").object(t)["name"]; got != "rabbit@vm" && got != testNode {
		t.Errorf("cluster name %v", got)
	}
}

// TestMgmtDefinitionsAllOrNothing checks that a file with one bad object
// applies nothing.
func TestMgmtDefinitionsAllOrNothing(t *testing.T) {
	e := newEnv(t)
	cases := map[string]string{
		"binding to a missing queue": `{"queues":[{"name":"ok","vhost":"/","durable":true,"auto_delete":false,"arguments":{}}],
			"bindings":[{"source":"amq.direct","vhost":"/","destination":"missing","destination_type":"queue","routing_key":"k","arguments":{}}]}`,
		"bad password hash": `{"users":[{"name":"u","password_hash":"***","tags":""}],
			"queues":[{"name":"ok","vhost":"/","durable":true,"auto_delete":false,"arguments":{}}]}`,
		"bad queue argument": `{"queues":[{"name":"ok","vhost":"/","durable":true,"auto_delete":false,"arguments":{}},
			{"name":"bad","vhost":"/","durable":true,"auto_delete":false,"arguments":{"x-message-ttl":"soon"}}]}`,
		"unknown vhost":         `{"queues":[{"name":"ok","vhost":"/","arguments":{}},{"name":"x","vhost":"nosuch","arguments":{}}]}`,
		"bad policy":            `{"queues":[{"name":"ok","vhost":"/","arguments":{}}],"policies":[{"vhost":"/","name":"p","pattern":"(","definition":{"expires":1}}]}`,
		"bad exchange type":     `{"queues":[{"name":"ok","vhost":"/","arguments":{}}],"exchanges":[{"name":"x","vhost":"/","type":"nope","arguments":{}}]}`,
		"permission for nobody": `{"queues":[{"name":"ok","vhost":"/","arguments":{}}],"permissions":[{"user":"nobody","vhost":"/","configure":"","write":"","read":""}]}`,
		"wrong section type":    `{"queues":{"name":"ok"}}`,
		"wrong field type":      `{"queues":[{"name":"ok","vhost":"/","durable":"sometimes"}]}`,
	}
	for name, file := range cases {
		r := e.do("POST", "/api/definitions", file)
		if r.status != 400 || r.object(t)["error"] != "bad_request" {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
		if r := e.get("/api/queues/%2F/ok"); r.status != 404 {
			t.Fatalf("%s: a queue of the rejected file was created", name)
		}
	}
	if r := e.do("POST", "/api/definitions", `{"queues":`); r.status != 400 || r.object(t)["reason"] != "failed_to_parse_json" {
		t.Errorf("malformed JSON: %d %s", r.status, r.body)
	}
}

func TestMgmtDefinitionsPerVhostAndUploadRefused(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/vhosts/v", ""), 201, "vhost")
	file := `{"queues":[{"name":"q","vhost":"elsewhere","durable":true,"auto_delete":false,"arguments":{}}],
		"exchanges":[{"name":"x","vhost":"elsewhere","type":"topic","durable":true,"auto_delete":false,"internal":false,"arguments":{}}],
		"bindings":[{"source":"x","vhost":"elsewhere","destination":"q","destination_type":"queue","routing_key":"#","arguments":{}}],
		"policies":[{"vhost":"elsewhere","name":"p","pattern":"^q$","apply-to":"queues","definition":{"max-length":9},"priority":0}]}`
	e.must(e.do("POST", "/api/definitions/v", file), 204, "per-vhost import")
	if q := e.must(e.get("/api/queues/v/q"), 200, "q").object(t); q["policy"] != "p" {
		t.Errorf("per-vhost policy %v", q["policy"])
	}
	export := e.must(e.get("/api/definitions/v"), 200, "per-vhost export").object(t)
	if _, ok := export["users"]; ok {
		t.Error("per-vhost export has users")
	}
	if _, ok := export["vhosts"]; ok {
		t.Error("per-vhost export has vhosts")
	}
	if len(export["bindings"].([]any)) != 1 || len(export["queues"].([]any)) != 1 {
		t.Errorf("per-vhost export %v", export)
	}
	full := e.get("/api/definitions?download=defs.json")
	if !strings.Contains(full.header.Get("Content-Disposition"), "defs.json") {
		t.Errorf("download header %q", full.header.Get("Content-Disposition"))
	}
	globals := full.object(t)["global_parameters"].([]any)
	hasCluster := false
	for _, g := range globals {
		if g.(map[string]any)["name"] == "cluster_name" {
			hasCluster = true
		}
	}
	if !hasCluster {
		t.Errorf("global_parameters lack cluster_name: %v", globals)
	}
	// RabbitMQ's web UI uploads definitions as a multipart form field
	// "file"; Warren refuses multipart (a cross-site form can send it) and
	// its UI posts JSON.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", "defs.json")
	if err != nil {
		t.Fatalf("multipart: %v", err)
	}
	fw.Write([]byte(`{"vhosts":[{"name":"uploaded"}]}`))
	mw.Close()
	r := e.do("POST", "/api/definitions", buf.Bytes(), withHeader("Content-Type", mw.FormDataContentType()))
	e.must(r, 415, "multipart upload")
	e.must(e.get("/api/vhosts/uploaded"), 404, "vhost of a refused upload")
	if r := e.do("POST", "/api/definitions/nosuch", `{}`); r.status != 404 {
		t.Errorf("import into a missing vhost: %d", r.status)
	}
	if r := e.get("/api/definitions/nosuch"); r.status != http.StatusNotFound {
		t.Errorf("export of a missing vhost: %d", r.status)
	}
}

// TestMgmtDefinitionsSurviveRestart imports definitions, restarts the
// broker on the same data directory and finds them again, policies included.
func TestMgmtDefinitionsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	file := `{"users":[{"name":"app","password_hash":"kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR","tags":"management"}],
		"queues":[{"name":"dq","vhost":"/","durable":true,"auto_delete":false,"arguments":{}}],
		"policies":[{"vhost":"/","name":"p","pattern":"^dq$","apply-to":"queues","definition":{"max-length":4},"priority":0}]}`
	first := newEnv(t, func(s *server.Config, _ *Config) { s.DataDir = dir })
	first.must(first.do("POST", "/api/definitions", file), 204, "import")
	first.api.Close()
	first.srv.Close()
	second := newEnv(t, func(s *server.Config, _ *Config) { s.DataDir = dir })
	q := second.must(second.get("/api/queues/%2F/dq"), 200, "queue after restart").object(t)
	if q["policy"] != "p" || num(t, field(q, "effective_policy_definition.max-length")) != 4 {
		t.Errorf("policy after restart: %v %v", q["policy"], q["effective_policy_definition"])
	}
	second.publishN("dq", 6)
	second.waitMessages("dq", 4)
	second.must(second.get("/api/users/app"), 200, "user after restart")
}

// TestMgmtDefinitionsQueueLimitAborts: an import that would take a vhost past
// its queue limit is refused with 400 and RabbitMQ 3.10's reason, and nothing
// of it is applied (RabbitMQ creates nothing either).
func TestMgmtDefinitionsQueueLimitAborts(t *testing.T) {
	e := newEnv(t, func(s *server.Config, _ *Config) { s.MaxQueuesPerVhost = 2 })
	file := `{"exchanges":[{"name":"x","vhost":"/","type":"direct","durable":true,"auto_delete":false,"internal":false,"arguments":{}}],
		"queues":[{"name":"q1","vhost":"/","durable":true,"auto_delete":false,"arguments":{}},
		{"name":"q2","vhost":"/","durable":true,"auto_delete":false,"arguments":{}},
		{"name":"q3","vhost":"/","durable":true,"auto_delete":false,"arguments":{}}]}`
	r := e.do("POST", "/api/definitions", file)
	want := "Adding 3 queue(s) to virtual host \"/\" would exceed the limit of 2 queue(s).\n\n" +
		"This virtual host currently has 0 queue(s) defined.\n\nImport aborted!"
	if body := r.object(t); r.status != 400 || body["error"] != "bad_request" || body["reason"] != want {
		t.Fatalf("import past the queue limit: %d %s", r.status, r.body)
	}
	if r := e.get("/api/exchanges/%2F/x"); r.status != 404 {
		t.Fatalf("the exchange of the refused import exists: %d", r.status)
	}
	if qs := e.get("/api/queues/%2F").array(t); len(qs) != 0 {
		t.Fatalf("queues of the refused import exist: %v", qs)
	}
}
