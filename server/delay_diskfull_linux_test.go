package server

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestDiskFullDelayedIndexRecoversWithoutRestart fills the disk (a tmpfs of
// the broker's own) while persistent messages are published into a durable
// delaying exchange, so its index fails a write, then frees the space while
// the broker runs: delayed publishes are confirmed again without a restart,
// every confirmed message fires into the queue exactly once, and after a
// restart none fires again.
func TestDiskFullDelayedIndexRecoversWithoutRestart(t *testing.T) {
	dir, addr, url := crashEnv(t, "delayed disk-full recovery test")
	var log lockedBuffer
	b := startTmpfsBroker(t, dir, addr, 8<<20, &log, "WARREN_CRASH_SEGMENT_SIZE=1048576")
	conn, ch := dialURL(t, url)
	defer func() { conn.Close() }()
	must(t, ch.ExchangeDeclare("later", "x-delayed-message", true, false, false, false,
		amqp091.Table{"x-delayed-type": "direct"}))
	_, err := ch.QueueDeclare("fired", true, false, false, false, nil)
	must(t, err)
	must(t, ch.QueueBind("fired", "k", "later", false, nil))
	must(t, ch.Confirm(false))
	pub := &confirmLedger{ch: ch, exchange: "later", key: "k", headers: amqp091.Table{"x-delay": 200}} // firing all along, so some fire in the round that fails
	for range 50 {
		if !pub.publish(t) {
			t.Fatal("publish nacked before the disk filled")
		}
	}

	// The store needs a new page every few messages, the index one every
	// 128: with the disk full, give back one page at a time until the index
	// asks for one while the store still has room in its own.
	filler := b.tmpfsPath(dir, "filler")
	fillTmpfs(t, filler, 0)
	const indexDown = "delayed messages index write failed"
	for round := 0; round < 400 && !strings.Contains(log.String(), indexDown); round++ {
		for i := 0; i < 300 && pub.publish(t); i++ {
		}
		st, err := os.Stat(filler)
		must(t, err)
		must(t, os.Truncate(filler, max(st.Size()-4096, 0)))
	}
	for i := 0; i < 50; i++ {
		pub.publish(t) // a few more while the index is down: nacked
	}
	if !strings.Contains(log.String(), indexDown) {
		t.Fatalf("the delayed index did not fail although the disk filled (%d confirmed, %d nacked)", len(pub.acked), pub.nacks)
	}
	nackedFull := pub.nacks
	must(t, os.Remove(filler)) // space returns
	waitFor(t, 15*time.Second, "delayed publishes to be confirmed again", func() bool { return pub.publish(t) })
	for range 200 {
		if !pub.publish(t) {
			t.Fatal("a delayed publish was nacked after the space returned")
		}
	}
	seen := map[string]int{}
	drain := func() {
		for {
			m, ok, err := ch.Get("fired", true)
			must(t, err)
			if !ok {
				return
			}
			seen[m.MessageId]++
		}
	}
	waitFor(t, 30*time.Second, "every confirmed delayed message to fire", func() bool {
		drain()
		for _, id := range pub.acked {
			if seen[id] == 0 {
				return false
			}
		}
		return true
	})
	for id, n := range seen {
		if n > 1 {
			t.Errorf("%s fired %d times", id, n)
		}
	}
	must(t, b.cmd.Process.Signal(syscall.SIGHUP))
	waitFor(t, 10*time.Second, "the broker to close for its restart", conn.IsClosed)
	waitFor(t, 20*time.Second, "the broker to serve again", func() bool {
		c, err := amqp091.Dial(url)
		if err == nil {
			conn = c
		}
		return err == nil
	})
	ch, err = conn.Channel()
	must(t, err)
	time.Sleep(2 * time.Second) // longer than every delay: anything left would fire now
	q, err := ch.QueueDeclarePassive("fired", true, false, false, false, nil)
	must(t, err)
	if q.Messages != 0 {
		t.Errorf("%d delayed messages fired again after a restart", q.Messages)
	}
	out := log.String()
	for _, bad := range []string{"cannot be read", "delayed message index ack failed", "miscounted"} {
		if n := strings.Count(out, bad); n > 0 {
			t.Errorf("%d log lines with %q", n, bad)
		}
	}
	if n := strings.Count(out, indexDown); n > 4 {
		t.Errorf("the index failure logged %d times: not once per failure", n)
	}
	if n := strings.Count(out, "a delayed message could not be stored"); n > 0 {
		t.Errorf("%d refused delayed publishes logged one by one", n)
	}
	t.Logf("%d confirmed, %d nacked (%d while the disk was full)", len(pub.acked), pub.nacks, nackedFull)
}
