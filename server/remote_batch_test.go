package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/amqp"
)

// TestRemoteHomeStoresABatchInOneWrite forwards persistent publishes from B
// to a durable queue homed on A in batches (the first publish of a round is
// held with the network while the rest collect behind it), and checks that
// A writes each batch to its store in ceil(n/256) writes, as a local socket
// read's publishes are, not one write per message; and that the queue then
// holds every message once, in publish order, with its body and delivery
// mode (three rounds, so later ones collect in the array an answered batch
// left; the third mixes runs of transient publishes, which the home does
// not store, between persistent ones, and they must not overtake them).
func TestRemoteHomeStoresABatchInOneWrite(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b")
	a, b := nodes[0], nodes[1]
	declareHomed(t, a, nodes[1:], "q")
	home := a.Vhost("/").storage

	var mu sync.Mutex
	writes, records, maxWrites := 0, 0, 0
	hook := func(st *vhostStorage, n int) {
		if st == home {
			mu.Lock()
			writes++
			records += n
			mu.Unlock()
		}
	}
	testHookStoreWrite.Store(&hook)
	t.Cleanup(func() { testHookStoreWrite.Store(nil) })
	net.mu.Lock()
	net.observe = func(method string, payload []byte) {
		if method != rpcPublish {
			return
		}
		rd := wireReader{b: payload}
		rd.string()
		rd.uint()
		n := rd.count()
		mu.Lock()
		maxWrites += (n + storeBatchMaxMessages - 1) / storeBatchMaxMessages
		mu.Unlock()
	}
	net.mu.Unlock()

	_, ch := b.channel(t)
	must(t, ch.Confirm(false))
	const rounds, perRound, stored = 3, 300, 2 * 300 // rounds 1 and 2 persistent
	mode := func(i int) uint8 {
		if i >= stored && (i/25)%2 == 1 {
			return 1
		}
		return 2
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, perRound))
	seq := 0
	for round := range rounds {
		release := net.holdMethod(rpcPublish)
		for range perRound {
			must(t, ch.Publish("", "q", false, false, amqp091.Publishing{DeliveryMode: mode(seq), Body: []byte(fmt.Sprint("m", seq))}))
			seq++
		}
		release()
		for range perRound {
			if c := nextConfirm(t, confirms); !c.Ack {
				t.Fatalf("publish %d nacked", c.DeliveryTag)
			}
		}
		if round != 1 {
			continue
		}
		mu.Lock()
		w, r, max := writes, records, maxWrites
		mu.Unlock()
		if r != stored || w > max {
			t.Fatalf("the home stored %d records in %d writes, want %d in at most %d (ceil(n/%d) per forwarded batch)",
				r, w, stored, max, storeBatchMaxMessages)
		}
	}
	_, ach := a.channel(t)
	for i := range rounds * perRound {
		d, ok, err := ach.Get("q", true)
		must(t, err)
		if want := fmt.Sprint("m", i); !ok || string(d.Body) != want || d.DeliveryMode != mode(i) {
			t.Fatalf("message %d on the home: %q (ok %v, mode %d), want %q mode %d", i, d.Body, ok, d.DeliveryMode, want, mode(i))
		}
	}
	if _, ok, err := ach.Get("q", true); err != nil || ok {
		t.Fatalf("a message more on the home (ok %v, err %v)", ok, err)
	}
}

// TestRemoteHomeBatchWithAMissingQueue answers a forwarded batch in which
// a publish naming a queue that is gone (confirmed at once) comes after one
// the home holds in its store batch, itself after a publish to a stream
// whose append is held back: the at-once confirm must not be recorded ahead
// of the batched one before it, or the home's confirm tracker, kept in
// publish order, cannot find the batched one when its commit round
// completes it, and the batch is never answered (nacked at the timeout).
func TestRemoteHomeBatchWithAMissingQueue(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b")
	a := nodes[0]
	declareHomed(t, a, nodes[1:], "q")
	_, sch := a.channel(t)
	_, err := sch.QueueDeclare("s", true, false, false, false, amqp091.Table{"x-queue-type": "stream"})
	must(t, err)

	release := make(chan struct{})
	var releaseOnce sync.Once
	var held sync.WaitGroup
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }); held.Wait() })
	setHook(t, &testHookStreamDurable, func(fn func(error)) func(error) {
		return func(err error) {
			held.Add(1)
			go func() {
				defer held.Done()
				<-release
				fn(err)
			}()
		}
	})

	persistent := (&amqp.Properties{Flags: amqp.FlagDeliveryMode, DeliveryMode: 2}).AppendTo(nil)
	items := []string{"s", "q", "gone", "q"}
	w := wireWriter{}
	w.string("warren@b")
	w.uint(1)
	w.uint(uint64(len(items)))
	for i, queue := range items {
		w.string("/")
		w.uint(1)
		w.string(queue)
		w.string("")
		w.string(queue)
		w.bytes(persistent)
		w.bytes([]byte(fmt.Sprint("m", i)))
		w.int(-1)
	}
	// The queue's commit round completes publishes 2 and 4 while the
	// stream holds publish 1; then the stream is released.
	time.AfterFunc(300*time.Millisecond, func() { releaseOnce.Do(func() { close(release) }) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ans, err := a.remote.handlePublish(ctx, "warren@b", w.b)
	if err != nil {
		t.Fatalf("the home did not answer the batch: %v", err)
	}
	rd, aerr := readAnswer(ans, methodBasicPublish)
	if aerr != nil {
		t.Fatal(aerr)
	}
	for i := range items {
		if !rd.bool() {
			t.Fatalf("publish %d nacked", i)
		}
	}
	if ready, _ := homeCounts(a, "q"); ready != 2 {
		t.Fatalf("q holds %d, want 2", ready)
	}
}
