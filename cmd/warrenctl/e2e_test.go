package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
)

// broker is a Warren broker with its management API, both on 127.0.0.1:0.
type broker struct {
	srv     *server.Server
	api     *mgmt.API
	url     string // management API
	amqpURL string
}

func startBroker(t *testing.T) *broker {
	t.Helper()
	level := slog.LevelWarn
	if os.Getenv("WARREN_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	scfg := server.DefaultConfig()
	scfg.AMQPListen = "127.0.0.1:0"
	scfg.DataDir = t.TempDir()
	scfg.MemoryHighWatermark = 0
	scfg.Logger = log
	srv, err := server.New(scfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("server.Start: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	mcfg := mgmt.DefaultConfig()
	mcfg.Listen = "127.0.0.1:0"
	mcfg.Server = srv
	mcfg.Logger = log
	mcfg.StatsInterval = 20 * time.Millisecond
	api, err := mgmt.New(mcfg)
	if err != nil {
		t.Fatalf("mgmt.New: %v", err)
	}
	if err := api.Start(); err != nil {
		api.Close()
		t.Fatalf("mgmt.Start: %v", err)
	}
	t.Cleanup(func() { api.Close() })
	return &broker{
		srv: srv, api: api, url: "http://" + api.Addr().String(),
		amqpURL: "amqp://guest:guest@" + srv.Addr().String(),
	}
}

// ctl runs warrenctl against the broker's API.
func (b *broker) ctl(t *testing.T, args ...string) result {
	t.Helper()
	return cli(t, "", append([]string{"--url", b.url}, args...)...)
}

// eventually re-runs check until it passes or 5 s have passed; statistics
// reach the API through a sampler.
func eventually(t *testing.T, check func() error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// listJSON runs "list KIND --format json" with extra args and decodes it.
func (b *broker) listJSON(t *testing.T, kind string, args ...string) []map[string]any {
	t.Helper()
	r := b.ctl(t, append([]string{"--format", "json", "list", kind}, args...)...).mustOK(t)
	var out []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("list %s: %v\n%s", kind, err, r.stdout)
	}
	return out
}

func named(items []map[string]any, key, value string) map[string]any {
	for _, it := range items {
		if it[key] == value {
			return it
		}
	}
	return nil
}

func TestE2ETopologyAndMessages(t *testing.T) {
	b := startBroker(t)
	vh := []string{"--vhost", "rabbit/hole"}
	b.ctl(t, "add", "vhost", "rabbit/hole").mustOK(t)
	b.ctl(t, append(vh, "set", "permissions", "guest", ".*", ".*", ".*")...).mustOK(t)

	r := b.ctl(t, append(vh, "declare", "queue", "orders", "--arg", "x-max-length=100")...).mustOK(t)
	if !strings.Contains(r.stdout, "declared") {
		t.Errorf("declare: %q", r.stdout)
	}
	if r := b.ctl(t, append(vh, "declare", "queue", "orders", "--arg", "x-max-length=100")...).mustOK(t); !strings.Contains(r.stdout, "already exists") {
		t.Errorf("redeclare: %q", r.stdout)
	}
	r = b.ctl(t, append(vh, "declare", "queue", "orders", "--arg", "x-max-length=5")...)
	if r.code != exitFailed || !strings.Contains(r.stderr, "400 Bad Request") || !strings.Contains(r.stderr, "inequivalent arg") {
		t.Errorf("inequivalent redeclare: exit %d, %q", r.code, r.stderr)
	}
	q := named(b.listJSON(t, "queues", vh...), "name", "orders")
	if q == nil || q["vhost"] != "rabbit/hole" || fmt.Sprint(q["arguments"]) != "map[x-max-length:100]" {
		t.Fatalf("queue as listed: %v", q)
	}

	b.ctl(t, append(vh, "declare", "exchange", "events", "--type", "topic")...).mustOK(t)
	b.ctl(t, append(vh, "declare", "binding", "--source", "events", "--destination", "orders", "--routing-key", "order.*")...).mustOK(t)
	if named(b.listJSON(t, "bindings", vh...), "source", "events") == nil {
		t.Fatal("binding not listed")
	}

	r = b.ctl(t, append(vh, "publish", "--exchange", "events", "--routing-key", "order.new", "--payload", "hi")...).mustOK(t)
	if !strings.Contains(r.stdout, "routed") || strings.Contains(r.stdout, "NOT") {
		t.Errorf("publish: %q", r.stdout)
	}
	if r := b.ctl(t, append(vh, "publish", "--exchange", "events", "--routing-key", "nothing")...).mustOK(t); !strings.Contains(r.stdout, "NOT routed") {
		t.Errorf("unroutable publish: %q", r.stdout)
	}
	// The default look: the message stays.
	for range 2 {
		r = b.ctl(t, append(vh, "get", "orders")...).mustOK(t)
		if rows := table(r.stdout); len(rows) != 2 || rows[1][len(rows[1])-1] != "hi" {
			t.Fatalf("get:\n%s", r.stdout)
		}
	}
	eventually(t, func() error {
		q := named(b.listJSON(t, "queues", vh...), "name", "orders")
		if fmt.Sprint(q["messages_ready"]) != "1" {
			return fmt.Errorf("messages_ready %v, want 1", q["messages_ready"])
		}
		return nil
	})
	b.ctl(t, append(vh, "purge", "queue", "orders")...).mustOK(t)
	if r := b.ctl(t, append(vh, "get", "orders")...).mustOK(t); !strings.Contains(r.stdout, "is empty") {
		t.Errorf("get after purge: %q", r.stdout)
	}

	b.ctl(t, append(vh, "delete", "binding", "--source", "events", "--destination", "orders", "--routing-key", "order.*")...).mustOK(t)
	if named(b.listJSON(t, "bindings", vh...), "source", "events") != nil {
		t.Error("binding still listed after delete")
	}
	b.ctl(t, append(vh, "delete", "exchange", "events")...).mustOK(t)
	b.ctl(t, append(vh, "delete", "queue", "orders")...).mustOK(t)
	if r := b.ctl(t, append(vh, "delete", "queue", "orders")...); r.code != exitFailed || !strings.Contains(r.stderr, "404") {
		t.Errorf("deleting a missing queue: exit %d, %q", r.code, r.stderr)
	}
	b.ctl(t, "delete", "vhost", "rabbit/hole").mustOK(t)
	if named(b.listJSON(t, "vhosts"), "name", "rabbit/hole") != nil {
		t.Error("vhost still listed after delete")
	}
}

func TestE2EConnections(t *testing.T) {
	b := startBroker(t)
	conn, err := amqp091.DialConfig(b.amqpURL, amqp091.Config{Properties: amqp091.Table{"connection_name": "e2e-client"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("work", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume("work", "e2e-consumer", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	var name string
	eventually(t, func() error {
		conns := b.listJSON(t, "connections")
		if len(conns) != 1 {
			return fmt.Errorf("%d connections listed", len(conns))
		}
		name, _ = conns[0]["name"].(string)
		return nil
	})
	if r := b.ctl(t, "list", "channels").mustOK(t); !strings.Contains(r.stdout, name+" (1)") {
		t.Errorf("channels:\n%s", r.stdout)
	}
	if c := named(b.listJSON(t, "consumers"), "consumer_tag", "e2e-consumer"); c == nil {
		t.Error("consumer not listed")
	}

	b.ctl(t, "close", "connection", name, "--reason", "e2e says bye").mustOK(t)
	select {
	case e := <-closed:
		if e == nil || e.Code != 320 || !strings.Contains(e.Reason, "e2e says bye") {
			t.Errorf("client saw close %v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the connection was not closed")
	}
	// The client reads connection.close before the broker has finished
	// tearing the connection down, so wait until the list no longer shows it.
	eventually(t, func() error {
		if n := len(b.listJSON(t, "connections")); n != 0 {
			return fmt.Errorf("%d connections still listed", n)
		}
		return nil
	})
	if r := b.ctl(t, "close", "connection", name); r.code != exitFailed || !strings.Contains(r.stderr, "404") {
		t.Errorf("closing it again: exit %d, %q", r.code, r.stderr)
	}
}

func TestE2EDefinitionsUsersAndStatus(t *testing.T) {
	b := startBroker(t)
	b.ctl(t, "declare", "queue", "keep", "--arg", "x-message-ttl=60000").mustOK(t)
	b.ctl(t, "add", "user", "alice", "pw", "--tags", "management").mustOK(t)
	b.ctl(t, "set", "permissions", "alice", "^alice-.*", "^alice-.*", ".*").mustOK(t)
	if u := named(b.listJSON(t, "users"), "name", "alice"); u == nil || fmt.Sprint(u["tags"]) != "[management]" {
		t.Errorf("alice as listed: %v", u)
	}
	if p := named(b.listJSON(t, "permissions"), "user", "alice"); p == nil || p["configure"] != "^alice-.*" {
		t.Errorf("alice's permissions: %v", p)
	}
	// Alice may declare her own queues only.
	b.ctl(t, "--user", "alice", "--password", "pw", "declare", "queue", "alice-q").mustOK(t)
	if r := b.ctl(t, "--user", "alice", "--password", "pw", "declare", "queue", "bob-q"); r.code != exitFailed {
		t.Errorf("alice declaring bob-q: exit %d", r.code)
	}
	if r := b.ctl(t, "--user", "alice", "--password", "wrong", "list", "queues"); r.code != exitFailed || !strings.Contains(r.stderr, "401") {
		t.Errorf("wrong password: exit %d, %q", r.code, r.stderr)
	}

	file := filepath.Join(t.TempDir(), "defs.json")
	b.ctl(t, "export", file).mustOK(t)
	b.ctl(t, "delete", "queue", "keep").mustOK(t)
	b.ctl(t, "delete", "user", "alice").mustOK(t)
	b.ctl(t, "import", file).mustOK(t)
	if q := named(b.listJSON(t, "queues"), "name", "keep"); q == nil || fmt.Sprint(q["arguments"]) != "map[x-message-ttl:60000]" {
		t.Errorf("queue after import: %v", q)
	}
	b.ctl(t, "--user", "alice", "--password", "pw", "list", "queues").mustOK(t)

	r := b.ctl(t, "status").mustOK(t)
	for _, want := range []string{"Product:", "Warren", "Objects:", "queues=2"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := b.ctl(t, "alarms").mustOK(t); !strings.Contains(r.stdout, "No alarms") {
		t.Errorf("alarms: %q", r.stdout)
	}
	b.ctl(t, "health").mustOK(t)
	b.srv.SetMemoryHighWatermark(1)
	r = b.ctl(t, "alarms")
	if r.code != exitUnhealthy || !strings.Contains(r.stdout, "memory alarm") {
		t.Errorf("alarms with the memory alarm raised: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	b.srv.SetMemoryHighWatermark(0)
	b.ctl(t, "alarms").mustOK(t)

	if err := b.api.Close(); err != nil {
		t.Fatal(err)
	}
	if r := b.ctl(t, "status"); r.code != exitUnavailable || !strings.Contains(r.stderr, "connection refused") {
		t.Errorf("after the API closed: exit %d, %q", r.code, r.stderr)
	}
}

// TestE2EClusterStatusStandalone: cluster status of a standalone node
// shows it alone, in a table and as the API's JSON.
func TestE2EClusterStatusStandalone(t *testing.T) {
	b := startBroker(t)
	r := b.ctl(t, "cluster", "status").mustOK(t)
	name := b.srv.NodeName()
	if !strings.Contains(r.stdout, "Node:") || !strings.Contains(r.stdout, name+" (standalone)") ||
		!regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+`\s+alive\s+standalone`).MatchString(r.stdout) {
		t.Fatalf("cluster status:\n%s", r.stdout)
	}
	r = b.ctl(t, "--format", "json", "cluster", "status").mustOK(t)
	var st map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st["mode"] != "standalone" {
		t.Fatalf("cluster status json: %v %s", err, r.stdout)
	}
}
