package server

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestPolicySetDuringDurableDeclareApplies changes a policy while a durable
// declare creates its files outside Vhost.mu, where the change's sweep of
// the vhost's queues cannot see the queue yet: the queue must still get it.
func TestPolicySetDuringDurableDeclareApplies(t *testing.T) {
	ts := startServer(t, withDataDir(t.TempDir()))
	// The policy change waits for the declare's apply (Server.applyMu), so
	// it is made from its own goroutine while the declare creates files.
	policySet := make(chan error, 1)
	testHookDeclareDiskWork = func(q *Queue) {
		if q.name != "window" {
			return
		}
		p := Policy{Vhost: "/", Name: "cap", Pattern: "^window$", ApplyTo: ApplyToQueues,
			Definition: map[string]any{"max-length": int64(1)}}
		go func() {
			_, err := ts.PutPolicy(p, false)
			policySet <- err
		}()
	}
	t.Cleanup(func() { testHookDeclareDiskWork = nil })
	_, ch := ts.channel(t)
	if _, err := ch.QueueDeclare("window", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	must(t, <-policySet)
	for _, body := range []string{"a", "b", "c"} {
		publish(t, ch, "", "window", body)
	}
	waitFor(t, 5*time.Second, "max-length 1 applied", func() bool {
		q, err := ch.QueueDeclarePassive("window", true, false, false, false, nil)
		return err == nil && q.Messages == 1
	})
}

// TestExpiryDuringDurableDeclareStillDeletes lets a queue's x-expires period
// pass while its durable declare is creating files, before the queue is
// installed: the unused queue must still expire.
func TestExpiryDuringDurableDeclareStillDeletes(t *testing.T) {
	ts := startServer(t, withDataDir(t.TempDir()))
	const expires = 20 * time.Millisecond
	testHookDeclareDiskWork = func(q *Queue) {
		if q.name == "brief" {
			// The x-expires timer runs on real time and the queue exposes
			// nothing to poll before it is installed: wait out the period
			// so the timer fires first.
			time.Sleep(5 * expires)
		}
	}
	t.Cleanup(func() { testHookDeclareDiskWork = nil })
	_, ch := ts.channel(t)
	if _, err := ch.QueueDeclare("brief", true, false, false, false, amqp091.Table{"x-expires": int32(expires / time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the unused queue to expire", func() bool {
		return ts.Vhost("/").queue("brief") == nil
	})
}
