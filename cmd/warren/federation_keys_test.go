package main

import (
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// linkChannels is the number of channels the link of upstream name keeps
// open on the upstream broker, -1 when it has no connection there.
func linkChannels(up *fedBroker, name string) int {
	for _, c := range up.srv.Connections() {
		if c.ClientProperties["connection_name"] == "Federation link (upstream: "+name+", policy: fed.x)" {
			n := 0
			for _, ch := range up.srv.Channels() {
				if ch.ConnName == c.Name {
					n++
				}
			}
			return n
		}
	}
	return -1
}

// The upstream keys a link used to ignore: ha-policy goes on the upstream
// queue as x-ha-policy, bind-nowait binds without waiting (the bindings
// still arrive), channel-use-mode single runs everything on one channel,
// and with the default resource-cleanup-mode removing the policy deletes
// the upstream queue and internal exchange, as RabbitMQ's link does.
func TestFederationUpstreamKeysAndCleanup(t *testing.T) {
	up, down := startFedBroker(t, "up"), startFedBroker(t, "down")
	dch := down.channel()
	_, err := dch.QueueDeclare("qa", true, false, false, false, nil)
	fedMust(t, err)
	fedMust(t, dch.ExchangeDeclare("fed.x", "topic", true, false, false, false, nil))
	fedMust(t, dch.QueueBind("qa", "a.#", "fed.x", false, nil))
	federateExchange(t, down, up, "up1", map[string]any{"ha-policy": "all", "bind-nowait": true, "channel-use-mode": "single"})
	const upQueue = "federation: fed.x -> down@localhost"
	q := up.srv.Vhost("/").LookupQueue(upQueue)
	if q == nil {
		t.Fatal("upstream queue missing")
	}
	if got := q.Info().Arguments["x-ha-policy"]; got != "all" {
		t.Errorf("upstream queue x-ha-policy = %v, want all", got)
	}
	fedWait(t, 10*time.Second, "a.# bound upstream", func() bool { return slices.Equal(upstreamKeys(up), []string{"a.#"}) })
	fedWait(t, 10*time.Second, "the link on one upstream channel", func() bool { return linkChannels(up, "up1") == 1 })
	fedMust(t, dch.QueueBind("qa", "b.#", "fed.x", false, nil))
	fedWait(t, 10*time.Second, "b.# bound upstream", func() bool { return slices.Equal(upstreamKeys(up), []string{"a.#", "b.#"}) })
	fedMust(t, up.channel().Publish("fed.x", "b.1", false, false, amqp091.Publishing{MessageId: "m1"}))
	fedWait(t, 10*time.Second, "m1 downstream", func() bool { return ready(t, down, "qa") == 1 })

	fedMust(t, down.srv.DeletePolicy("/", "fed", false))
	fedWait(t, 10*time.Second, "the upstream queue and exchange deleted", func() bool {
		vh := up.srv.Vhost("/")
		return vh.LookupQueue(upQueue) == nil && vh.LookupExchange(upQueue+" A") == nil && vh.LookupExchange(upQueue+" B") == nil
	})
}

// With resource-cleanup-mode never the upstream queue outlives the link,
// keeping what was published while no link ran; a link only restarted
// (its upstream changed) keeps it whatever the mode.
func TestFederationCleanupModeNever(t *testing.T) {
	up, down := startFedBroker(t, "up"), startFedBroker(t, "down")
	dch := down.channel()
	_, err := dch.QueueDeclare("qa", true, false, false, false, nil)
	fedMust(t, err)
	fedMust(t, dch.ExchangeDeclare("fed.x", "topic", true, false, false, false, nil))
	fedMust(t, dch.QueueBind("qa", "a.#", "fed.x", false, nil))
	federateExchange(t, down, up, "up1", nil)
	const upQueue = "federation: fed.x -> down@localhost"
	fedWait(t, 10*time.Second, "a.# bound upstream", func() bool { return slices.Equal(upstreamKeys(up), []string{"a.#"}) })

	// A changed upstream restarts the link: nothing deleted, whatever the
	// mode (default here). The same *Queue afterwards: not deleted and
	// declared again.
	before := up.srv.Vhost("/").LookupQueue(upQueue)
	down.putUpstream("up1", map[string]any{"uri": up.url, "reconnect-delay": 1, "prefetch-count": 10})
	fedWait(t, 10*time.Second, "the link restarted on prefetch 10", func() bool { return linkPrefetch(up) == 10 })
	if up.srv.Vhost("/").LookupQueue(upQueue) != before {
		t.Fatal("a restarted link deleted its upstream queue")
	}
	down.putUpstream("up1", map[string]any{"uri": up.url, "reconnect-delay": 1, "resource-cleanup-mode": "never"})
	fedWait(t, 10*time.Second, "the link restarted on the default prefetch", func() bool { return linkPrefetch(up) == 1000 })

	fedMust(t, down.srv.DeletePolicy("/", "fed", false))
	fedWait(t, 10*time.Second, "the link gone", func() bool { return linkChannels(up, "up1") == -1 })
	fedMust(t, up.channel().Publish("fed.x", "a.1", false, false, amqp091.Publishing{MessageId: "kept"}))
	fedWait(t, 10*time.Second, "the message kept upstream", func() bool {
		q := up.srv.Vhost("/").LookupQueue(upQueue)
		return q != nil && q.Info().Ready == 1
	})
}

// linkPrefetch is the prefetch of the link's consuming channel upstream,
// which tells which version of its upstream a restarted link runs; 0 while
// there is no such channel, or more than one.
func linkPrefetch(up *fedBroker) uint16 {
	var found []uint16
	for _, ch := range up.srv.Channels() {
		if ch.Consumers > 0 {
			found = append(found, ch.Prefetch)
		}
	}
	if len(found) != 1 {
		return 0
	}
	return found[0]
}
