package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestManyDurableQueuesUnderLowFileLimit: a broker process limited to 256
// descriptors declares 2,000 durable queues and takes a persistent message
// for each; every message is there after a crash and after a clean restart.
// Without the index file cache each durable queue held a descriptor, and the
// declares failed with "too many open files" at about 250 queues.
func TestManyDurableQueuesUnderLowFileLimit(t *testing.T) {
	dir, addr, url := crashEnv(t, "descriptor-limit test")
	const queues = 2000
	limit := "WARREN_CRASH_BROKER_NOFILE=256"
	b := startCrashBroker(t, dir, addr, limit)
	start := time.Now()
	conn, ch := dialURL(t, url)
	must(t, ch.Confirm(false))
	confirms := make([]*amqp091.DeferredConfirmation, 0, queues)
	for i := range queues {
		name := fdQueueName(i)
		if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
			t.Fatalf("declaring durable queue %d of %d: %v", i+1, queues, err)
		}
		dc, err := ch.PublishWithDeferredConfirm("", name, false, false,
			amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(name)})
		must(t, err)
		confirms = append(confirms, dc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, dc := range confirms {
		ok, err := dc.WaitContext(ctx)
		if err != nil || !ok {
			t.Fatalf("publish to %s: confirmed=%v err=%v", fdQueueName(i), ok, err)
		}
	}
	conn.Close()
	t.Logf("declared and published: %s", time.Since(start))
	b.kill()

	b = startCrashBroker(t, dir, addr, limit)
	t.Logf("restarted: %s", time.Since(start))
	checkFDQueues(t, url, queues, false)
	t.Logf("checked: %s", time.Since(start))
	if err := b.stop(time.Minute); err != nil {
		t.Fatal(err)
	}
	startCrashBroker(t, dir, addr, limit)
	checkFDQueues(t, url, queues, true)
}

func fdQueueName(i int) string { return fmt.Sprintf("fd-%04d", i) }

// checkFDQueues checks that each of the n queues holds its one message; with
// take it also consumes it and checks the body.
func checkFDQueues(t *testing.T, url string, n int, take bool) {
	t.Helper()
	conn, ch := dialURL(t, url)
	defer conn.Close()
	for i := range n {
		name := fdQueueName(i)
		q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
		if err != nil || q.Messages != 1 {
			t.Fatalf("queue %s after restart: %d messages, err %v; want 1", name, q.Messages, err)
		}
		if !take {
			continue
		}
		m, ok, err := ch.Get(name, true)
		if err != nil || !ok || string(m.Body) != name {
			t.Fatalf("get from %s: ok=%v body=%q err=%v", name, ok, m.Body, err)
		}
	}
}

// TestDefaultMaxOpenIndexFiles: index files get half of what the socket
// share leaves, so the two never add up past the descriptor limit.
func TestDefaultMaxOpenIndexFiles(t *testing.T) {
	for _, c := range []struct {
		fdLimit uint64
		want    int
	}{{20000, 1045}, {1024, 96}, {256, 57}, {1 << 20, 52473}, {0, 4096}, {1 << 40, 4096}} {
		got := defaultMaxOpenIndexFiles(c.fdLimit)
		if got != c.want {
			t.Errorf("limit %d: %d index files, want %d", c.fdLimit, got, c.want)
		}
		if c.fdLimit > 0 && c.fdLimit < 1<<31 && int64(got)+socketShare(c.fdLimit) > int64(c.fdLimit) {
			t.Errorf("limit %d: %d index files and %d sockets exceed it", c.fdLimit, got, socketShare(c.fdLimit))
		}
	}
}
