package mgmt

import (
	"encoding/json"
	"net/http"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestExchangeMessagesDelayed: an x-delayed-message exchange's object has the
// plugin's messages_delayed (in the list and on its own page, as RabbitMQ
// 3.10.8 with the plugin shows it); other exchanges have none.
func TestExchangeMessagesDelayed(t *testing.T) {
	e := newEnv(t)
	ch := e.channel(e.dial(e.amqpURL))
	if err := ch.ExchangeDeclare("dx", "x-delayed-message", true, false, false, false, amqp091.Table{"x-delayed-type": "fanout"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		err := ch.Publish("dx", "", false, false, amqp091.Publishing{Headers: amqp091.Table{"x-delay": int32(60000)}, Body: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ch.QueueDeclare("sync", false, true, false, false, nil); err != nil { // a round trip after the publishes
		t.Fatal(err)
	}
	one := e.must(e.get("/api/exchanges/%2F/dx"), http.StatusOK, "exchange").object(t)
	if got := one["messages_delayed"]; got != json.Number("3") {
		t.Fatalf("messages_delayed %v, want 3", got)
	}
	for _, x := range e.must(e.get("/api/exchanges/%2F?columns=name,messages_delayed"), http.StatusOK, "exchanges").array(t) {
		m := x.(map[string]any)
		_, has := m["messages_delayed"]
		if has != (m["name"] == "dx") {
			t.Fatalf("exchange %v: messages_delayed present %v", m["name"], has)
		}
	}
	if err := ch.ExchangeDelete("dx", false, false); err != nil {
		t.Fatal(err)
	}
}
