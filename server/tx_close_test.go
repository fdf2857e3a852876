package server

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestTxUncommittedAcksRequeuedAtClose: a transactional channel that acked
// deliveries and closed without tx.commit rolls the transaction back, and
// its deliveries, acked in the transaction or not, return to the queue
// marked redelivered, as RabbitMQ does. Before, the acked ones had left the
// channel's unacked list at basic.ack and the close dropped the transaction:
// they stayed unacked on the queue, held by no one, until a restart.
func TestTxUncommittedAcksRequeuedAtClose(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	_, err := ch.QueueDeclare("q", true, false, false, false, nil)
	must(t, err)
	for _, body := range []string{"m1", "m2"} {
		must(t, ch.Publish("", "q", false, false, amqp091.Publishing{Body: []byte(body), DeliveryMode: amqp091.Persistent}))
	}
	_, tx := ts.channel(t)
	must(t, tx.Tx())
	ds, err := tx.Consume("q", "", false, false, false, false, nil)
	must(t, err)
	d1 := recvDelivery(t, ds)
	recvDelivery(t, ds)
	must(t, d1.Ack(false)) // in the transaction, never committed
	must(t, tx.Close())

	waitFor(t, 5*time.Second, "both deliveries back in the queue", func() bool {
		ready, _ := homeCounts(ts, "q")
		return ready == 2 && homePending(ts, "q") == 0
	})
	for _, body := range []string{"m1", "m2"} {
		m, ok, err := ch.Get("q", true)
		must(t, err)
		if !ok || string(m.Body) != body || !m.Redelivered {
			t.Fatalf("got %q ok=%v redelivered=%v, want %q redelivered", m.Body, ok, m.Redelivered, body)
		}
	}
}
