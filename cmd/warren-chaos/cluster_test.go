package main

import (
	"fmt"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The drain, the consumers and the definitions checker ask again after a
// 404 for a queue that exists but whose leader is not reachable: the home
// down, and a restarted node that does not know yet whether it still
// leads the queue (crash seed 1 ended in "drain incomplete" on that 404,
// 2 s after the node's restart). A 404 for a missing queue is final.
func TestIsHomeDownTransient404s(t *testing.T) {
	for _, c := range []struct {
		reason string
		want   bool
	}{
		{"NOT_FOUND - home node 'w2' of durable queue 'q' in vhost '/' is down or inaccessible", true},
		{"NOT_FOUND - leader of durable queue 'q' in vhost '/' is not available yet (the node is starting)", true},
		{"NOT_FOUND - no queue 'q' in vhost '/'", false},
	} {
		err := fmt.Errorf("consume: %w", &amqp.Error{Code: amqp.NotFound, Reason: c.reason})
		if got := isHomeDown(err); got != c.want {
			t.Errorf("isHomeDown(%q) = %v, want %v", c.reason, got, c.want)
		}
	}
	if isHomeDown(&amqp.Error{Code: amqp.PreconditionFailed, Reason: "x is down or inaccessible"}) {
		t.Error("a 406 counted as a 404")
	}
}
