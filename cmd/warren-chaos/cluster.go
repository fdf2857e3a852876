package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// -scope cluster: the nodes form one Warren cluster on the harness's
// bridge (cluster-listen 10.99.0.1i:25672, every node a seed), so the
// definitions are one Raft-replicated state and each work queue lives on
// one home node that every other node serves through the remote-queue
// proxy. There is one durable classic work queue per node, declared on that
// node, so every fault hits the home of some queue and the clients on the
// other nodes reach it through forwarded operations.

const clusterPort = "25672"

// clusterArgs are the cluster flags of node i of a run.
func clusterArgs(cfg config, n *node) []string {
	seeds := make([]string, cfg.Nodes)
	for j := range seeds {
		seeds[j] = nodeIP(j+1) + ":" + clusterPort
	}
	return []string{
		"--cluster-listen", n.ip + ":" + clusterPort,
		"--cluster-seeds", strings.Join(seeds, ","),
		"--cluster-bootstrap-expect", strconv.Itoa(min(cfg.Nodes, 3)),
		"--cluster-name", "warren-chaos",
		"--cluster-secret", cfg.ClusterSecret,
	}
}

// newClusterSecret draws the run's cluster secret: one per run, so nodes
// of an earlier run (kept data dirs) can never join this one.
func newClusterSecret() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("cluster secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// workQueues are the run's work queues: one per node in a cluster (index i
// homed on node i+1), the one per-node queue otherwise.
func workQueues(cfg config) []string {
	if cfg.Scope != "cluster" {
		return []string{workQueue}
	}
	qs := make([]string, cfg.Nodes)
	for i := range qs {
		qs[i] = workQueue + "." + nodeName(i+1)
	}
	return qs
}

// homeOf is the node a work queue was declared on (its home in a cluster).
func homeOf(cfg config, nodes []*node, q string) *node {
	for i, name := range workQueues(cfg) {
		if name == q {
			return nodes[i]
		}
	}
	return nil
}

// declareTimeout bounds how long a new cluster may take to accept the
// first declares (formation with bootstrap-expect, then the first
// election).
const declareTimeout = 60 * time.Second

// declareClusterQueues declares each node's work queue on that node,
// retrying while the cluster forms (541 without a Raft majority yet).
func declareClusterQueues(cfg config, nodes []*node) error {
	for i, q := range workQueues(cfg) {
		n := nodes[i]
		deadline := time.Now().Add(declareTimeout)
		for {
			err := declareOn(n, q, queueArgs(cfg))
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s on %s: %w", q, n.name, err)
			}
			time.Sleep(500 * time.Millisecond) // poll until the deadline
		}
	}
	return nil
}

func declareOn(n *node, q string, args amqp.Table) error {
	c, err := dial(n)
	if err != nil {
		return err
	}
	defer c.Close()
	ch, err := c.Channel()
	if err == nil {
		_, err = ch.QueueDeclare(q, true, false, false, false, args)
	}
	return err
}

// noMajorityText marks Warren's refusal of a definition change without a
// Raft majority (541 INTERNAL_ERROR, Khepri's wording, and why).
const noMajorityText = "cluster metadata unavailable"

// isNoMajority reports a 541 refusal for want of a Raft majority.
func isNoMajority(err error) bool {
	var amqpErr *amqp.Error
	return errors.As(err, &amqpErr) && amqpErr.Code == amqp.InternalError && strings.Contains(amqpErr.Reason, noMajorityText)
}

// homeDownText marks a 404 for a queue whose home node is down: the queue
// exists, it cannot be reached (RabbitMQ 3.10's words). startingText marks
// the same 404 from a restarted node that led a quorum queue and does not
// know yet whether it still leads it: it passes within seconds, once the
// node has caught up with the metadata log.
const (
	homeDownText = "is down or inaccessible"
	startingText = "is not available yet (the node is starting)"
)

func isHomeDown(err error) bool {
	var amqpErr *amqp.Error
	return errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound &&
		(strings.Contains(amqpErr.Reason, homeDownText) || strings.Contains(amqpErr.Reason, startingText))
}

// deliveries are a session's consumers, one per work queue, on one AMQP
// channel; next takes from any of them without a goroutine per consumer.
type deliveries struct{ cases []reflect.SelectCase }

func newDeliveries(srcs []<-chan amqp.Delivery) *deliveries {
	d := &deliveries{}
	for _, src := range srcs {
		d.cases = append(d.cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(src)})
	}
	return d
}

// next returns the next delivery of any consumer; ok is false once one of
// them has closed (a cancelled consumer, a closed channel): the session
// then ends and reconnects. timeout (nil: none) ends the wait empty.
func (d *deliveries) next(timeout <-chan time.Time) (del amqp.Delivery, ok, timedOut bool) {
	cases := d.cases
	if timeout != nil {
		cases = append(cases[:len(cases):len(cases)], reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timeout)})
	}
	i, v, recvOK := reflect.Select(cases)
	if i == len(d.cases) {
		return amqp.Delivery{}, true, true
	}
	if !recvOK {
		return amqp.Delivery{}, false, false
	}
	return v.Interface().(amqp.Delivery), true, false
}
