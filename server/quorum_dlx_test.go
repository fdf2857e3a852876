package server

import (
	"strconv"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/replica"
)

// withDLXRetry shortens the dead-letter retry interval for one test.
func withDLXRetry(t *testing.T, d time.Duration) {
	old := quorumDLXRetry
	quorumDLXRetry = d
	t.Cleanup(func() { quorumDLXRetry = old })
}

// atLeastOnceArgs declare a quorum queue dead-lettering at least once to
// exchange "dlx".
func atLeastOnceArgs(extra amqp091.Table) amqp091.Table {
	a := amqp091.Table{"x-dead-letter-exchange": "dlx", "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"}
	for k, v := range extra {
		a[k] = v
	}
	return a
}

// rejectAll gets n messages from queue with acks and rejects each without
// requeue: each is dead-lettered as rejected.
func rejectAll(t *testing.T, ch *amqp091.Channel, queue string, n int) {
	t.Helper()
	for i := range n {
		d, ok, err := ch.Get(queue, false)
		must(t, err)
		if !ok {
			t.Fatalf("get %d of %d: queue empty", i, n)
		}
		must(t, d.Reject(false))
	}
}

// TestQuorumDeadLetterAtLeastOnce: rejected messages of an at-least-once
// quorum queue stay in its log while the dead-letter exchange is absent
// and while it routes nowhere, count towards its length limit (a publish
// past it is nacked), survive a restart, and move to the target once one
// is bound, each exactly once with its x-death; then the source holds
// nothing, after a restart too.
func TestQuorumDeadLetterAtLeastOnce(t *testing.T) {
	withDLXRetry(t, 50*time.Millisecond)
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	_, ch := ts.channel(t)
	declareQuorum(t, ch, "src", atLeastOnceArgs(amqp091.Table{"x-max-length": int32(5)}))
	if s := ts.Vhost("/").queue("src").Status().DeadLetterStrategy; s != "at-least-once" {
		t.Fatalf("effective strategy %q, want at-least-once", s)
	}
	publishConfirmedBodies(t, ch, "src", 5, func(i int) string { return "m" + strconv.Itoa(i) })
	rejectAll(t, ch, "src", 5)
	src := func(ts *testServer) QueueInfo { return ts.Vhost("/").queue("src").Info() }
	waitFor(t, 5*time.Second, "5 messages held for the dead-letter exchange", func() bool {
		i := src(ts)
		return i.DLXMessages == 5 && i.DLXBytes == 10 && i.Ready == 0 && i.Unacked == 0
	})
	// Held ones count towards x-max-length 5: reject-publish nacks.
	must(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	must(t, ch.Publish("", "src", false, false, amqp091.Publishing{Body: []byte("over")}))
	if c := <-confirms; c.Ack {
		t.Fatal("a publish past the length limit, dead letters counted, was acked")
	}
	// The exchange, routing nowhere: still held after many retries.
	must(t, ch.ExchangeDeclare("dlx", "fanout", true, false, false, false, nil))
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if i := src(ts); i.DLXMessages != 5 {
			t.Fatalf("unroutable dead letters: %d held, want 5", i.DLXMessages)
		}
		time.Sleep(20 * time.Millisecond) // bounded: the count must not move
	}
	waitFor(t, 5*time.Second, "the discards in the log", func() bool { return quorumLogHasOp(ts.Vhost("/").queue("src"), qrDiscard, 5) })
	must(t, ts.Close())

	ts = startServer(t, withDataDir(dir))
	_, ch = ts.channel(t)
	if i := src(ts); i.DLXMessages != 5 || i.Ready != 0 {
		t.Fatalf("after restart: %d held, %d ready; want 5 and 0", i.DLXMessages, i.Ready)
	}
	if _, err := ch.QueueDeclare("target", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	must(t, ch.QueueBind("target", "", "dlx", false, nil))
	waitFor(t, 5*time.Second, "the dead letters to move to the target", func() bool {
		return src(ts).DLXMessages == 0
	})
	for i := range 5 {
		d, ok, err := ch.Get("target", true)
		must(t, err)
		deaths, _ := d.Headers["x-death"].([]any)
		if !ok || string(d.Body) != "m"+strconv.Itoa(i) || len(deaths) != 1 {
			t.Fatalf("target message %d: %q ok=%v x-death=%v", i, d.Body, ok, deaths)
		}
		if r := deaths[0].(amqp091.Table)["reason"]; r != "rejected" {
			t.Fatalf("x-death reason %v", r)
		}
	}
	if _, ok, _ := ch.Get("target", true); ok {
		t.Fatal("a dead letter reached the target twice")
	}
	waitFor(t, 5*time.Second, "the settlements in the log", func() bool { return quorumLogHasOp(ts.Vhost("/").queue("src"), qrSettle, 5) })
	must(t, ts.Close())
	ts = startServer(t, withDataDir(dir))
	if i := src(ts); i.DLXMessages != 0 || i.Ready != 0 {
		t.Fatalf("after the move and a restart: %d held, %d ready", i.DLXMessages, i.Ready)
	}
}

// quorumLogHasOp reports whether q's log holds records of op naming at
// least n ids in all.
func quorumLogHasOp(q *Queue, op byte, n int) bool {
	h, ok := q.quorumHandle()
	if !ok {
		return false
	}
	h.mu.Lock()
	l := h.log
	h.mu.Unlock()
	if l == nil {
		return false
	}
	ms, err := replayOps(l, op)
	return err == nil && ms >= n
}

// TestQuorumDeadLetterStrategyFallback: at-least-once with the default
// overflow (drop-head) is served at most once, as RabbitMQ 3.10 falls
// back, and the API says so; without a dead-letter exchange there is no
// strategy.
func TestQuorumDeadLetterStrategyFallback(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	must(t, ch.ExchangeDeclare("dlx", "fanout", true, false, false, false, nil))
	declareQuorum(t, ch, "dh", amqp091.Table{"x-dead-letter-exchange": "dlx", "x-dead-letter-strategy": "at-least-once"})
	declareQuorum(t, ch, "none", amqp091.Table{"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"})
	if s := ts.Vhost("/").queue("dh").Status().DeadLetterStrategy; s != "at-most-once" {
		t.Fatalf("drop-head: effective strategy %q, want at-most-once", s)
	}
	if s := ts.Vhost("/").queue("none").Status().DeadLetterStrategy; s != "" {
		t.Fatalf("no dead-letter exchange: strategy %q, want none", s)
	}
	publishConfirmedBodies(t, ch, "dh", 3, func(i int) string { return "m" })
	rejectAll(t, ch, "dh", 3)
	waitFor(t, 5*time.Second, "the at-most-once dead letters gone", func() bool {
		i := ts.Vhost("/").queue("dh").Info()
		return i.Ready == 0 && i.Unacked == 0 && i.DeadLettered == 3
	})
	if i := ts.Vhost("/").queue("dh").Info(); i.DLXMessages != 0 {
		t.Fatalf("at most once held %d", i.DLXMessages)
	}
}

// TestClusterQuorumDeadLetterFailover: 50 messages rejected on a
// three-replica at-least-once queue whose dead-letter exchange does not
// exist stay held; its leader's node stops; the new leader holds all 50
// and, once the exchange and a target exist, moves every one of them.
func TestClusterQuorumDeadLetterFailover(t *testing.T) {
	withDLXRetry(t, 50*time.Millisecond)
	nodes := startTestCluster(t, 3, 3)
	leader := nodes[0]
	_, lch := leader.channel(t)
	declareQuorum(t, lch, "src", atLeastOnceArgs(nil))
	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.name+" to know the queue", func() bool {
			l, _, rs := quorumPlacementOn(n, "src")
			return l == leader.name && len(rs) == 3
		})
	}
	const n = 50
	publishConfirmedBodies(t, lch, "src", n, func(i int) string { return "m" + strconv.Itoa(i) })
	rejectAll(t, lch, "src", n)
	lq := leader.Vhost("/").queue("src")
	waitFor(t, 10*time.Second, "the discards durable on every replica", func() bool {
		if lq.Info().DLXMessages != n {
			return false
		}
		for _, m := range nodes[1:] {
			if !quorumLogHasOp(m.Vhost("/").queue("src"), qrDiscard, n) {
				return false
			}
		}
		return true
	})
	must(t, leader.Close())
	survivors := nodes[1:]
	var newLeader *clusterNode
	waitFor(t, 30*time.Second, "a new quorum queue leader", func() bool {
		for _, s := range survivors {
			if l, epoch, _ := quorumPlacementOn(s, "src"); epoch >= 2 && l == s.name {
				newLeader = s
			}
		}
		return newLeader != nil && newLeader.Vhost("/").queue("src").Info().DLXMessages == n
	})
	_, nch := newLeader.channel(t)
	must(t, nch.ExchangeDeclare("dlx", "fanout", true, false, false, false, nil))
	if _, err := nch.QueueDeclare("target", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	must(t, nch.QueueBind("target", "", "dlx", false, nil))
	nq := newLeader.Vhost("/").queue("src")
	waitFor(t, 15*time.Second, "every dead letter moved", func() bool { return nq.Info().DLXMessages == 0 })
	seen := make(map[string]bool)
	for {
		d, ok, err := nch.Get("target", true)
		must(t, err)
		if !ok {
			break
		}
		seen[string(d.Body)] = true
	}
	if len(seen) != n {
		t.Fatalf("target got %d distinct dead letters, want %d", len(seen), n)
	}
}

