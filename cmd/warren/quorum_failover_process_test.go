package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// Quorum queue failover across separate broker processes (issue 15): the
// leader's process killed with SIGKILL, the queue is served again from a
// surviving node; and again for a queue declared after that node came back.

func (n *procNode) declareQuorum(q string) error {
	return n.onChannel(func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclare(q, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"})
		return err
	})
}

// quorumServes reports whether q takes a consumer on n and confirms a
// publish made there within 3 s.
func (n *procNode) quorumServes(q string) error {
	return n.onChannel(func(ch *amqp091.Channel) error {
		if _, err := ch.Consume(q, "failover-probe", false, false, false, false, nil); err != nil {
			return fmt.Errorf("%s: consume: %w", n.name, err)
		}
		if err := ch.Cancel("failover-probe", false); err != nil {
			return fmt.Errorf("%s: cancel: %w", n.name, err)
		}
		if err := ch.Confirm(false); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false, amqp091.Publishing{Body: []byte("probe"), DeliveryMode: 2})
		if err != nil {
			return err
		}
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			return fmt.Errorf("%s: confirm: %w", n.name, err)
		}
		if !ok {
			return errors.New(n.name + ": publish nacked")
		}
		return nil
	})
}

// TestQuorumFailoverAfterLeaderRestart: a quorum queue led by p1 fails
// over to p2 or p3 when p1 is killed; p1 restarted, a queue declared on it
// afterwards (so led by it) fails over too when p1 is killed again.
func TestQuorumFailoverAfterLeaderRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three broker processes")
	}
	bin := buildWarrenBinary(t)
	nodes := startProcCluster(t, bin)
	if d := os.Getenv("WARREN_KEEP_LOGS"); d != "" { // debugging aid: the logs outlive the test
		t.Cleanup(func() {
			for _, n := range nodes {
				if b, err := os.ReadFile(n.log); err == nil {
					os.WriteFile(filepath.Join(d, strings.TrimPrefix(n.name, "warren@")+".log"), b, 0o644)
				}
			}
		})
	}
	for _, n := range nodes {
		n.start(t, bin)
	}
	p1, p2 := nodes[0], nodes[1]
	pollUntil(t, 60*time.Second, "a quorum declare on p1", func() error { return p1.declareQuorum("qf-1") })
	pollUntil(t, 30*time.Second, "qf-1 served on p1", func() error { return p1.quorumServes("qf-1") })

	p1.kill9(t)
	took := pollUntil(t, 30*time.Second, "qf-1 served on p2 after p1's kill", func() error { return p2.quorumServes("qf-1") })
	t.Logf("qf-1 served on p2 %v after p1's kill", took.Round(time.Millisecond))

	p1.start(t, bin)
	pollUntil(t, 60*time.Second, "the restarted p1 knowing qf-1", func() error { return p1.has("qf-1") })
	pollUntil(t, 30*time.Second, "a quorum declare on the restarted p1", func() error { return p1.declareQuorum("qf-2") })
	pollUntil(t, 30*time.Second, "qf-2 served on p1", func() error { return p1.quorumServes("qf-2") })

	p1.kill9(t)
	took = pollUntil(t, 30*time.Second, "qf-2 served on p2 after p1's second kill", func() error { return p2.quorumServes("qf-2") })
	t.Logf("qf-2 served on p2 %v after p1's second kill", took.Round(time.Millisecond))
}
