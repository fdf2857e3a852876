package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/federation"
	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/shovel"
)

// fedBroker is a Warren node with its federation runner and management
// API, wired by startFederation as run wires them.
type fedBroker struct {
	t       testing.TB
	name    string // the node name, and so the cluster name
	dataDir string
	port    int
	srv     *server.Server
	fed     *federation.Manager
	shovels *shovel.Manager
	api     *mgmt.API
	cc      *cluster.Config // a cluster member when set (placement_test.go)
	url     string          // amqp://guest:guest@127.0.0.1:port/
}

func startFedBroker(t testing.TB, name string) *fedBroker {
	t.Helper()
	b := &fedBroker{t: t, name: name, dataDir: t.TempDir()}
	b.start()
	t.Cleanup(b.stop)
	return b
}

func fedTestLogger() *slog.Logger {
	level := slog.LevelError
	if os.Getenv("WARREN_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// start starts the node, on the port it had before when restarted.
func (b *fedBroker) start() {
	t := b.t
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.NodeName = b.name + "@localhost"
	cfg.AMQPListen = "127.0.0.1:" + strconv.Itoa(b.port)
	cfg.DataDir = b.dataDir
	cfg.MemoryHighWatermark, cfg.DiskFreeLimit = 0, 0
	cfg.LoginFailureDelay = 10 * time.Millisecond
	cfg.Logger = fedTestLogger()
	cfg.Cluster = b.cc
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	b.srv = srv
	_, b.port = server.SplitHostPort(srv.Addr().String())
	b.url = fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", b.port)
	if b.cc != nil {
		b.cc.BindAddr = srv.ClusterNode().Addr() // a restart keeps the port
	}
	b.fed = startFederation(srv, cfg.Logger)
	b.shovels = startShovels(srv, nil, cfg.Logger)
	mc := mgmt.DefaultConfig()
	mc.Listen, mc.Server, mc.Logger, mc.Federation, mc.Shovels = "127.0.0.1:0", srv, cfg.Logger, b.fed, b.shovels
	if b.api, err = mgmt.New(mc); err == nil {
		err = b.api.Start()
	}
	if err != nil {
		t.Fatalf("management API: %v", err)
	}
}

func (b *fedBroker) stop() {
	if b.srv == nil {
		return
	}
	if err := b.api.Close(); err != nil {
		b.t.Errorf("closing the management API: %v", err)
	}
	b.fed.Close()
	b.shovels.Close()
	if err := b.srv.Close(); err != nil {
		b.t.Errorf("closing the server: %v", err)
	}
	b.srv = nil
}

func (b *fedBroker) restart() {
	b.t.Helper()
	b.stop()
	b.start()
}

// putUpstream sets a federation-upstream parameter in vhost "/" as guest,
// through PutParameter as the management API does.
func (b *fedBroker) putUpstream(name string, value map[string]any) {
	b.t.Helper()
	raw, err := json.Marshal(value)
	if err != nil {
		b.t.Fatal(err)
	}
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.srv.PutParameter(server.Parameter{Component: federation.ComponentUpstream, Vhost: "/", Name: name, Value: v}, "guest"); err != nil {
		b.t.Fatalf("put upstream %s: %v", name, err)
	}
}

func (b *fedBroker) putPolicy(name, pattern, applyTo string, def map[string]any) {
	b.t.Helper()
	if _, err := b.srv.PutPolicy(server.Policy{Vhost: "/", Name: name, Pattern: pattern, ApplyTo: applyTo, Definition: def}, false); err != nil {
		b.t.Fatalf("put policy %s: %v", name, err)
	}
}

// channel opens a connection and a channel, closed at test end.
func (b *fedBroker) channel() *amqp091.Channel {
	b.t.Helper()
	c, err := amqp091.Dial(b.url)
	if err != nil {
		b.t.Fatalf("dial %s: %v", b.url, err)
	}
	b.t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		b.t.Fatalf("channel: %v", err)
	}
	return ch
}

// links is GET /api/federation-links[suffix] as guest.
func (b *fedBroker) links(suffix string) []map[string]any {
	b.t.Helper()
	code, body := b.httpGet("/api/federation-links" + suffix)
	if code != http.StatusOK {
		b.t.Fatalf("GET /api/federation-links%s: %d %s", suffix, code, body)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		b.t.Fatalf("GET /api/federation-links: %v: %s", err, body)
	}
	return list
}

func (b *fedBroker) httpGet(path string) (int, string) {
	b.t.Helper()
	rq, err := http.NewRequest(http.MethodGet, "http://"+b.api.Addr().String()+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	rq.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// waitLink waits until the link of upstream for object has status and
// returns its entry.
func (b *fedBroker) waitLink(upstream, object, status string) map[string]any {
	b.t.Helper()
	var found map[string]any
	fedWait(b.t, 15*time.Second, fmt.Sprintf("link %s/%s %s", upstream, object, status), func() bool {
		for _, l := range b.links("") {
			if l["upstream"] == upstream && (l["exchange"] == object || l["queue"] == object) && l["status"] == status {
				found = l
				return true
			}
		}
		return false
	})
	return found
}

// fedWait polls cond until it holds or the deadline passes.
func fedWait(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// getAll gets every ready message of queue (no ack needed), in order.
func getAll(t testing.TB, ch *amqp091.Channel, queue string) []amqp091.Delivery {
	t.Helper()
	var out []amqp091.Delivery
	for {
		m, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatalf("get %s: %v", queue, err)
		}
		if !ok {
			return out
		}
		out = append(out, m)
	}
}

func ready(t testing.TB, b *fedBroker, queue string) int {
	t.Helper()
	q := b.srv.Vhost("/").LookupQueue(queue)
	if q == nil {
		t.Fatalf("no queue %s", queue)
	}
	return q.Info().Ready
}

func fedMust(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
