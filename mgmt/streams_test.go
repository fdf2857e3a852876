package mgmt

import (
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestMgmtStreamDeclareAndFigures declares a stream through the API, publishes
// to it and consumes part of it over AMQP, and checks the stream's figures on
// GET /api/queues/{vhost}/{name} and in the list.
func TestMgmtStreamDeclareAndFigures(t *testing.T) {
	e := newEnv(t)
	args := map[string]any{"x-queue-type": "stream", "x-stream-max-segment-size-bytes": 2048}
	e.must(e.put("/api/queues/%2F/s", map[string]any{"durable": true, "arguments": args}), 201, "declare stream")
	e.must(e.put("/api/queues/%2F/s", map[string]any{"durable": true, "arguments": args}), 204, "redeclare stream")
	if r := e.put("/api/queues/%2F/s2", map[string]any{"durable": false, "arguments": args}); r.status < 400 {
		t.Errorf("non-durable stream declared: %d %s", r.status, r.body)
	}
	q := e.must(e.get("/api/queues/%2F/s"), 200, "get empty stream").object(t)
	if q["type"] != "stream" || num(t, q["first_offset"]) != 0 || q["last_offset"] != nil || num(t, q["segments"]) != 1 ||
		num(t, q["segment_size_bytes"]) != 2048 || num(t, q["max_length_bytes"]) != 0 || num(t, q["tracking_names"]) != 0 {
		t.Fatalf("empty stream: %v", q)
	}

	conn := e.dial("")
	ch := e.channel(conn)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 100))
	const n = 60
	for i := range n {
		body := fmt.Sprintf("message %03d %s", i, make([]byte, 100))
		if err := ch.Publish("", "s", false, false, amqp091.Publishing{Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	awaitConfirms(t, confirms, n)
	cch := e.channel(conn)
	if err := cch.Qos(5, 0, false); err != nil {
		t.Fatal(err)
	}
	d, err := cch.Consume("s", "reader", false, false, false, false, amqp091.Table{"x-stream-offset": int64(10)})
	if err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 20; i++ {
		m := <-d
		if off := m.Headers["x-stream-offset"]; off != int64(i) {
			t.Fatalf("delivery at offset %v, want %d", off, i)
		}
		if err := m.Ack(false); err != nil {
			t.Fatal(err)
		}
	}

	// The reader holds 5 unacked deliveries (20..24) and waits for credit: its
	// next offset is 25.
	var got map[string]any
	waitFor(t, 5*time.Second, func() error {
		got = e.must(e.get("/api/queues/%2F/s"), 200, "get stream").object(t)
		cs, _ := got["stream_consumers"].([]any)
		if len(cs) != 1 || num(t, field(cs[0], "offset")) != 25 {
			return errorf("stream_consumers %v", got["stream_consumers"])
		}
		return nil
	})
	if got["type"] != "stream" || num(t, got["first_offset"]) != 0 || num(t, got["last_offset"]) != n-1 ||
		num(t, got["next_offset"]) != n {
		t.Errorf("offsets: first %v last %v next %v", got["first_offset"], got["last_offset"], got["next_offset"])
	}
	if segs := num(t, got["segments"]); segs < 3 {
		t.Errorf("segments %v, want several (2 KiB segments, %d messages of ~140 bytes)", segs, n)
	}
	if b := num(t, got["bytes"]); b < n*100 {
		t.Errorf("bytes %v, want at least %d", b, n*100)
	}
	c0 := got["stream_consumers"].([]any)[0]
	if field(c0, "consumer_tag") != "reader" || num(t, field(c0, "in_flight")) != 5 {
		t.Errorf("consumer %v", c0)
	}

	list := e.must(e.get("/api/queues/%2F"), 200, "list").array(t)
	found := false
	for _, x := range list {
		if field(x, "name") == "s" {
			found = true
			if field(x, "type") != "stream" || num(t, field(x, "last_offset")) != n-1 || field(x, "segments") == nil {
				t.Errorf("stream in list: %v", x)
			}
		}
	}
	if !found {
		t.Fatalf("stream missing from the list")
	}
	basic := e.must(e.get("/api/queues/%2F?disable_stats=true"), 200, "basic list").array(t)
	for _, x := range basic {
		if field(x, "name") == "s" && field(x, "first_offset") == nil {
			t.Errorf("basic listing lacks stream figures: %v", x)
		}
	}
}
