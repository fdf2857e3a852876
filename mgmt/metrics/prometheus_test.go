package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/server"
)

// The RabbitMQ-Overview dashboard of rabbitmq-server v3.10.8
// (deps/rabbitmq_prometheus/docker/grafana/dashboards/RabbitMQ-Overview.json).
const overviewDashboard = "testdata/grafana/RabbitMQ-Overview.json"

// promNamespace is the namespace label the test's Prometheus puts on its
// target; the dashboard selects by it ($namespace).
const promNamespace = "warren-test"

// dashboardQuery is one query of a dashboard panel.
type dashboardQuery struct{ panel, expr string }

// dashboardQueries reads every panel target's expression, nested rows
// included.
func dashboardQueries(t *testing.T, path string) []dashboardQuery {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct{ Panels []panel }
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []dashboardQuery
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				if tg.Expr != "" {
					out = append(out, dashboardQuery{p.Title, tg.Expr})
				}
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	return out
}

type panel struct {
	Title   string
	Targets []struct{ Expr string }
	Panels  []panel
}

// mayBeZero are the queries whose value is legitimately 0 under the test's
// load: publishes not yet confirmed (received_confirm - confirmed). Every
// other query must be positive: the load keeps queues, connections,
// channels, consumers, ready and unacked messages, and drives every counter.
func mayBeZero(expr string) bool {
	return strings.Contains(expr, "rabbitmq_global_messages_received_confirm_total[60s]")
}

// TestGrafanaOverviewWithPrometheus scrapes a live Warren with a real
// Prometheus (Debian's prometheus package) every 250 ms while traffic runs,
// and evaluates every query of RabbitMQ's RabbitMQ-Overview dashboard
// through Prometheus' HTTP API, template variables resolved as Grafana
// does. Each query must return data, and (but for mayBeZero) a positive
// value.
func TestGrafanaOverviewWithPrometheus(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but prometheus is not installed (.ci/run installs it): %v", err)
		}
		t.Skip("needs Prometheus (apt-get install prometheus); .ci/run installs it")
	}
	queries := dashboardQueries(t, overviewDashboard)
	if len(queries) < 40 {
		t.Fatalf("%d queries in %s, want the dashboard's 41", len(queries), overviewDashboard)
	}
	e := startEnv(t, func(c *server.Config, _ *Config) {
		c.MemoryHighWatermark = 1 << 40 // the memory panel subtracts used from the limit
	})
	prom := startPrometheus(t, bin, e.exp.Addr().String())
	holdSteadyState(t, e)
	stop := runLoad(t, e.amqpURL)
	defer stop()

	cluster := prom.waitLabel(t, "rabbitmq_cluster", `rabbitmq_identity_info{namespace="`+promNamespace+`"}`)
	vars := strings.NewReplacer("$rabbitmq_cluster", cluster, "$namespace", promNamespace)
	deadline := time.Now().Add(30 * time.Second)
	pending := queries
	for len(pending) > 0 {
		var failed []dashboardQuery
		var why []string
		for _, q := range pending {
			if err := prom.check(vars.Replace(q.expr), !mayBeZero(q.expr)); err != nil {
				failed = append(failed, q)
				why = append(why, fmt.Sprintf("panel %q: %v\n  %s", q.panel, err, q.expr))
			}
		}
		pending = failed
		if len(pending) > 0 && time.Now().After(deadline) {
			t.Fatalf("%d of %d dashboard queries still fail:\n%s", len(pending), len(queries), strings.Join(why, "\n"))
		}
		if len(pending) > 0 {
			time.Sleep(500 * time.Millisecond) // the next scrapes
		}
	}
}

// promServer is a Prometheus server run by a test.
type promServer struct {
	base   string
	client *http.Client
}

// startPrometheus runs bin scraping target's /metrics every 250 ms, with its
// data in a temporary directory; it is stopped at the test's end.
func startPrometheus(t *testing.T, bin, target string) *promServer {
	t.Helper()
	dir := t.TempDir()
	config := fmt.Sprintf(`global:
  scrape_interval: 250ms
  scrape_timeout: 250ms
scrape_configs:
  - job_name: warren
    static_configs:
      - targets: [%q]
        labels: {namespace: %q}
`, target, promNamespace)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	logPath := filepath.Join(dir, "prometheus.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait() // killed: its exit status says so
		logFile.Close()
		if t.Failed() {
			if log, err := os.ReadFile(logPath); err == nil {
				t.Logf("prometheus log:\n%s", log)
			}
		}
	})
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	p := &promServer{base: "http://" + addr, client: client}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := client.Get(p.base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready on %s: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freeAddr returns a 127.0.0.1 address no one listens on at the moment.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// apiResponse is the envelope of Prometheus' HTTP API.
type apiResponse struct {
	Status string          `json:"status"`
	Error  string          `json:"error"`
	Data   json.RawMessage `json:"data"`
}

func (p *promServer) get(path string, params url.Values) (json.RawMessage, error) {
	resp, err := p.client.Get(p.base + path + "?" + params.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r apiResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", path, resp.Status, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s: %s", path, resp.Status, r.Error)
	}
	return r.Data, nil
}

