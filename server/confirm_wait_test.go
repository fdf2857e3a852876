package server

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// confirmFixture is a connection publishing persistent messages with
// confirms to amq.fanout, bound to a durable queue and a stream, and a
// second channel on the same connection whose replies show what the broker
// had sent before them.
type confirmFixture struct {
	pub      *amqp091.Channel
	probe    *amqp091.Channel
	confirms chan amqp091.Confirmation
}

func newConfirmFixture(t *testing.T, ts *testServer) *confirmFixture {
	t.Helper()
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", nil)
	_, err := ch.QueueDeclare("q", true, false, false, false, nil)
	must(t, err)
	must(t, ch.QueueBind("s", "", "amq.fanout", false, nil))
	must(t, ch.QueueBind("q", "", "amq.fanout", false, nil))
	must(t, ch.Confirm(false))
	probe, err := conn.Channel()
	must(t, err)
	return &confirmFixture{pub: ch, probe: probe, confirms: ch.NotifyPublish(make(chan amqp091.Confirmation, 16))}
}

func (f *confirmFixture) publish(t *testing.T, n int) {
	t.Helper()
	for range n {
		must(t, f.pub.Publish("amq.fanout", "", false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte("m")}))
	}
}

// expectNoConfirm fails if a confirm was sent before the reply to a
// round trip on the probe channel: the broker writes a connection's frames
// in order, and the client dispatches them in order.
func (f *confirmFixture) expectNoConfirm(t *testing.T, when string) {
	t.Helper()
	_, err := f.probe.QueueDeclarePassive("q", true, false, false, false, nil)
	must(t, err)
	select {
	case c := <-f.confirms:
		t.Fatalf("%s: confirm %+v was sent", when, c)
	default:
	}
}

// expectAcks waits for acks of tags from..to, in order.
func (f *confirmFixture) expectAcks(t *testing.T, from, to uint64) {
	t.Helper()
	for tag := from; tag <= to; tag++ {
		if c := nextConfirm(t, f.confirms); !c.Ack || c.DeliveryTag != tag {
			t.Fatalf("confirm %+v, want an ack of %d", c, tag)
		}
	}
}

// setHook stores fn in hook until the test ends.
func setHook[F any](t *testing.T, hook *atomic.Pointer[F], fn F) {
	hook.Store(&fn)
	t.Cleanup(func() { hook.Store(nil) })
}

// A publish to a durable queue and a stream is confirmed only once both are
// durable: here the stream is durable first and the commit round is held
// back before its store sync, and no confirm goes out until it runs.
func TestConfirmWaitsForTheCommitRound(t *testing.T) {
	ts := startServer(t)
	f := newConfirmFixture(t, ts)
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before the server closes
	held := make(chan int, 16)
	setHook(t, &testHookRound, func(n int) {
		held <- n
		<-release
	})
	streamDone := make(chan struct{}, 16)
	setHook(t, &testHookStreamDurable, func(fn func(error)) func(error) {
		return func(err error) {
			fn(err)
			streamDone <- struct{}{}
		}
	})

	f.publish(t, 3)
	for range 3 {
		select {
		case <-streamDone:
		case <-time.After(5 * time.Second):
			t.Fatal("the stream appends were not durable within 5s")
		}
	}
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("no commit round within 5s")
	}
	f.expectNoConfirm(t, "stream durable, commit round held")
	releaseOnce.Do(func() { close(release) })
	f.expectAcks(t, 1, 3)
}

// The same with the stream slower: the commit rounds have completed every
// publish's queue copy, the stream's durability notices are held back and
// then passed on in reverse order; the confirms wait for the first publish's
// and then go out in publish order.
func TestConfirmWaitsForTheStream(t *testing.T) {
	ts := startServer(t)
	f := newConfirmFixture(t, ts)
	var committed atomic.Int64
	setHook(t, &testHookRoundDone, func(n int) { committed.Add(int64(n)) })
	var mu sync.Mutex
	var held []func(error)
	setHook(t, &testHookStreamDurable, func(fn func(error)) func(error) {
		return func(err error) {
			mu.Lock()
			held = append(held, func(error) { fn(err) })
			mu.Unlock()
		}
	})
	heldN := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(held)
	}

	f.publish(t, 3)
	waitFor(t, 5*time.Second, "three durable stream appends", func() bool { return heldN() == 3 })
	waitFor(t, 5*time.Second, "three committed queue copies", func() bool { return committed.Load() >= 3 })
	f.expectNoConfirm(t, "queue copies committed, stream held")
	held[2](nil)
	held[1](nil)
	f.expectNoConfirm(t, "the first publish's stream append held")
	held[0](nil)
	f.expectAcks(t, 1, 3)
}
