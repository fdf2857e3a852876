package mgmt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/server"
)

// hostileNames once addressed other objects' files (see server/layout.go).
var hostileNames = []string{
	".", "..", "transient", "queues", "msgstore", "vhosts", "meta.db", "a/b",
	strings.Repeat("n", 200) + "A", strings.Repeat("n", 200) + "B", "Case", "case", "names\xff\xfe",
}

// escSeg percent-encodes a path segment, dots included, so neither the
// client nor any proxy folds "." or ".." away.
func escSeg(s string) string { return strings.ReplaceAll(url.PathEscape(s), ".", "%2E") }

// restartEnv closes e and starts a broker and API on the same data directory.
func restartEnv(t *testing.T, e *env, dir string) *env {
	t.Helper()
	e.client.CloseIdleConnections()
	if err := e.api.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	return newEnv(t, func(s *server.Config, _ *Config) { s.DataDir = dir })
}

// publishPersistent stores one persistent message in queue of vhost over
// AMQP, confirmed.
func (e *env) publishPersistent(vhost, queue string) {
	e.t.Helper()
	c, err := amqp091.DialConfig(e.amqpURL, amqp091.Config{Vhost: vhost})
	if err != nil {
		e.t.Fatalf("dial vhost %q: %v", vhost, err)
	}
	defer c.Close()
	ch := e.channel(c)
	if err := ch.Confirm(false); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conf, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte("m")})
	if err != nil {
		e.t.Fatal(err)
	}
	if ok, err := conf.WaitContext(ctx); !ok || err != nil {
		e.t.Fatalf("publish to %q in %q not confirmed: %v", queue, vhost, err)
	}
}

// queueMessages is the message count the API shows for a queue.
func (e *env) queueMessages(vhost, queue string) float64 {
	e.t.Helper()
	r := e.get("/api/queues/" + escSeg(vhost) + "/" + escSeg(queue))
	if r.status != 200 {
		e.t.Fatalf("queue %q in vhost %q: status %d %s", queue, vhost, r.status, r.body)
	}
	return num(e.t, r.object(e.t)["messages"])
}

// checkMetaDB fails unless meta.db is still in the data directory.
func checkMetaDB(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "meta.db")); err != nil {
		t.Fatal(err)
	}
}

func TestMgmtHostileNamesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, func(s *server.Config, _ *Config) { s.DataDir = dir })
	e.must(e.put("/api/queues/%2F/victim", map[string]any{"durable": true}), 201, "victim")
	e.publishPersistent("/", "victim")
	perm := map[string]any{"configure": ".*", "write": ".*", "read": ".*"}
	for _, name := range hostileNames {
		e.must(e.put("/api/vhosts/"+escSeg(name), nil), 201, "vhost "+name)
		e.must(e.put("/api/permissions/"+escSeg(name)+"/guest", perm), 201, "permission "+name)
		e.must(e.put("/api/queues/"+escSeg(name)+"/q", map[string]any{"durable": true}), 201, "queue in vhost "+name)
		e.publishPersistent(name, "q")
		e.must(e.put("/api/queues/%2F/"+escSeg(name), map[string]any{"durable": true}), 201, "queue "+name)
		e.publishPersistent("/", name)
	}
	e = restartEnv(t, e, dir)
	for _, name := range hostileNames {
		if n := e.queueMessages(name, "q"); n != 1 {
			t.Fatalf("vhost %q: %v messages after restart, want 1", name, n)
		}
		if n := e.queueMessages("/", name); n != 1 {
			t.Fatalf("queue %q: %v messages after restart, want 1", name, n)
		}
	}
	for _, name := range []string{".", ".."} {
		e.must(e.do("DELETE", "/api/queues/%2F/"+escSeg(name), nil), 204, "delete queue "+name)
		e.must(e.do("DELETE", "/api/vhosts/"+escSeg(name), nil), 204, "delete vhost "+name)
	}
	e = restartEnv(t, e, dir)
	checkMetaDB(t, dir)
	if n := e.queueMessages("/", "victim"); n != 1 {
		t.Fatalf("victim: %v messages after the hostile deletes, want 1", n)
	}
	for _, name := range hostileNames[2:] {
		if e.queueMessages(name, "q") != 1 || e.queueMessages("/", name) != 1 {
			t.Fatalf("%q lost its message with the hostile deletes", name)
		}
	}
}

func TestMgmtHostileNamesInDefinitions(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, func(s *server.Config, _ *Config) { s.DataDir = dir })
	e.must(e.put("/api/queues/%2F/victim", map[string]any{"durable": true}), 201, "victim")
	e.publishPersistent("/", "victim")
	// JSON carries only UTF-8: the invalid name arrives as U+FFFD, a name
	// like any other.
	var defs struct {
		Vhosts      []map[string]any `json:"vhosts"`
		Permissions []map[string]any `json:"permissions"`
		Queues      []map[string]any `json:"queues"`
	}
	for _, name := range hostileNames {
		defs.Vhosts = append(defs.Vhosts, map[string]any{"name": name})
		defs.Permissions = append(defs.Permissions, map[string]any{"user": "guest", "vhost": name, "configure": ".*", "write": ".*", "read": ".*"})
		defs.Queues = append(defs.Queues,
			map[string]any{"name": "q", "vhost": name, "durable": true, "auto_delete": false, "arguments": map[string]any{}},
			map[string]any{"name": name, "vhost": "/", "durable": true, "auto_delete": false, "arguments": map[string]any{}})
	}
	body, err := json.Marshal(defs)
	if err != nil {
		t.Fatal(err)
	}
	e.must(e.do("POST", "/api/definitions", body), 204, "import")
	names := make([]string, len(hostileNames))
	for i, name := range hostileNames {
		names[i] = strings.ToValidUTF8(name, "\uFFFD\uFFFD")
		e.publishPersistent(names[i], "q")
	}
	e = restartEnv(t, e, dir)
	for _, name := range names {
		if n := e.queueMessages(name, "q"); n != 1 {
			t.Fatalf("imported vhost %q: %v messages after restart, want 1", name, n)
		}
		e.queueMessages("/", name)
	}
	e.must(e.do("DELETE", "/api/vhosts/%2E%2E", nil), 204, "delete vhost ..")
	e.must(e.do("DELETE", "/api/queues/%2F/%2E", nil), 204, "delete queue .")
	e = restartEnv(t, e, dir)
	checkMetaDB(t, dir)
	if n := e.queueMessages("/", "victim"); n != 1 {
		t.Fatalf("victim: %v messages after the hostile deletes, want 1", n)
	}
	for _, name := range names[2:] {
		if n := e.queueMessages(name, "q"); n != 1 {
			t.Fatalf("imported vhost %q: %v messages after the deletes, want 1", name, n)
		}
	}
}

func TestMgmtFailedVhostCreateIsNotSaved(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, func(s *server.Config, _ *Config) { s.DataDir = dir })
	// A file where the vhost's directory goes: the create cannot make it.
	blocker := filepath.Join(dir, "vhosts", nameDirForTest("blocked"))
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.must(e.put("/api/vhosts/blocked", nil), 500, "create over a blocked directory")
	e.must(e.get("/api/vhosts/blocked"), 404, "the failed vhost")
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	e = restartEnv(t, e, dir)
	e.must(e.get("/api/vhosts/blocked"), 404, "the failed vhost after a restart")
	e.must(e.put("/api/vhosts/blocked", nil), 201, "create once the way is clear")
}

// nameDirForTest is server's directory name for a vhost: the hex SHA-256.
func nameDirForTest(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}
