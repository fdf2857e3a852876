package server

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// These tests drive queues through queueHandle with a fake consumerSink: no
// sockets, no channels. The broker is real (New, not started), its
// messages enter through the management API's publish, the one publish path.

// fakeSink is a consumerSink that records what queues hand it.
type fakeSink struct {
	mu      sync.Mutex
	got     []fakeDelivery
	cancels []string    // tags of the consumers the queue cancelled
	full    bool        // reserve refuses, as a full write buffer does
	wake    queueHandle // the queue reserve refused while full
}

type fakeDelivery struct {
	tag string
	c   *consumer
	m   outgoing
}

func (f *fakeSink) reserve(_ *consumer, wake queueHandle) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.full {
		f.wake = wake
		return false
	}
	return true
}

func (f *fakeSink) refund(*consumer) {}
func (f *fakeSink) charge(*consumer) {}

func (f *fakeSink) deliver(c *consumer, m outgoing) {
	f.mu.Lock()
	f.got = append(f.got, fakeDelivery{tag: c.tag, c: c, m: m})
	f.mu.Unlock()
}

func (f *fakeSink) cancelled(c *consumer) {
	f.mu.Lock()
	f.cancels = append(f.cancels, c.tag)
	f.mu.Unlock()
}

func (f *fakeSink) subscribed(*consumer) bool { return true }
func (f *fakeSink) owner() consumerOwner      { return consumerOwner{ConnName: "fake"} }

// deliveries returns what the sink received so far and forgets it.
func (f *fakeSink) deliveries() []fakeDelivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.got
	f.got = nil
	return out
}

// fakeBodies are the bodies of ds, each prefixed with its consumer's tag.
func fakeBodies(ds []fakeDelivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.tag + ":" + string(d.m.msg.Body)
	}
	return out
}

// settleFake settles ds through their queue handles by delivery id.
func settleFake(ds []fakeDelivery, kind settleKind) {
	for _, d := range ds {
		d.c.q.settle([]delivery{{q: d.c.q, c: d.c, id: d.m.id}}, kind)
	}
}

// newQueueHarness is a broker that is not listening, with a data directory.
func newQueueHarness(t *testing.T) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.MemoryHighWatermark = 0
	cfg.DiskFreeLimit = 0
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// declareHandle declares a transient queue in vhost / and returns its handle.
func declareHandle(t *testing.T, s *Server, name string, args amqp.Table) queueHandle {
	t.Helper()
	q, aerr := s.Vhost("/").declareQueue(nil, &amqp.QueueDeclare{Queue: name, Arguments: args})
	if aerr != nil {
		t.Fatalf("declare %s: %v", name, aerr)
	}
	return q.h
}

// subscribeFake consumes from h as tag.
func subscribeFake(t *testing.T, h queueHandle, sink *fakeSink, tag string, prefetch uint16, prio int64) *consumer {
	t.Helper()
	c := &consumer{tag: tag, sink: sink, q: h, prefetch: prefetch, priority: prio}
	accepted := false
	if aerr := h.consume(c, func() { accepted = true }); aerr != nil {
		t.Fatalf("consume %s: %v", tag, aerr)
	}
	if !accepted {
		t.Fatalf("consume %s: accepted was not called", tag)
	}
	return c
}

// publishViaAPI publishes bodies to queue name through the default exchange.
func publishViaAPI(t *testing.T, s *Server, name string, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		routed, err := s.Publish("/", Publishing{RoutingKey: name, Body: []byte(b)})
		if err != nil || !routed {
			t.Fatalf("publish %q: routed %v, %v", b, routed, err)
		}
	}
}

// getUnacked takes every ready message of h with basic.get semantics (unacked).
func getUnacked(t *testing.T, h queueHandle) []outgoing {
	t.Helper()
	var out []outgoing
	if _, aerr := h.get(1000, false, func(m outgoing, _ int) { out = append(out, m) }); aerr != nil {
		t.Fatalf("get: %v", aerr)
	}
	return out
}

func outgoingBodies(ms []outgoing) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.msg.Body)
	}
	return out
}

func wantStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

