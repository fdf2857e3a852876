package server

import (
	"strconv"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/replica"
)

// TestQuorumQueueRestart: a standalone node's quorum queue keeps its
// confirmed messages in its log across a restart; acked ones are gone, a
// delivered and unacked one comes back redelivered with x-delivery-count
// one higher (its consumer was lost with the node), and the queue reports its type,
// leader and members.
func TestQuorumQueueRestart(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	conn, ch := ts.channel(t)
	declareQuorum(t, ch, "qq", nil)
	publishConfirmedBodies(t, ch, "qq", 10, func(i int) string { return "m" + strconv.Itoa(i) })

	cch, err := conn.Channel()
	must(t, err)
	must(t, cch.Qos(3, 0, false))
	ds, err := cch.Consume("qq", "c", false, false, false, false, nil)
	must(t, err)
	var got []amqp091.Delivery
	for range 3 {
		got = append(got, recv(t, ds))
	}
	for i, d := range got {
		if string(d.Body) != "m"+strconv.Itoa(i) || d.Redelivered {
			t.Fatalf("delivery %d: %q redelivered=%v", i, d.Body, d.Redelivered)
		}
	}
	must(t, got[2].Nack(false, true)) // requeued: count 1, delivered again at once
	again := recv(t, ds)
	if string(again.Body) != "m2" || !again.Redelivered || again.Headers["x-delivery-count"] != int64(1) {
		t.Fatalf("requeued m2: %q redelivered=%v headers=%v", again.Body, again.Redelivered, again.Headers)
	}
	must(t, got[0].Ack(false))
	must(t, got[1].Ack(false))
	for _, want := range []string{"m3", "m4"} { // the credit the acks freed
		if d := recv(t, ds); string(d.Body) != want {
			t.Fatalf("after the acks: %q, want %s", d.Body, want)
		}
	}
	info := ts.Vhost("/").queue("qq").Status()
	if info.Type != "quorum" || info.Leader != ts.cfg.NodeName {
		t.Fatalf("info: type %q leader %q", info.Type, info.Leader)
	}
	if len(info.Members) != 1 || info.Members[0] != ts.cfg.NodeName || len(info.Online) != 1 {
		t.Fatalf("info: members %v online %v", info.Members, info.Online)
	}
	// Settlements are appended without waiting for their commit: wait
	// until the log has them before the restart.
	waitFor(t, 5*time.Second, "settlements in the log", func() bool {
		return quorumLogHas(ts.Vhost("/").queue("qq"), 2, 1)
	})
	must(t, ts.Close())

	ts2 := startServer(t, withDataDir(dir))
	_, ch2 := ts2.channel(t)
	q := ts2.Vhost("/").queue("qq")
	if n, _ := q.h.counts(); n != 8 {
		t.Fatalf("ready after restart: %d, want 8 (10 less 2 acked)", n)
	}
	want := []struct {
		body  string
		redel bool
		count any
	}{
		{"m2", true, int64(2)}, {"m3", true, int64(1)}, {"m4", true, int64(1)}, {"m5", false, nil},
	}
	for _, w := range want {
		d, ok, err := ch2.Get("qq", false)
		must(t, err)
		if !ok || string(d.Body) != w.body || d.Redelivered != w.redel || d.Headers["x-delivery-count"] != w.count {
			t.Fatalf("get: %q redelivered=%v count=%v, want %+v", d.Body, d.Redelivered, d.Headers["x-delivery-count"], w)
		}
		must(t, d.Ack(false))
	}
}

// quorumLogHas reports whether the queue's log has at least settles
// SETTLE ids and returns RETURN ids.
func quorumLogHas(q *Queue, settles, returns int) bool {
	h := q.h.(*quorumQueue)
	h.mu.Lock()
	l := h.log
	h.mu.Unlock()
	if l == nil {
		return false
	}
	s, r := 0, 0
	err := l.Read(l.FirstOffset(), 1<<30, func(rec replica.Record) bool {
		op, _, ids, err := decodeQuorumRecord(rec.Data)
		if err != nil {
			return true
		}
		switch op {
		case qrSettle:
			s += len(ids)
		case qrReturn:
			r += len(ids)
		}
		return true
	})
	return err == nil && s >= settles && r >= returns
}

