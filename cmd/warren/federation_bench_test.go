package main

import (
	"testing"
	"time"
)

// BenchmarkFederationExchangeOnConfirm is the rate an exchange link moves
// persistent messages from a Warren upstream into a Warren downstream
// queue with ack-mode on-confirm and the default prefetch of 1000: with
// the downstream stopped, b.N messages wait in the upstream queue; the
// clock runs from the downstream's start until its queue holds them all.
func BenchmarkFederationExchangeOnConfirm(b *testing.B) {
	up, down := startFedBroker(b, "up"), startFedBroker(b, "down")
	dch := down.channel()
	_, err := dch.QueueDeclare("bq", true, false, false, false, nil)
	fedMust(b, err)
	fedMust(b, dch.ExchangeDeclare("fed.x", "fanout", true, false, false, false, nil))
	fedMust(b, dch.QueueBind("bq", "", "fed.x", false, nil))
	down.putUpstream("up1", map[string]any{"uri": up.url})
	down.putPolicy("fed", `^fed\.`, "exchanges", map[string]any{"federation-upstream-set": "all"})
	down.waitLink("up1", "fed.x", "running")
	fedWait(b, 10*time.Second, "the binding upstream", func() bool {
		return len(up.srv.Vhost("/").LookupExchange("fed.x").SourceBindings()) == 1
	})
	down.stop()
	publishPersistent(b, up, "fed.x", "", "b", b.N)
	b.ResetTimer()
	down.start()
	fedWait(b, 5*time.Minute, "every message downstream", func() bool { return ready(b, down, "bq") >= b.N })
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