func TestQueueHandleRoundRobin(t *testing.T) {
	s := newQueueHarness(t)
	h := declareHandle(t, s, "rr", nil)
	sink := &fakeSink{}
	for _, tag := range []string{"a", "b", "c"} {
		subscribeFake(t, h, sink, tag, 0, 0)
	}
	publishViaAPI(t, s, "rr", "1", "2", "3", "4", "5", "6")
	wantStrings(t, "deliveries", fakeBodies(sink.deliveries()), []string{"a:1", "b:2", "c:3", "a:4", "b:5", "c:6"})
}

func TestQueueHandlePrefetch(t *testing.T) {
	s := newQueueHarness(t)
	h := declareHandle(t, s, "pf", nil)
	sink := &fakeSink{}
	subscribeFake(t, h, sink, "a", 2, 0)
	publishViaAPI(t, s, "pf", "1", "2", "3", "4", "5")
	first := sink.deliveries()
	wantStrings(t, "up to the prefetch", fakeBodies(first), []string{"a:1", "a:2"})
	if ready, _ := h.counts(); ready != 3 {
		t.Fatalf("ready %d, want 3", ready)
	}
	settleFake(first[:1], settleAck)
	wantStrings(t, "after one ack", fakeBodies(sink.deliveries()), []string{"a:3"})
	if info := h.info(); info.Unacked != 2 || info.Acked != 1 {
		t.Fatalf("unacked %d acked %d, want 2 and 1", info.Unacked, info.Acked)
	}

	// A full write buffer holds deliveries back until the sink wakes the queue.
	sink.mu.Lock()
	sink.full = true
	sink.mu.Unlock()
	settleFake(first[1:], settleAck)
	if got := sink.deliveries(); len(got) != 0 {
		t.Fatalf("delivered %q into a full buffer", fakeBodies(got))
	}
	sink.mu.Lock()
	sink.full = false
	wake := sink.wake
	sink.mu.Unlock()
	if wake != h {
		t.Fatalf("reserve was asked to wake %v, want the queue's handle", wake)
	}
	wake.redispatch()
	wantStrings(t, "after the buffer drained", fakeBodies(sink.deliveries()), []string{"a:4"})
}

func TestQueueHandleConsumerPriorities(t *testing.T) {
	s := newQueueHarness(t)
	h := declareHandle(t, s, "prio", nil)
	sink := &fakeSink{}
	subscribeFake(t, h, sink, "low", 0, 0)
	hi := subscribeFake(t, h, sink, "high", 1, 10)
	publishViaAPI(t, s, "prio", "1", "2", "3")
	got := sink.deliveries()
	// The high-priority consumer takes what its credit allows; the rest
	// go to the next group.
	wantStrings(t, "deliveries", fakeBodies(got), []string{"high:1", "low:2", "low:3"})
	settleFake(got[:1], settleAck)
	publishViaAPI(t, s, "prio", "4")
	wantStrings(t, "after the high one acked", fakeBodies(sink.deliveries()), []string{"high:4"})
	if hi.unacked != 1 {
		t.Fatalf("high has %d unacked, want 1", hi.unacked)
	}
}

func TestQueueHandleSingleActiveConsumer(t *testing.T) {
	s := newQueueHarness(t)
	h := declareHandle(t, s, "sac", amqp.Table{"x-single-active-consumer": true})
	sink := &fakeSink{}
	a := subscribeFake(t, h, sink, "a", 0, 0)
	subscribeFake(t, h, sink, "b", 0, 0)
	publishViaAPI(t, s, "sac", "1", "2", "3")
	got := sink.deliveries()
	wantStrings(t, "only the active consumer", fakeBodies(got), []string{"a:1", "a:2", "a:3"})
	if st := h.status(); st.SingleActiveConsumerTag != "a" {
		t.Fatalf("single active consumer %q, want a", st.SingleActiveConsumerTag)
	}
	// a acks 1 and goes away; its unacked 2 and 3 come back in order and
	// go to b, the next in line, marked redelivered.
	settleFake(got[:1], settleAck)
	if h.cancel(a) {
		t.Fatal("cancel reported an auto-delete for a queue that is not auto-delete")
	}
	if got := sink.deliveries(); len(got) != 0 {
		t.Fatalf("delivered %q before a's deliveries were requeued", fakeBodies(got))
	}
	settleFake(got[1:], settleRequeue)
	publishViaAPI(t, s, "sac", "4")
	next := sink.deliveries()
	wantStrings(t, "after the hand-over", fakeBodies(next), []string{"b:2", "b:3", "b:4"})
	for i, d := range next {
		if d.m.redelivered != (i < 2) {
			t.Errorf("%s redelivered=%v", d.m.msg.Body, d.m.redelivered)
		}
	}
	if st := h.status(); st.SingleActiveConsumerTag != "b" {
		t.Fatalf("single active consumer %q, want b", st.SingleActiveConsumerTag)
	}
}

