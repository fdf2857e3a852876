package metrics

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestExchangeMessagesDelayed: the delayed messages an x-delayed-message
// exchange holds, per exchange on /metrics/per-object and summed on /metrics.
func TestExchangeMessagesDelayed(t *testing.T) {
	e := startEnv(t)
	_, ch := e.channel(t)
	if err := ch.ExchangeDeclare("dx", "x-delayed-message", false, false, false, false, amqp091.Table{"x-delayed-type": "direct"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := ch.Publish("dx", "k", false, false, amqp091.Publishing{Headers: amqp091.Table{"x-delay": int32(60000)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ch.QueueDeclare("sync", false, true, false, false, nil); err != nil { // a round trip after the publishes
		t.Fatal(err)
	}
	per := e.scrape(t, "/metrics/per-object")
	if got := per.get(t, "rabbitmq_exchange_messages_delayed", map[string]string{"vhost": "/", "exchange": "dx"}); got != 2 {
		t.Fatalf("per-object messages delayed %v, want 2", got)
	}
	if _, ok := per.find("rabbitmq_exchange_messages_delayed", map[string]string{"exchange": "amq.direct"}); ok {
		t.Fatal("a series for an exchange that does not delay")
	}
	if got := e.scrape(t, "/metrics").get(t, "rabbitmq_exchange_messages_delayed", nil); got != 2 {
		t.Fatalf("aggregated messages delayed %v, want 2", got)
	}
}
