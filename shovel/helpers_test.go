package shovel_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	_ "github.com/warrenmq/warren/internal/soakflag"
	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/shovel"
)

// broker is a Warren node with its shovel runner and management API, wired
// as cmd/warren wires them.
type broker struct {
	t       testing.TB
	dataDir string
	port    int
	srv     *server.Server
	shovels *shovel.Manager
	api     *mgmt.API
	url     string // amqp://guest:guest@127.0.0.1:port/
}

func startBroker(t testing.TB) *broker {
	t.Helper()
	b := &broker{t: t, dataDir: t.TempDir()}
	b.start()
	t.Cleanup(b.stop)
	return b
}

func testLogger() *slog.Logger {
	level := slog.LevelError
	if os.Getenv("WARREN_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// start starts the node, on the port it had before when restarted.
func (b *broker) start() {
	t := b.t
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.AMQPListen = "127.0.0.1:" + strconv.Itoa(b.port)
	cfg.DataDir = b.dataDir
	cfg.MemoryHighWatermark, cfg.DiskFreeLimit = 0, 0
	cfg.LoginFailureDelay = 10 * time.Millisecond
	cfg.Logger = testLogger()
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
	b.shovels = shovel.New(shovel.Config{
		Params: func() []shovel.Param {
			var out []shovel.Param
			for _, p := range srv.Parameters() {
				if p.Component == "shovel" {
					out = append(out, shovel.Param{Vhost: p.Vhost, Name: p.Name, Value: p.Value})
				}
			}
			return out
		},
		Local: func() (shovel.Local, error) {
			user, password := srv.InternalCredential()
			return shovel.Local{Addr: srv.Addr().String(), User: user, Password: password}, nil
		},
		Delete: func(vhost, name string) error { return srv.DeleteParameter("shovel", vhost, name) },
		Node:   srv.NodeName(), ClusterName: srv.ClusterName,
		Logger: cfg.Logger,
	})
	srv.OnParameterChange(func(component string) {
		if component == "shovel" {
			b.shovels.Changed()
		}
	})
	b.shovels.Start()
	mc := mgmt.DefaultConfig()
	mc.Listen, mc.Server, mc.Logger, mc.Shovels = "127.0.0.1:0", srv, cfg.Logger, b.shovels
	if b.api, err = mgmt.New(mc); err == nil {
		err = b.api.Start()
	}
	if err != nil {
		t.Fatalf("management API: %v", err)
	}
}

func (b *broker) stop() {
	if b.srv == nil {
		return
	}
	if err := b.api.Close(); err != nil {
		b.t.Errorf("closing the management API: %v", err)
	}
	b.shovels.Close()
	if err := b.srv.Close(); err != nil {
		b.t.Errorf("closing the server: %v", err)
	}
	b.srv = nil
}

// putShovel sets a shovel parameter in vhost "/" as guest, through the
// server's PutParameter as the management API does.
func (b *broker) putShovel(name string, value map[string]any) {
	b.t.Helper()
	v := decodeJSON(b.t, value)
	if _, err := b.srv.PutParameter(server.Parameter{Component: "shovel", Vhost: "/", Name: name, Value: v}, "guest"); err != nil {
		b.t.Fatalf("put shovel %s: %v", name, err)
	}
}

// decodeJSON round-trips v through JSON with numbers as json.Number, as a
// parameter read from a request body.
func decodeJSON(t testing.TB, v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// channel opens a connection to url and a channel, closed at test end.
func channel(t testing.TB, url string) *amqp.Channel {
	t.Helper()
	c, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	return ch
}

// publishN publishes n persistent messages with message ids prefix-0 ...
// to queue (declared durable), with confirms.
func publishN(t testing.TB, url, queue, prefix string, n int) {
	t.Helper()
	ch := channel(t, url)
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		t.Fatalf("declare %s: %v", queue, err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		dc, err := ch.PublishWithDeferredConfirm("", queue, false, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent, MessageId: fmt.Sprintf("%s-%d", prefix, i), Body: []byte("m")})
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		if i%500 == 499 || i == n-1 {
			if !dc.Wait() {
				t.Fatalf("publish %d nacked", i)
			}
		}
	}
}

// queueLength is the number of ready messages in queue (passive declare).
func queueLength(t testing.TB, url, queue string) int {
	t.Helper()
	c, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("passive declare %s: %v", queue, err)
	}
	return q.Messages
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// drainIDs gets every message of queue and counts each message id.
func drainIDs(t testing.TB, url, queue string) map[string]int {
	t.Helper()
	ch := channel(t, url)
	seen := map[string]int{}
	for {
		m, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatalf("get %s: %v", queue, err)
		}
		if !ok {
			return seen
		}
		seen[m.MessageId]++
	}
}

// getJSON reads a management API path as guest.
func (b *broker) getJSON(t testing.TB, method, path string) (int, string) {
	t.Helper()
	rq, err := http.NewRequest(method, "http://"+b.api.Addr().String()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	rq.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// status is the shovel's entry of GET /api/shovels, or nil.
func (b *broker) status(t testing.TB, name string) map[string]any {
	t.Helper()
	code, body := b.getJSON(t, http.MethodGet, "/api/shovels")
	if code != http.StatusOK {
		t.Fatalf("GET /api/shovels: %d %s", code, body)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("GET /api/shovels: %v: %s", err, body)
	}
	for _, st := range list {
		if st["name"] == name {
			return st
		}
	}
	return nil
}

func (b *broker) waitState(t testing.TB, name, state string) map[string]any {
	t.Helper()
	var st map[string]any
	waitFor(t, 15*time.Second, "shovel "+name+" "+state, func() bool {
		st = b.status(t, name)
		return st != nil && st["state"] == state
	})
	return st
}

// rabbitURL is the shared reference RabbitMQ node, or "" when it does not
// answer.
func rabbitURL(t testing.TB) string {
	const addr = "127.0.0.1:5699"
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	c.Close()
	return "amqp://guest:guest@" + addr + "/"
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func amqpMsg(body string) amqp.Publishing { return amqp.Publishing{Body: []byte(body)} }
