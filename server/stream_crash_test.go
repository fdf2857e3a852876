package server

import (
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestStreamCrashKill9 kills a broker with SIGKILL while a publisher appends
// to a stream with confirms, three times. After every restart each confirmed
// message is readable from "first", and an offset read before a crash holds
// the same message after it (offsets are never reused for other data).
func TestStreamCrashKill9(t *testing.T) {
	dir, addr, url := crashEnv(t, "crash test")
	seen := map[int64]string{} // offset → body, across rounds
	for round := range 3 {
		b := startCrashBroker(t, dir, addr)
		conn, err := amqp091.Dial(url)
		must(t, err)
		ch, err := conn.Channel()
		must(t, err)
		_, err = ch.QueueDeclare("cs", true, false, false, false, amqp091.Table{"x-queue-type": "stream"})
		must(t, err)
		must(t, ch.Confirm(false))
		confirmed := map[string]bool{}
		deadline := time.Now().Add(300 * time.Millisecond)
		for i := 0; time.Now().Before(deadline); i++ {
			id := fmt.Sprintf("r%d-%d", round, i)
			dc, err := ch.PublishWithDeferredConfirm("", "cs", false, false, amqp091.Publishing{Body: []byte(id)})
			must(t, err)
			if i%10 == 9 { // wait for every tenth, leave the others in flight
				if !dc.Wait() {
					t.Fatalf("publish %s nacked", id)
				}
				confirmed[id] = true
			}
		}
		b.kill()
		conn.Close()

		b = startCrashBroker(t, dir, addr)
		present := readStreamAll(t, url, "cs", fmt.Sprintf("marker-%d", round), seen)
		for id := range confirmed {
			if !present[id] {
				t.Fatalf("round %d: confirmed message %s lost", round, id)
			}
		}
		t.Logf("round %d: %d confirmed, %d messages in the stream", round, len(confirmed), len(seen))
		b.kill()
	}
}

// readStreamAll appends a marker to stream q, reads from "first" up to the
// marker and checks offsets against seen, which it extends. It returns the
// bodies present.
func readStreamAll(t *testing.T, url, q, marker string, seen map[int64]string) map[string]bool {
	t.Helper()
	conn, ch := dialURL(t, url)
	defer conn.Close()
	must(t, ch.Confirm(false))
	dc, err := ch.PublishWithDeferredConfirm("", q, false, false, amqp091.Publishing{Body: []byte(marker)})
	must(t, err)
	if !dc.Wait() {
		t.Fatal("marker nacked")
	}
	must(t, ch.Qos(500, 0, false))
	d, err := ch.Consume(q, "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
	must(t, err)
	present := map[string]bool{}
	last := int64(-1)
	for {
		m := recv(t, d)
		off := m.Headers["x-stream-offset"].(int64)
		if off <= last {
			t.Fatalf("offset %d after %d", off, last)
		}
		last = off
		body := string(m.Body)
		if prev, ok := seen[off]; ok && prev != body {
			t.Fatalf("offset %d held %q before the crash and %q after", off, prev, body)
		}
		seen[off] = body
		present[body] = true
		must(t, m.Ack(false))
		if body == marker {
			return present
		}
	}
}

// TestStreamTrackingKill9 shows tracked offsets surviving kill -9. A cancel
// writes the tracking snapshot before cancel-ok, and a confirm for a publish
// made after the cancel-ok covers every record before it, so that snapshot
// is durable; acks after it may or may not have reached the log. After the
// restart the consumer must resume after the durable offset and not after
// its last ack. Then retention removes every segment that held an explicit
// snapshot, the broker is killed again, and the consumer still resumes: from
// the prologue snapshot at the start of each segment.
func TestStreamTrackingKill9(t *testing.T) {
	dir, addr, url := crashEnv(t, "crash test")
	body := func(i int) string { return fmt.Sprintf("m%04d-%040d", i, 0) }
	index := func(t *testing.T, m amqp091.Delivery) int {
		t.Helper()
		var i int
		if _, err := fmt.Sscanf(string(m.Body), "m%04d-", &i); err != nil {
			t.Fatalf("unexpected body %q", m.Body)
		}
		return i
	}
	track := func(conn *amqp091.Connection, offset string) (*amqp091.Channel, <-chan amqp091.Delivery) {
		t.Helper()
		ch, err := conn.Channel()
		must(t, err)
		must(t, ch.Qos(10, 0, false))
		d, err := ch.Consume("ts", "app-consumer", false, false, false, false,
			amqp091.Table{"x-stream-offset": offset, "x-stream-offset-tracking-name": "app"})
		must(t, err)
		return ch, d
	}
	ackThrough := func(d <-chan amqp091.Delivery, from, to int) {
		t.Helper()
		for i := from; i <= to; i++ {
			m := recv(t, d)
			if got := index(t, m); got != i {
				t.Fatalf("got m%d, want m%d", got, i)
			}
			must(t, m.Ack(false))
		}
	}
	publish := func(conn *amqp091.Connection, from, to int) {
		t.Helper()
		bodies := make([]string, 0, to-from)
		for i := from; i < to; i++ {
			bodies = append(bodies, body(i))
		}
		confirmPublishAll(t, conn, "ts", bodies...)
	}

	b := startCrashBroker(t, dir, addr)
	conn, ch := dialURL(t, url)
	_, err := ch.QueueDeclare("ts", true, false, false, false, amqp091.Table{
		"x-queue-type": "stream", "x-stream-max-segment-size-bytes": int64(4096), "x-max-length-bytes": int64(32 << 10),
	})
	must(t, err)
	publish(conn, 0, 100)
	a, d := track(conn, "first")
	ackThrough(d, 0, 39)
	must(t, a.Cancel("app-consumer", false)) // snapshot app=39, then cancel-ok
	publish(conn, 100, 101)                  // its confirm proves the snapshot durable
	_, d = track(conn, "first")
	ackThrough(d, 40, 59) // acks racing the kill: maybe in a snapshot, maybe not
	b.kill()
	conn.Close()

	b = startCrashBroker(t, dir, addr)
	conn, err = amqp091.Dial(url)
	must(t, err)
	c, d := track(conn, "next")
	m := recv(t, d)
	first := index(t, m)
	if first < 40 || first > 60 {
		t.Fatalf("after kill -9 the consumer resumed at m%d, want m40 (durable offset + 1) to m60 (last ack + 1)", first)
	}
	must(t, m.Ack(false))
	ackThrough(d, first+1, 69)
	must(t, c.Cancel("app-consumer", false))
	t.Logf("resumed at m%d after kill -9", first)

	// Enough data that retention removes every segment holding m0..m100 and
	// the cancel snapshots; a plain consumer at "first" shows when.
	publish(conn, 1000, 1400)
	waitFor(t, 10*time.Second, "retention to remove the old segments", func() bool {
		pc, err := conn.Channel()
		must(t, err)
		defer pc.Close()
		must(t, pc.Qos(1, 0, false))
		pd, err := pc.Consume("ts", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
		must(t, err)
		return index(t, recv(t, pd)) >= 1000
	})
	b.kill()
	conn.Close()

	startCrashBroker(t, dir, addr)
	conn, err = amqp091.Dial(url)
	must(t, err)
	defer conn.Close()
	// With "next" a consumer whose tracking was lost would get nothing; one
	// whose offset (m69, now removed) survived starts at the first retained message.
	_, d = track(conn, "next")
	if i := index(t, recv(t, d)); i < 1000 || i >= 1400 {
		t.Fatalf("after retention and kill -9 the consumer resumed at m%d", i)
	}
}
