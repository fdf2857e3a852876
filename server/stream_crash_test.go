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
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	url := "amqp://guest:guest@" + addr + "/"
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
	conn, err := amqp091.Dial(url)
	must(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	must(t, err)
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