// waitLabel resolves a Grafana label_values(match, label) variable.
func (p *promServer) waitLabel(t *testing.T, label, match string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, err := p.get("/api/v1/label/"+label+"/values", url.Values{"match[]": {match}})
		var values []string
		if err == nil {
			err = json.Unmarshal(data, &values)
		}
		if err == nil && len(values) == 1 {
			return values[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("label_values(%s, %s) = %v, %v; want one value", match, label, values, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// check evaluates an instant query and wants at least one sample, each
// positive when positive is set.
func (p *promServer) check(query string, positive bool) error {
	data, err := p.get("/api/v1/query", url.Values{"query": {query}})
	if err != nil {
		return err
	}
	var res struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return err
	}
	if len(res.Result) == 0 {
		return fmt.Errorf("no data")
	}
	for _, r := range res.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("value %v: %w", r.Value[1], err)
		}
		if positive && !(v > 0) {
			return fmt.Errorf("value %v, want > 0", v)
		}
	}
	return nil
}

// holdSteadyState keeps, for the test's duration, what the gauge panels
// show: a connection with two channels, one consuming and holding an unacked
// message, and a queue of ready messages.
func holdSteadyState(t *testing.T, e *env) {
	t.Helper()
	c, ch := e.channel(t)
	for _, q := range []string{"steady-ready", "steady-unacked"} {
		if _, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := ch.Publish("", q, false, false, amqp091.Publishing{Body: []byte("steady")}); err != nil {
			t.Fatal(err)
		}
	}
	consumer := openChannel(t, c)
	msgs, err := consumer.Consume("steady-unacked", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-msgs: // held unacked until the connection closes
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery from steady-unacked")
	}
}

// runLoad runs rounds of traffic against amqpURL, one every 100 ms, until
// the returned stop is called (at most 600 rounds). Each round drives every
// counter the dashboard charts.
func runLoad(t *testing.T, amqpURL string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var once sync.Once
	errc := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 600; i++ {
			if err := loadRound(amqpURL, i); err != nil {
				errc <- fmt.Errorf("load round %d: %w", i, err)
				return
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			select {
			case err := <-errc:
				t.Error(err)
			default:
			}
		})
	}
}

// loadRound opens a connection and, in confirm mode, publishes routed and
// unroutable messages, gets (manual, automatic, empty), consumes with
// manual acks (one rejected and redelivered) and with automatic ones,
// declares and deletes a queue and churns channels, then closes it all.
func loadRound(amqpURL string, i int) error {
	c, err := amqp091.Dial(amqpURL)
	if err != nil {
		return err
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		return err
	}
	if err := ch.Confirm(false); err != nil {
		return err
	}
	q, err := ch.QueueDeclare(fmt.Sprintf("load-%d", i), false, false, true, false, nil)
	if err != nil {
		return err
	}
	confirmed := func(exchange, key string, mandatory bool) error {
		dc, err := ch.PublishWithDeferredConfirm(exchange, key, mandatory, false, amqp091.Publishing{Body: []byte("load")})
		if err != nil {
			return err
		}
		if !dc.Wait() {
			return fmt.Errorf("publish to %q nacked", key)
		}
		return nil
	}
	for range 4 {
		if err := confirmed("", q.Name, false); err != nil {
			return err
		}
	}
	if err := confirmed("amq.direct", "nowhere", false); err != nil {
		return err
	}
	if err := confirmed("amq.direct", "nowhere", true); err != nil {
		return err
	}
	if err := getAndConsume(c, ch, q.Name, func() error { return confirmed("", q.Name, false) }); err != nil {
		return err
	}
	if _, err := ch.QueueDelete(q.Name, false, false, false); err != nil {
		return err
	}
	return ch.Close()
}

// getAndConsume takes the 4 messages of queue: a manual get, an automatic
// get, a manual consumer that rejects one (redelivered) and acks; then one
// more, published by publish, by an automatic consumer on another channel;
// then a get finds the queue empty.
func getAndConsume(c *amqp091.Connection, ch *amqp091.Channel, queue string, publish func() error) error {
	m, ok, err := ch.Get(queue, false)
	if err != nil || !ok {
		return fmt.Errorf("get: %v %v", ok, err)
	}
	if err := m.Ack(false); err != nil {
		return err
	}
	if _, ok, err := ch.Get(queue, true); err != nil || !ok {
		return fmt.Errorf("get no-ack: %v %v", ok, err)
	}
	if err := ch.Qos(1, 0, false); err != nil {
		return err
	}
	msgs, err := ch.Consume(queue, "manual", false, false, false, false, nil)
	if err != nil {
		return err
	}
	if err := (<-msgs).Reject(true); err != nil {
		return err
	}
	for range 2 {
		if err := (<-msgs).Ack(false); err != nil {
			return err
		}
	}
	if err := ch.Cancel("manual", false); err != nil {
		return err
	}
	if err := publish(); err != nil {
		return err
	}
	auto, err := c.Channel()
	if err != nil {
		return err
	}
	autoMsgs, err := auto.Consume(queue, "", true, false, false, false, nil)
	if err != nil {
		return err
	}
	<-autoMsgs
	if err := auto.Close(); err != nil {
		return err
	}
	if _, ok, err := ch.Get(queue, false); err != nil || ok {
		return fmt.Errorf("get on an empty queue: %v %v", ok, err)
	}
	return nil
}
