package server

import (
	"fmt"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestPolicyChurnWhilePublishingAndConsuming changes the policy of two
// queues (one durable, one transient) in a bounded loop while a publisher in
// confirm mode and an acking consumer use them. A policy change replaces a
// queue's effective arguments; under -race this fails if any publish,
// delivery or settle path reads them without the queue's lock.
func TestPolicyChurnWhilePublishingAndConsuming(t *testing.T) {
	ts := startServer(t)
	conn := ts.dial(t)
	setup, err := conn.Channel()
	must(t, err)
	queues := []string{"churn-durable", "churn-transient"}
	_, err = setup.QueueDeclare(queues[0], true, false, false, false, nil)
	must(t, err)
	_, err = setup.QueueDeclare(queues[1], false, false, false, false, nil)
	must(t, err)
	_, err = setup.QueueDeclare("churn-dead", false, false, false, false, nil)
	must(t, err)

	definitions := []map[string]any{
		{"max-length": int64(20), "overflow": "reject-publish"},
		{"message-ttl": int64(2)},
		{"max-length": int64(5), "overflow": "drop-head", "dead-letter-exchange": "", "dead-letter-routing-key": "churn-dead"},
		{"max-length-bytes": int64(64), "overflow": "reject-publish-dlx", "dead-letter-exchange": ""},
		{"delivery-limit": int64(1), "message-ttl": int64(50)},
		nil, // no policy: the declared arguments again
	}
	// The policy changes until the publishers are done, at most maxRounds times.
	const maxRounds = 5000
	const perQueue = 1500
	var publishers, others sync.WaitGroup
	published := make(chan struct{})
	stop := make(chan struct{})
	for _, q := range queues {
		d := churnSubscribe(t, conn, q) // before publishing, so it sees traffic
		others.Add(1)
		go func() {
			defer others.Done()
			churnConsume(t, q, d, stop)
		}()
	}
	rounds := 0
	others.Add(1)
	go func() { // policy churn
		defer others.Done()
		for ; rounds < maxRounds; rounds++ {
			select {
			case <-published:
				return
			default:
			}
			def := definitions[rounds%len(definitions)]
			var err error
			if def == nil {
				err = ts.DeletePolicy("/", "churn", false)
			} else {
				_, err = ts.PutPolicy(Policy{Vhost: "/", Name: "churn", Pattern: "^churn-(durable|transient)$", ApplyTo: ApplyToQueues, Definition: def}, false)
			}
			if err != nil {
				t.Errorf("policy round %d: %v", rounds, err)
				return
			}
		}
	}()
	for _, q := range queues {
		publishers.Add(1)
		go func() {
			defer publishers.Done()
			churnPublish(t, conn, q, perQueue)
		}()
	}
	publishers.Wait()
	close(published)
	close(stop)
	others.Wait()
	t.Logf("%d policy changes", rounds)
	for _, q := range queues {
		if got := ts.Vhost("/").queue(q).Info(); got.Delivered == 0 || got.Acked == 0 {
			t.Errorf("%s: nothing was delivered and acked: %+v", q, got)
		}
	}
}

// churnSubscribe starts a consumer of q on a fresh channel of conn.
func churnSubscribe(t *testing.T, conn *amqp091.Connection, q string) <-chan amqp091.Delivery {
	ch, err := conn.Channel()
	must(t, err)
	must(t, ch.Qos(50, 0, false))
	d, err := ch.Consume(q, "", false, false, false, false, nil)
	must(t, err)
	return d
}

// churnConsume settles q's deliveries until stop: it acks, rejects every
// fifth delivery with requeue and every seventh without (dead-lettered when a
// policy says so).
func churnConsume(t *testing.T, q string, d <-chan amqp091.Delivery, stop <-chan struct{}) {
	for n := 0; ; n++ {
		var m amqp091.Delivery
		select {
		case m = <-d:
		case <-stop:
			return
		}
		var err error
		switch {
		case n%5 == 0:
			err = m.Reject(true)
		case n%7 == 0:
			err = m.Reject(false)
		default:
			err = m.Ack(false)
		}
		if err != nil {
			t.Errorf("settle on %s: %v", q, err)
			return
		}
	}
}

// churnPublish publishes n messages to q in confirm mode, transient and
// persistent alternately, and waits for every confirm (a nack is an answer
// too: reject-publish refuses some).
func churnPublish(t *testing.T, conn *amqp091.Connection, q string, n int) {
	ch, err := conn.Channel()
	if err != nil {
		t.Errorf("publisher channel: %v", err)
		return
	}
	defer ch.Close()
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, n))
	if err := ch.Confirm(false); err != nil {
		t.Errorf("confirm.select: %v", err)
		return
	}
	for i := range n {
		p := amqp091.Publishing{Body: []byte(fmt.Sprintf("m%d", i)), DeliveryMode: uint8(1 + i%2)}
		if err := ch.Publish("", q, false, false, p); err != nil {
			t.Errorf("publish to %s: %v", q, err)
			return
		}
	}
	for range n {
		select {
		case <-confirms:
		case <-time.After(10 * time.Second):
			t.Errorf("%s: a confirm did not come", q)
			return
		}
	}
}