func TestQueueHandleTTLExpiryDeadLetters(t *testing.T) {
	s := newQueueHarness(t)
	dead := declareHandle(t, s, "ttl-dead", nil)
	h := declareHandle(t, s, "ttl", amqp.Table{"x-message-ttl": int32(20), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "ttl-dead"})
	publishViaAPI(t, s, "ttl", "1", "2")
	// No consumer takes them: the queue's timer expires them on its own.
	waitFor(t, 5*time.Second, "expired messages to be dead-lettered", func() bool {
		ready, _ := dead.counts()
		return ready == 2
	})
	if ready, _ := h.counts(); ready != 0 {
		t.Fatalf("%d messages still ready after their TTL", ready)
	}
	if info := h.info(); info.Expired != 2 || info.DeadLettered != 2 {
		t.Fatalf("expired %d dead-lettered %d, want 2 and 2", info.Expired, info.DeadLettered)
	}
	ms := getUnacked(t, dead)
	wantStrings(t, "dead letters", outgoingBodies(ms), []string{"1", "2"})
	var p amqp.Properties
	if err := p.Decode(ms[0].props); err != nil {
		t.Fatal(err)
	}
	deaths, _ := p.Headers["x-death"].([]any)
	if len(deaths) != 1 || deaths[0].(amqp.Table)["reason"] != "expired" {
		t.Fatalf("x-death %v, want one with reason expired", p.Headers["x-death"])
	}
}

func TestQueueHandleRequeueKeepsOriginalOrder(t *testing.T) {
	s := newQueueHarness(t)
	h := declareHandle(t, s, "order", nil)
	publishViaAPI(t, s, "order", "1", "2", "3", "4", "5")
	ms := getUnacked(t, h)
	wantStrings(t, "first get", outgoingBodies(ms), []string{"1", "2", "3", "4", "5"})
	// Requeued out of order, one at a time and as a batch: they go back to
	// their original places, ahead of what was published after them.
	requeue := func(idx ...int) {
		var ds []delivery
		for _, i := range idx {
			ds = append(ds, delivery{q: h, id: ms[i].id})
		}
		h.settle(ds, settleRequeue)
	}
	requeue(3)
	requeue(4, 1)
	publishViaAPI(t, s, "order", "6")
	requeue(0)
	again := getUnacked(t, h)
	wantStrings(t, "after requeue", outgoingBodies(again), []string{"1", "2", "4", "5", "6"})
	for _, m := range again {
		if m.redelivered != (string(m.msg.Body) != "6") {
			t.Errorf("%s redelivered=%v", m.msg.Body, m.redelivered)
		}
	}
	// Settling an id twice only returns credit: the first settle took it.
	h.settle([]delivery{{q: h, id: ms[2].id}}, settleAck)
	h.settle([]delivery{{q: h, id: ms[2].id}}, settleRequeue)
	if ready, _ := h.counts(); ready != 0 {
		t.Fatalf("a settled delivery came back: %d ready", ready)
	}
}

func TestQueueHandleDeliveryLimit(t *testing.T) {
	s := newQueueHarness(t)
	dead := declareHandle(t, s, "limit-dead", nil)
	h := declareHandle(t, s, "limit", amqp.Table{"x-delivery-limit": int32(1), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "limit-dead"})
	drop := declareHandle(t, s, "limit-drop", amqp.Table{"x-delivery-limit": int32(0)})
	publishViaAPI(t, s, "limit", "m")
	publishViaAPI(t, s, "limit-drop", "d")
	sink := &fakeSink{}
	c := subscribeFake(t, h, sink, "a", 0, 0)
	for round := 1; round <= 2; round++ {
		got := sink.deliveries()
		if len(got) != 1 {
			t.Fatalf("round %d: %d deliveries, want 1", round, len(got))
		}
		if round == 2 {
			var p amqp.Properties
			if err := p.Decode(got[0].m.props); err != nil {
				t.Fatal(err)
			}
			if n := p.Headers["x-delivery-count"]; n != int64(1) {
				t.Fatalf("x-delivery-count %v, want 1", n)
			}
		}
		settleFake(got, settleRequeue)
	}
	// The second return is one over the limit of 1: dead-lettered.
	if got := sink.deliveries(); len(got) != 0 {
		t.Fatalf("delivered past the limit: %q", fakeBodies(got))
	}
	if ready, _ := dead.counts(); ready != 1 {
		t.Fatalf("%d dead letters, want 1", ready)
	}
	h.cancel(c)
	// Without a dead-letter exchange the message is dropped.
	ms := getUnacked(t, drop)
	drop.settle([]delivery{{q: drop, id: ms[0].id}}, settleRequeue)
	if info := drop.info(); info.Ready != 0 || info.Unacked != 0 {
		t.Fatalf("over its limit the message stayed: ready %d unacked %d", info.Ready, info.Unacked)
	}
}

