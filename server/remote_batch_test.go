package server

import (
	"fmt"
	"sync"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
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