// replayOps counts the ids that l's records of op name.
func replayOps(l replica.Log, op byte) (int, error) {
	n := 0
	err := l.Read(l.FirstOffset(), 1<<30, func(rec replica.Record) bool {
		if rec.Kind != replica.KindData {
			return true
		}
		if o, _, ids, err := decodeQuorumRecord(rec.Data); err == nil && o == op {
			n += len(ids)
		}
		return true
	})
	return n, err
}

// TestQuorumDeadLetterStrategyPolicy: a policy's dead-letter-strategy,
// dead-letter-exchange and overflow make a quorum queue dead-letter at
// least once (a rejected message is held); a declared
// x-dead-letter-strategy wins over the policy's.
func TestQuorumDeadLetterStrategyPolicy(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	declareQuorum(t, ch, "p.q", nil)
	declareQuorum(t, ch, "p.own", amqp091.Table{"x-dead-letter-strategy": "at-most-once"})
	if _, err := ts.PutPolicy(Policy{Vhost: "/", Name: "alo", Pattern: "^p\\.", ApplyTo: ApplyToQueues, Definition: map[string]any{
		"dead-letter-strategy": "at-least-once", "dead-letter-exchange": "dlx", "overflow": "reject-publish"}}, false); err != nil {
		t.Fatal(err)
	}
	vh := ts.Vhost("/")
	waitFor(t, 5*time.Second, "the policy's strategy", func() bool {
		return vh.queue("p.q").Status().DeadLetterStrategy == "at-least-once" &&
			vh.queue("p.own").Status().DeadLetterStrategy == "at-most-once"
	})
	publishConfirmedBodies(t, ch, "p.q", 1, func(int) string { return "m" })
	rejectAll(t, ch, "p.q", 1)
	waitFor(t, 5*time.Second, "the rejected message held", func() bool { return vh.queue("p.q").Info().DLXMessages == 1 })
}