func TestQueueHandleDeleteCancelsConsumers(t *testing.T) {
	s := newQueueHarness(t)
	h := declareHandle(t, s, "gone", nil)
	sink := &fakeSink{}
	subscribeFake(t, h, sink, "a", 0, 0)
	if err := h.deletable(true, false); err == nil || err.Code != amqp.PreconditionFailed {
		t.Fatalf("if-unused delete of a queue with a consumer: %v, want 406", err)
	}
	publishViaAPI(t, s, "gone", "1")
	if err := h.deletable(false, true); err != nil {
		t.Fatalf("if-empty delete of a queue whose message is unacked: %v", err)
	}
	if err := s.DeleteQueue("/", "gone", false, false); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if !slices.Equal(sink.cancels, []string{"a"}) {
		t.Fatalf("cancelled %v, want [a]", sink.cancels)
	}
	if got := fmt.Sprint(h.counts()); got != "0 0" {
		t.Fatalf("counts after delete %s", got)
	}
}

// A stream serves the same interface: its deliveries are named by their
// offsets, its reader stops at the consumer's credit, and what RabbitMQ
// 3.10 refuses on streams (basic.get, nack, purge) is refused through the
// handle with RabbitMQ's 540.
func TestQueueHandleStream(t *testing.T) {
	s := newQueueHarness(t)
	args := amqp.Table{"x-queue-type": "stream"}
	if _, err := s.DeclareQueue("/", QueueSpec{Name: "st", Durable: true, Arguments: args}); err != nil {
		t.Fatal(err)
	}
	h := s.Vhost("/").queue("st").h
	publishViaAPI(t, s, "st", "1", "2", "3")
	sink := &fakeSink{}
	c := &consumer{tag: "a", sink: sink, q: h, prefetch: 2, args: amqp.Table{"x-stream-offset": "first"}}
	if aerr := h.consume(c, func() {}); aerr != nil {
		t.Fatal(aerr)
	}
	defer h.cancel(c)
	var got []fakeDelivery
	waitFor(t, 5*time.Second, "two deliveries", func() bool {
		got = append(got, sink.deliveries()...)
		return len(got) >= 2
	})
	wantStrings(t, "up to the credit", fakeBodies(got), []string{"a:1", "a:2"})
	if got[0].m.id+1 != got[1].m.id {
		t.Fatalf("delivery ids %d, %d: want consecutive offsets", got[0].m.id, got[1].m.id)
	}
	settleFake(got[:1], settleAck)
	var more []fakeDelivery
	waitFor(t, 5*time.Second, "the third delivery after an ack", func() bool {
		more = append(more, sink.deliveries()...)
		return len(more) >= 1
	})
	wantStrings(t, "after an ack", fakeBodies(more), []string{"a:3"})

	if _, aerr := h.get(1, false, func(outgoing, int) { t.Error("a stream delivered to basic.get") }); aerr == nil || aerr.Code != amqp.NotImplemented {
		t.Errorf("get: %v, want 540", aerr)
	}
	if aerr := h.checkSettle(settleRequeue, (&amqp.BasicNack{}).ID()); aerr == nil || aerr.Code != amqp.NotImplemented {
		t.Errorf("nack: %v, want 540", aerr)
	}
	if aerr := h.checkSettle(settleAck, (&amqp.BasicAck{}).ID()); aerr != nil {
		t.Errorf("ack: %v", aerr)
	}
	if _, aerr := h.purge(methodQueuePurge); aerr == nil || aerr.Code != amqp.NotImplemented {
		t.Errorf("purge: %v, want 540", aerr)
	}
}
