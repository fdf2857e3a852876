package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/server"
)

// brokerURL returns the broker the end-to-end tests run against, or skips.
// brokerURL is WARREN_PERF_URL when set (to run against RabbitMQ or a
// separate Warren), else a Warren broker started in-process for the test on
// 127.0.0.1:0.
func brokerURL(t *testing.T) string {
	t.Helper()
	if u := os.Getenv("WARREN_PERF_URL"); u != "" {
		return u
	}
	cfg := server.DefaultConfig()
	cfg.AMQPListen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.MemoryHighWatermark = 0
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return "amqp://guest:guest@" + srv.Addr().String() + "/"
}

// e2eConfig is a small run with names unique to the test; the queues of
// the final configuration are deleted when the test ends.
func e2eConfig(t *testing.T) *Config {
	t.Helper()
	cfg := new(Config)
	*cfg = DefaultConfig()
	cfg.URL = brokerURL(t)
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	cfg.QueuePattern = fmt.Sprintf("warren-perf-test-%s-%d-%%d", name, time.Now().UnixNano())
	cfg.Duration = 30 * time.Second // a bound in case a count is never reached
	t.Cleanup(func() {
		if err := deleteTopology(cfg.URL, "", cfg.queueNames()); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return cfg
}

// queueDepth returns the number of ready messages in queue.
func queueDepth(t *testing.T, rawURL, queue string) int {
	t.Helper()
	conn, ch, err := openChannel(rawURL, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := conn.close(); err != nil {
			t.Error(err)
		}
	}()
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil {
		t.Fatalf("passive declare %q: %v", queue, err)
	}
	return q.Messages
}

func TestEndToEndCountsWithConfirms(t *testing.T) {
	cfg := e2eConfig(t)
	cfg.Size = 100
	cfg.Confirm = 50
	cfg.PMessages = 3000
	sum, err := run(context.Background(), *cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Published != 3000 || sum.Confirmed != 3000 || sum.Nacked != 0 || sum.Consumed != 3000 {
		t.Fatalf("published/confirmed/nacked/consumed = %d/%d/%d/%d, want 3000/3000/0/3000",
			sum.Published, sum.Confirmed, sum.Nacked, sum.Consumed)
	}
	if sum.Latency.Count != 3000 || sum.Latency.P50US <= 0 || sum.Latency.MaxUS < sum.Latency.P99US {
		t.Fatalf("latency %+v", sum.Latency)
	}
	if sum.Interrupted || sum.MeasuredSeconds <= 0 || sum.PublishRate <= 0 || sum.ConsumeRate <= 0 {
		t.Fatalf("summary %+v", sum)
	}
	if d := queueDepth(t, cfg.URL, cfg.queueNames()[0]); d != 0 {
		t.Fatalf("%d messages left in the queue", d)
	}
}

func TestEndToEndSmallBodiesCarryTimeInHeader(t *testing.T) {
	cfg := e2eConfig(t)
	cfg.Size = 4
	cfg.AutoAck = true
	cfg.PMessages = 500
	sum, err := run(context.Background(), *cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Consumed != 500 || sum.Latency.Count != 500 {
		t.Fatalf("consumed %d, latencies %d; want 500 each", sum.Consumed, sum.Latency.Count)
	}
}

func TestEndToEndFanoutExchange(t *testing.T) {
	cfg := e2eConfig(t)
	cfg.Exchange = "warren-perf-test-fanout-" + fmt.Sprint(time.Now().UnixNano())
	cfg.ExchangeType = "fanout"
	cfg.Queues, cfg.Consumers = 3, 3
	cfg.Confirm = 100
	cfg.PMessages = 400
	t.Cleanup(func() {
		if err := deleteTopology(cfg.URL, cfg.Exchange, nil); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	sum, err := run(context.Background(), *cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Published != 400 || sum.Consumed != 1200 {
		t.Fatalf("published %d consumed %d, want 400 and 3 x 400", sum.Published, sum.Consumed)
	}
}

func TestEndToEndMultiAckLeavesNothingUnacked(t *testing.T) {
	cfg := e2eConfig(t)
	cfg.Publishers, cfg.Consumers, cfg.Queues = 2, 2, 2
	cfg.Prefetch = 50
	cfg.MultiAckEvery = 7 // 1000 is not a multiple: the tail must be acked too
	cfg.PMessages = 1000
	sum, err := run(context.Background(), *cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Consumed != 2000 {
		t.Fatalf("consumed %d, want 2000", sum.Consumed)
	}
	// Unacked messages would have been requeued when the consumers closed.
	for _, q := range cfg.queueNames() {
		if d := queueDepth(t, cfg.URL, q); d != 0 {
			t.Fatalf("queue %s has %d messages: acks were lost", q, d)
		}
	}
}

func TestEndToEndConsumerCount(t *testing.T) {
	cfg := e2eConfig(t)
	cfg.Rate = 2000
	cfg.CMessages = 300
	sum, err := run(context.Background(), *cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Consumed != 300 {
		t.Fatalf("consumed %d, want 300", sum.Consumed)
	}
}

func TestEndToEndDeclareFailure(t *testing.T) {
	cfg := e2eConfig(t)
	cfg.Durable = true
	cfg.Duration = time.Second
	cfg.PMessages = 1
	if _, err := run(context.Background(), *cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Durable = false // redeclaring a durable queue as transient is refused
	sum, err := run(context.Background(), *cfg)
	if !errors.Is(err, ErrDeclare) || sum.ran() {
		t.Fatalf("err = %v, ran %t; want ErrDeclare and no run", err, sum.ran())
	}
	var aerr *amqp.Error
	if !errors.As(err, &aerr) || aerr.Code != amqp.PreconditionFailed {
		t.Fatalf("err = %v, want the broker's PRECONDITION_FAILED", err)
	}
}

func TestEndToEndPredeclaredMissingQueue(t *testing.T) {
	cfg := e2eConfig(t)
	cfg.Predeclared = true
	_, err := run(context.Background(), *cfg)
	if !errors.Is(err, ErrDeclare) {
		t.Fatalf("err = %v, want ErrDeclare", err)
	}
}

func TestEndToEndWarmupIsNotMeasured(t *testing.T) {
	cfg := e2eConfig(t)
	cfg.Rate = 1000
	cfg.Warmup = 500 * time.Millisecond
	cfg.Duration = time.Second
	sum, err := run(context.Background(), *cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.MeasuredSeconds <= 0 || sum.MeasuredSeconds >= sum.ElapsedSeconds {
		t.Fatalf("measured %.3f s of %.3f s", sum.MeasuredSeconds, sum.ElapsedSeconds)
	}
	if sum.Latency.Count == 0 || sum.Latency.Count >= sum.Consumed {
		t.Fatalf("%d latencies for %d deliveries: the warmup's should not count", sum.Latency.Count, sum.Consumed)
	}
}

// cancelWriter cancels a context on its first write: a progress writer
// that interrupts the run after its first second.
type cancelWriter struct {
	once   sync.Once
	cancel context.CancelFunc
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.once.Do(w.cancel)
	return len(p), nil
}

func TestEndToEndInterruptGivesSummary(t *testing.T) {
	cfg := e2eConfig(t)
	cfg.Duration = 0 // only the interrupt ends it
	cfg.Confirm = 100
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg.Progress = &cancelWriter{cancel: cancel}
	sum, err := run(ctx, *cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Interrupted || sum.Published == 0 || sum.Confirmed != sum.Published {
		t.Fatalf("interrupted=%t published=%d confirmed=%d", sum.Interrupted, sum.Published, sum.Confirmed)
	}
}

func TestEndToEndBacklogScenario(t *testing.T) {
	o := defaultScenarioOptions()
	o.url = brokerURL(t)
	o.messages = 2000
	sc, err := findScenario("backlog")
	if err != nil {
		t.Fatal(err)
	}
	res, err := runScenario(context.Background(), sc, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Phases) != 2 {
		t.Fatalf("%d phases, want fill and drain", len(res.Phases))
	}
	fill, drain := res.Phases[0], res.Phases[1]
	if fill.Confirmed != 2000 || fill.Consumed != 0 || drain.Consumed != 2000 || drain.Published != 0 {
		t.Fatalf("fill %+v\ndrain %+v", fill, drain)
	}
	if fill.ConfirmRate <= 0 || drain.ConsumeRate <= 0 {
		t.Fatalf("fill rate %v, drain rate %v", fill.ConfirmRate, drain.ConsumeRate)
	}
	// The scenario deletes its queue.
	conn, ch, err := openChannel(o.url, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := conn.close(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := ch.QueueDeclarePassive(sc.phases(o)[0].queueNames()[0], true, false, false, false, nil); err == nil {
		t.Fatal("backlog queue still exists after the scenario")
	}
}

func TestEndToEndCommandLineJSON(t *testing.T) {
	cfg := e2eConfig(t)
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"--url", cfg.URL, "--queue-pattern", cfg.QueuePattern, "--pmessages", "200",
		"--confirm", "20", "--json", "--delete-queues"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var sum Summary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("stdout is not one JSON summary: %v\n%s", err, stdout.String())
	}
	if sum.Consumed != 200 || sum.Confirmed != 200 {
		t.Fatalf("summary %+v", sum)
	}
}

// TestEndToEndIdleScenario: the idle scenario declares its queues, holds its
// connections for the duration, reports the broker's peak RSS (here the test
// process, which runs the broker) and deletes the queues.
func TestEndToEndIdleScenario(t *testing.T) {
	o := defaultScenarioOptions()
	o.url = brokerURL(t)
	o.idleQueues, o.idleConns, o.duration = 30, 5, 200*time.Millisecond
	o.brokerPID = os.Getpid()
	res := mustRunScenario(t, "idle", o)
	if len(res.Phases) != 1 {
		t.Fatalf("idle phases: %+v", res.Phases)
	}
	s := res.Phases[0]
	if s.Queues != 30 || s.Connections != 5 || s.DeclareSeconds <= 0 || s.ConnectSeconds <= 0 ||
		s.ElapsedSeconds < 0.2 || s.BrokerRSSKiB == 0 || s.Interrupted {
		t.Fatalf("idle summary: %+v", s)
	}
	// The queues are gone: a passive declare of one fails with 404.
	conn, ch, err := openChannel(o.url, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.close()
	if _, err := ch.QueueDeclarePassive(fmt.Sprintf(idleQueuePattern, 7), true, false, false, false, nil); err == nil {
		t.Fatal("idle scenario left its queues behind")
	}
}

// TestProbeFirstDelivery: probe waits for a queue's first message, leaves it
// in the queue, and gives up with an error when none comes.
func TestProbeFirstDelivery(t *testing.T) {
	url := brokerURL(t)
	conn, ch, err := openChannel(url, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.close()
	if _, err := ch.QueueDeclare("warren-perf-probe", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	short := []string{"--url", url, "--queue", "warren-perf-probe", "--timeout", "100ms"}
	if code := realMain(append([]string{"probe"}, short...), &out, &errOut); code != exitFail {
		t.Fatalf("probe of an empty queue: exit %d, stdout %q", code, out.String())
	}
	if err := ch.Publish("", "warren-perf-probe", false, false, amqp.Publishing{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := realMain([]string{"probe", "--url", url, "--queue", "warren-perf-probe", "--json"}, &out, &errOut); code != exitOK {
		t.Fatalf("probe: exit %d, stderr %s", code, errOut.String())
	}
	var res probeResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Queue != "warren-perf-probe" || res.Seconds <= 0 {
		t.Fatalf("probe result %q: %+v %v", out.String(), res, err)
	}
	if n := queueDepth(t, url, "warren-perf-probe"); n != 1 {
		t.Fatalf("probe left %d messages, want the 1 it looked at", n)
	}
	if code := realMain([]string{"probe"}, &out, &errOut); code != exitUsage {
		t.Fatalf("probe without --queue: exit %d", code)
	}
}

// mustRunScenario runs the preset called name with o and fails the test on
// any error.
func mustRunScenario(t *testing.T, name string, o scenarioOptions) ScenarioResult {
	t.Helper()
	sc, err := findScenario(name)
	if err != nil {
		t.Fatal(err)
	}
	res, err := runScenario(context.Background(), sc, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