// TestQuorumQueueConfirmWaitsForCommit: a confirm is sent only once the
// ENQ record is committed; a publish whose record is never committed is
// nacked after the confirm timeout.
func TestQuorumQueueConfirmWaitsForCommit(t *testing.T) {
	defer func(d time.Duration) { quorumConfirmTimeout = d }(quorumConfirmTimeout)
	quorumConfirmTimeout = 300 * time.Millisecond
	ts := startServer(t)
	_, ch := ts.channel(t)
	declareQuorum(t, ch, "qq", nil)
	h := ts.Vhost("/").queue("qq").h.(*quorumQueue)
	// Hold commits back: the replica's reports do not reach the queue.
	testHookQuorumHoldCommits.Store(true)
	defer testHookQuorumHoldCommits.Store(false)
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	must(t, ch.Confirm(false))
	must(t, ch.Publish("", "qq", false, false, amqp091.Publishing{Body: []byte("x")}))
	select {
	case c := <-confirms:
		if c.Ack {
			t.Fatal("confirmed before commit")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no nack after the confirm timeout")
	}
	if n, _ := h.counts(); n != 0 {
		t.Fatalf("an uncommitted message is in the queue: %d ready", n)
	}
}

// TestQuorumQueueDeliveryLimit: with x-delivery-limit 1 a message returned
// twice is dead-lettered (to the DLX's queue, with RabbitMQ's
// delivery_limit reason) instead of coming back a third time.
func TestQuorumQueueDeliveryLimit(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	must(t, ch.ExchangeDeclare("dlx", "fanout", true, false, false, false, nil))
	_, err := ch.QueueDeclare("dead", true, false, false, false, nil)
	must(t, err)
	must(t, ch.QueueBind("dead", "", "dlx", false, nil))
	declareQuorum(t, ch, "qq", amqp091.Table{"x-delivery-limit": int32(1), "x-dead-letter-exchange": "dlx"})
	publishConfirmedBodies(t, ch, "qq", 1, func(int) string { return "x" })
	for i := range 2 {
		d, ok, err := ch.Get("qq", false)
		must(t, err)
		if !ok {
			t.Fatalf("get %d: empty", i)
		}
		if i == 1 && d.Headers["x-delivery-count"] != int64(1) {
			t.Fatalf("second delivery: x-delivery-count %v", d.Headers["x-delivery-count"])
		}
		must(t, d.Nack(false, true))
	}
	waitFor(t, 5*time.Second, "the dead letter", func() bool {
		n, _ := ts.Vhost("/").queue("dead").h.counts()
		return n == 1
	})
	d, ok, err := ch.Get("dead", true)
	must(t, err)
	deaths, _ := d.Headers["x-death"].([]any)
	if !ok || len(deaths) != 1 || deaths[0].(amqp091.Table)["reason"] != "delivery_limit" {
		t.Fatalf("dead letter: ok=%v x-death=%v", ok, d.Headers["x-death"])
	}
	if n, _ := ts.Vhost("/").queue("qq").h.counts(); n != 0 {
		t.Fatalf("qq still holds %d", n)
	}
}

// TestQuorumQueueCompacts: once enough messages are settled the log
// reclaims the records below the first live message, and a restart still
// finds the live ones.
func TestQuorumQueueCompacts(t *testing.T) {
	defer func(n int64) { quorumSegmentSize = n }(quorumSegmentSize)
	quorumSegmentSize = 8 << 10
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	_, ch := ts.channel(t)
	declareQuorum(t, ch, "qq", nil)
	n := quorumCompactEvery + 100
	publishConfirmedBodies(t, ch, "qq", n, func(i int) string { return "m" + strconv.Itoa(i) })
	for i := range n - 10 {
		d, ok, err := ch.Get("qq", true)
		must(t, err)
		if !ok || string(d.Body) != "m"+strconv.Itoa(i) {
			t.Fatalf("get %d: %q %v", i, d.Body, ok)
		}
	}
	h := ts.Vhost("/").queue("qq").h.(*quorumQueue)
	waitFor(t, 5*time.Second, "compaction", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		// Whole segments go: the one holding the first live record stays.
		return h.log.FirstOffset() > uint64(n/2)
	})
	must(t, ts.Close())
	ts2 := startServer(t, withDataDir(dir))
	_, ch2 := ts2.channel(t)
	for i := n - 10; i < n; i++ {
		d, ok, err := ch2.Get("qq", true)
		must(t, err)
		if !ok || string(d.Body) != "m"+strconv.Itoa(i) {
			t.Fatalf("after restart get %d: %q %v", i, d.Body, ok)
		}
	}
}
