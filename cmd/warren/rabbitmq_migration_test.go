package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// migrationSteps is the README's "Migrating from RabbitMQ" shell block cut
// at its "# N." comments, so the test runs what the README says.
func migrationSteps(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	fedMust(t, err)
	s := string(raw)
	i := strings.Index(s, "## Migrating from RabbitMQ")
	if i < 0 {
		t.Fatal("README has no Migrating from RabbitMQ section")
	}
	s = s[i:]
	start := strings.Index(s, "```sh\n")
	end := strings.Index(s[start+6:], "```")
	if start < 0 || end < 0 {
		t.Fatal("the migration section has no sh block")
	}
	block := s[start+6 : start+6+end]
	var steps []string
	for _, part := range regexp.MustCompile(`(?m)^# \d+\. `).Split(block, -1)[1:] {
		steps = append(steps, "# "+part)
	}
	if len(steps) != 4 {
		t.Fatalf("README migration block has %d steps, the test knows 4", len(steps))
	}
	return steps
}

// confirmedPublisher publishes persistent messages to queue on ch with
// confirms until stop closes or max are out, recording each confirmed id.
type confirmedPublisher struct {
	mu        sync.Mutex
	confirmed []string
	err       error
	stop      chan struct{}
	wg        sync.WaitGroup
}

func startPublisher(ch *amqp091.Channel, queue, prefix string, max int) *confirmedPublisher {
	p := &confirmedPublisher{stop: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for i := 0; i < max; i++ {
			select {
			case <-p.stop:
				return
			default:
			}
			id := prefix + strconv.Itoa(i)
			dc, err := ch.PublishWithDeferredConfirm("", queue, false, false,
				amqp091.Publishing{DeliveryMode: amqp091.Persistent, MessageId: id, Body: []byte(id)})
			if err == nil && !dc.Wait() {
				err = fmt.Errorf("%s nacked", id)
			}
			p.mu.Lock()
			if err != nil {
				p.err = err
				p.mu.Unlock()
				return
			}
			p.confirmed = append(p.confirmed, id)
			p.mu.Unlock()
			time.Sleep(2 * time.Millisecond) // an application's pace, not a flood
		}
	}()
	return p
}

// halt stops the publisher and returns what it had confirmed.
func (p *confirmedPublisher) halt(t testing.TB) []string {
	t.Helper()
	close(p.stop)
	p.wg.Wait()
	if p.err != nil {
		t.Fatalf("publisher: %v", p.err)
	}
	return p.confirmed
}

func (p *confirmedPublisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.confirmed)
}

// The README's migration commands, run by sh with curl against a private
// RabbitMQ 3.10.8 node and Warren: definitions move, the shovel moves a
// backlog and what a publisher keeps sending to RabbitMQ, the consumer on
// Warren gets every confirmed message exactly once, also those published to
// Warren after the publishers move.
func TestMigrationFromRabbitMQ(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed; the README's commands use it")
	}
	steps := migrationSteps(t)
	rmq := startRabbit(t)
	w := startFedBroker(t, "migrate")
	defs := filepath.Join(t.TempDir(), "defs.json")
	sh := func(step string) string {
		t.Helper()
		step = strings.NewReplacer("127.0.0.1:15672", fmt.Sprintf("127.0.0.1:%d", rmq.mgmtPort),
			"127.0.0.1:15673", w.api.Addr().String(), "127.0.0.1:5672", fmt.Sprintf("127.0.0.1:%d", rmq.amqpPort),
			"/tmp/defs.json", defs).Replace(step)
		out, err := exec.Command("sh", "-ec", step).CombinedOutput()
		if err != nil {
			t.Fatalf("README step failed: %v\n%s\n%s", err, step, out)
		}
		return string(out)
	}
	rch := rmq.channel()
	_, err := rch.QueueDeclare("orders", true, false, false, false, amqp091.Table{"x-max-length": int64(100000)})
	fedMust(t, err)
	fedMust(t, rch.ExchangeDeclare("orders.x", "direct", true, false, false, false, nil))
	fedMust(t, rch.QueueBind("orders", "new", "orders.x", false, nil))
	fedMust(t, rch.Confirm(false))
	backlog := startPublisher(rch, "orders", "backlog-", 50)
	fedWait(t, 20*time.Second, "the backlog on RabbitMQ", func() bool { return backlog.count() == 50 })
	want := backlog.halt(t)

	sh(steps[0])
	if out := sh(steps[1]); strings.TrimSpace(out) != "204" {
		t.Fatalf("import answered %q", out)
	}
	q := w.srv.Vhost("/").LookupQueue("orders")
	if q == nil || q.Info().Arguments["x-max-length"] != int64(100000) {
		t.Fatalf("imported queue orders: %v", q)
	}
	if bs := w.srv.Vhost("/").LookupExchange("orders.x").SourceBindings(); len(bs) != 1 || bs[0].Destination != "orders" {
		t.Fatalf("imported bindings of orders.x: %+v", bs)
	}

	// Consumers first: on Warren, manual acks, each id counted.
	wch := w.channel()
	fedMust(t, wch.Qos(50, 0, false))
	ds, err := wch.Consume("orders", "", false, false, false, false, nil)
	fedMust(t, err)
	got := map[string]int{}
	receive := func(n int, what string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for len(got) < n {
			select {
			case m := <-ds:
				got[m.MessageId]++
				fedMust(t, m.Ack(false))
			case <-deadline:
				_, shovels := w.httpGet("/api/shovels")
				t.Fatalf("Warren's consumer has %d of %d messages (%s); shovels: %s", len(got), n, what, shovels)
			}
		}
	}
	live := startPublisher(rch, "orders", "live-", 3000)
	if out := sh(steps[2]); strings.TrimSpace(out) != "201" {
		t.Fatalf("shovel PUT answered %q", out)
	}
	receive(len(want)+200, "the backlog and the shovel moving live messages")
	want = append(want, live.halt(t)...) // the publishers move to Warren
	ch := w.channel()
	fedMust(t, ch.Confirm(false))
	after := startPublisher(ch, "orders", "warren-", 100)
	fedWait(t, 20*time.Second, "publishing to Warren", func() bool { return after.count() == 100 })
	want = append(want, after.halt(t)...)
	receive(len(want), "every confirmed message")
	waitRabbitReady(t, rch, "orders", 0)
	if out := sh(steps[3]); !strings.HasSuffix(strings.TrimSpace(out), "204") {
		t.Fatalf("step 4 answered %q", out)
	}
	for _, id := range want {
		if got[id] != 1 {
			t.Errorf("%s received %d times", id, got[id])
		}
	}
	if len(got) != len(want) {
		t.Errorf("received %d distinct messages, published %d", len(got), len(want))
	}
	if code, body := w.httpGet("/api/shovels"); code != 200 || strings.Contains(body, "move-orders") {
		t.Errorf("shovel still listed after its delete: %d %s", code, body)
	}
}
