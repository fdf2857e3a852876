package server

import (
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// tx.commit-ok promises that the transaction's acks and publishes survive a
// crash, so it waits for the commit round that writes them: with the round
// held back, no commit-ok goes out. (warren-chaos found acks committed with
// tx.commit-ok redelivered after a kill -9 13 ms later.)
func TestTxCommitOkWaitsForTheCommitRound(t *testing.T) {
	ts := startServer(t)
	_, setup := ts.channel(t)
	_, err := setup.QueueDeclare("q", true, false, false, false, nil)
	must(t, err)
	for range 3 {
		must(t, setup.Publish("", "q", false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte("old")}))
	}
	roundTrip(t, setup)

	_, tx := ts.channel(t) // its own connection: the commit holds its reader
	must(t, tx.Tx())
	for range 3 {
		d, ok, err := tx.Get("q", false)
		must(t, err)
		if !ok {
			t.Fatal("queue q is empty")
		}
		must(t, d.Ack(false))
	}
	must(t, tx.Publish("", "q", false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte("new")}))

	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before the server closes
	held := make(chan int, 16)
	setHook(t, &testHookRound, func(n int) {
		held <- n
		<-release
	})
	done := make(chan error, 1)
	go func() { done <- tx.TxCommit() }()
	select {
	case err := <-done:
		t.Fatalf("tx.commit answered (err %v) before any commit round waited for it", err)
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("no commit round within 5s")
	}
	select {
	case err := <-done:
		t.Fatalf("tx.commit answered (err %v) while its commit round was held", err)
	default:
	}
	releaseOnce.Do(func() { close(release) })
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("no tx.commit-ok within 5s of the commit round")
	}
	q, err := setup.QueueDeclarePassive("q", true, false, false, false, nil)
	must(t, err)
	if q.Messages != 1 {
		t.Fatalf("q holds %d messages after the commit, want the 1 published in it", q.Messages)
	}
}
