package metrics

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	"github.com/warrenmq/warren/server"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is a broker and its metrics exporter, both on 127.0.0.1:0.
type env struct {
	srv     *server.Server
	exp     *Exporter
	amqpURL string
	base    string // http://127.0.0.1:port
	client  *http.Client
}

func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("WARREN_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// startEnv starts a broker and an exporter; mutate adjusts the broker's
// configuration and the exporter's (its Options included).
func startEnv(t testing.TB, mutate ...func(*server.Config, *Config)) *env {
	t.Helper()
	scfg := server.DefaultConfig()
	scfg.AMQPListen = "127.0.0.1:0"
	scfg.DataDir = t.TempDir()
	scfg.MemoryHighWatermark = 0
	scfg.Logger = testLogger()
	scfg.ProductVersion = "9.9.9-test"
	scfg.NodeName = "warren@testhost"
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Options.ClusterName = "test-cluster"
	cfg.Options.Logger = scfg.Logger
	for _, f := range mutate {
		f(&scfg, &cfg)
	}
	srv, err := server.New(scfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("server.Start: %v", err)
	}
	t.Cleanup(func() { srv.Close() })

	exp, err := New(srv, cfg)
	if err != nil {
		t.Fatalf("metrics.New: %v", err)
	}
	if err := exp.Start(); err != nil {
		t.Fatalf("metrics.Start: %v", err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		if err := exp.Close(); err != nil {
			t.Errorf("exporter close: %v", err)
		}
	})
	return &env{
		srv: srv, exp: exp, client: client,
		amqpURL: "amqp://guest:guest@" + srv.Addr().String() + "/",
		base:    "http://" + exp.Addr().String(),
	}
}

// channel opens an amqp091-go connection and channel, closed at test end.
func (e *env) channel(t testing.TB) (*amqp091.Connection, *amqp091.Channel) {
	t.Helper()
	c, err := amqp091.Dial(e.amqpURL)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	return c, ch
}

// families is one parsed scrape.
type families map[string]*dto.MetricFamily

// scrape fetches path over HTTP and parses it with Prometheus' own parser.
func (e *env) scrape(t testing.TB, path string) families {
	t.Helper()
	resp, err := e.client.Get(e.base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s\n%s", path, resp.Status, body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return mfs
}

// labelsOf renders a metric's labels as sorted name=value pairs.
func labelsOf(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// labelNames returns a metric's label names, sorted.
func labelNames(m *dto.Metric) []string {
	var out []string
	for _, l := range m.GetLabel() {
		out = append(out, l.GetName())
	}
	sort.Strings(out)
	return out
}

// value returns a metric's value whatever its type.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	default:
		return m.GetUntyped().GetValue()
	}
}

// find returns the value of the series of family name whose labels include
// want; ok is false if there is none.
func (f families) find(name string, want map[string]string) (float64, bool) {
	mf := f[name]
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		got := labelsOf(m)
		match := true
		for k, v := range want {
			if got[k] != v {
				match = false
				break
			}
		}
		if match {
			return value(m), true
		}
	}
	return 0, false
}

// get is find for a series that must exist.
func (f families) get(t testing.TB, name string, want map[string]string) float64 {
	t.Helper()
	v, ok := f.find(name, want)
	if !ok {
		t.Fatalf("no series %s%v in scrape (family present: %v)", name, want, f[name] != nil)
	}
	return v
}

// waitFor polls path until check passes or the deadline expires, then fails
// with check's last complaint.
func (e *env) waitFor(t testing.TB, path string, check func(families) error) families {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		f := e.scrape(t, path)
		err := check(f)
		if err == nil {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", path, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// expect is a check that every listed series has the wanted value.
type expect struct {
	name   string
	labels map[string]string
	want   float64
}

func allOf(es ...expect) func(families) error {
	return func(f families) error {
		var bad []string
		for _, e := range es {
			v, ok := f.find(e.name, e.labels)
			if !ok {
				bad = append(bad, fmt.Sprintf("%s%v missing", e.name, e.labels))
			} else if v != e.want {
				bad = append(bad, fmt.Sprintf("%s%v = %v, want %v", e.name, e.labels, v, e.want))
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("%s", strings.Join(bad, "; "))
		}
		return nil
	}
}

// global labels of the protocol-and-queue-type counters.
var classic = map[string]string{"protocol": "amqp091", "queue_type": "rabbit_classic_queue"}

var amqp091Label = map[string]string{"protocol": "amqp091"}

func sameStrings(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	sort.Strings(a)
	sort.Strings(b)
	return slices.Equal(a, b)
}
