package mgmt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	"github.com/warrenmq/warren/server"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv("WARREN_MGMT_CHILD"); dir != "" {
		runChildEnv(dir)
		return
	}
	goleak.VerifyTestMain(m)
}

func newTestClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}
}

// testNode is the node name the tests configure.
const testNode = "warren@test"

// env is a broker and its management API on 127.0.0.1 for one test.
type env struct {
	t       testing.TB
	srv     *server.Server
	api     *API
	base    string // http://127.0.0.1:port
	amqpURL string
	client  *http.Client
}

func testLogger() *slog.Logger {
	level := slog.LevelError
	if os.Getenv("WARREN_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// newEnv starts a broker with a data directory under t.TempDir and the API
// with a 50 ms sampler; mutate adjusts the API config.
func newEnv(t testing.TB, mutate ...func(*server.Config, *Config)) *env {
	t.Helper()
	scfg := server.DefaultConfig()
	scfg.AMQPListen = "127.0.0.1:0"
	scfg.DataDir = t.TempDir()
	scfg.NodeName = testNode
	scfg.MemoryHighWatermark = 0
	scfg.Logger = testLogger()
	scfg.LoginFailureDelay = 10 * time.Millisecond // not RabbitMQ's 3 s for the refused logins tests make
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Logger = scfg.Logger
	cfg.StatsInterval = 50 * time.Millisecond
	for _, f := range mutate {
		f(&scfg, &cfg)
	}
	return startEnv(t, scfg, cfg)
}

func startEnv(t testing.TB, scfg server.Config, cfg Config) *env {
	t.Helper()
	srv, err := server.New(scfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("server Start: %v", err)
	}
	cfg.Server = srv
	api, err := New(cfg)
	if err != nil {
		srv.Close()
		t.Fatalf("mgmt.New: %v", err)
	}
	if err := api.Start(); err != nil {
		api.Close()
		srv.Close()
		t.Fatalf("mgmt Start: %v", err)
	}
	e := &env{
		t: t, srv: srv, api: api, base: "http://" + api.Addr().String(),
		amqpURL: "amqp://guest:guest@" + srv.Addr().String() + "/",
		client:  newTestClient(),
	}
	t.Cleanup(func() {
		e.client.CloseIdleConnections()
		if err := api.Close(); err != nil {
			t.Errorf("api.Close: %v", err)
		}
		srv.Close()
	})
	return e
}

// resp is a recorded HTTP response.
type resp struct {
	status int
	header http.Header
	body   []byte
}

// value decodes the body as JSON (numbers as json.Number).
func (r *resp) value(t testing.TB) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(r.body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("response is not JSON (%v): %q", err, r.body)
	}
	return v
}

func (r *resp) object(t testing.TB) map[string]any {
	t.Helper()
	m, ok := r.value(t).(map[string]any)
	if !ok {
		t.Fatalf("response is not a JSON object: %s", r.body)
	}
	return m
}

func (r *resp) array(t testing.TB) []any {
	t.Helper()
	a, ok := r.value(t).([]any)
	if !ok {
		t.Fatalf("response is not a JSON array: %s", r.body)
	}
	return a
}

// reqOpt adjusts a request.
type reqOpt func(*http.Request)

func asUser(name, pass string) reqOpt { return func(r *http.Request) { r.SetBasicAuth(name, pass) } }
func noAuth() reqOpt                  { return func(r *http.Request) { r.Header.Del("Authorization") } }
func withHeader(k, v string) reqOpt   { return func(r *http.Request) { r.Header.Set(k, v) } }

// do sends a request to path (below the API base, e.g. "/api/queues") as
// guest unless an option says otherwise. body may be a string, []byte or a
// value to encode as JSON.
func (e *env) do(method, path string, body any, opts ...reqOpt) *resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			e.t.Fatalf("encoding request body: %v", err)
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	if err != nil {
		e.t.Fatalf("request %s %s: %v", method, path, err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.SetBasicAuth("guest", "guest")
	for _, o := range opts {
		o(req)
	}
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return &resp{status: res.StatusCode, header: res.Header, body: b}
}

func (e *env) get(path string, opts ...reqOpt) *resp { return e.do(http.MethodGet, path, nil, opts...) }

// must checks a response's status.
func (e *env) must(r *resp, status int, what string) *resp {
	e.t.Helper()
	if r.status != status {
		e.t.Fatalf("%s: status %d, want %d; body %s", what, r.status, status, r.body)
	}
	return r
}

func (e *env) put(path string, body any, opts ...reqOpt) *resp {
	return e.do(http.MethodPut, path, body, opts...)
}

// dial opens an AMQP connection closed at test end.
func (e *env) dial(url string) *amqp091.Connection {
	e.t.Helper()
	if url == "" {
		url = e.amqpURL
	}
	c, err := amqp091.Dial(url)
	if err != nil {
		e.t.Fatalf("dial %s: %v", url, err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

func (e *env) channel(c *amqp091.Connection) *amqp091.Channel {
	e.t.Helper()
	ch, err := c.Channel()
	if err != nil {
		e.t.Fatalf("channel: %v", err)
	}
	return ch
}

// awaitConfirms waits for n publisher confirms, failing on a nack or when
// one takes more than 5 s.
func awaitConfirms(t testing.TB, confirms <-chan amqp091.Confirmation, n int) {
	t.Helper()
	for range n {
		select {
		case c := <-confirms:
			if !c.Ack {
				t.Fatalf("publish %d nacked", c.DeliveryTag)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no confirm")
		}
	}
}

// waitFor polls cond until it returns nil or the deadline passes.
func waitFor(t testing.TB, d time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %v", d, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// esc percent-encodes one path segment, including "/".
func esc(s string) string { return url.PathEscape(s) }

// num reads a JSON number from a decoded value.
func num(t testing.TB, v any) float64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v (%T) is not a number", v, v)
	}
	f, err := n.Float64()
	if err != nil {
		t.Fatalf("number %v: %v", n, err)
	}
	return f
}

// field walks a decoded object along a dotted path.
func field(v any, path string) any {
	for _, p := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }
