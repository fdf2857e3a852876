package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

const (
	drainIdle    = 2 * time.Second // no delivery this long: ask the queue's depth
	drainTimeout = 3 * time.Minute // per node
)

// recoverAndDrain undoes whatever fault may be left, restarts dead nodes,
// waits until every node answers and drains the work queue on each,
// recording the deliveries and one drain outcome per node.
func recoverAndDrain(cfg config, nodes []*node, h *history) error {
	for _, n := range nodes {
		resetFaults(n)
		if !n.running() {
			if err := n.start(); err != nil {
				return err
			}
		}
	}
	if err := waitReady(nodes); err != nil {
		return err
	}
	var failed []string
	for i, q := range workQueues(cfg) {
		// Each queue is drained on its home: the node's own queue, or in a
		// cluster the node that declared it.
		n := nodes[i]
		err := drainQueue(n, q, h)
		// A node that has just healed may not see the queue's leader or
		// home as alive yet (gossip catches up after the heal): its 404
		// says so, and the drain asks again until drainTimeout.
		for deadline := time.Now().Add(drainTimeout); isHomeDown(err) && time.Now().Before(deadline); {
			time.Sleep(time.Second) // poll until the deadline
			err = drainQueue(n, q, h)
		}
		e := Event{Proc: "drain", F: "drain", Node: n.name, Q: q}
		if err != nil {
			e.Type, e.Err = evFail, err.Error()
			failed = append(failed, n.name+": "+err.Error())
		} else {
			e.Type = evOK
		}
		h.record(e)
	}
	if len(failed) > 0 {
		return fmt.Errorf("drain incomplete: %v", failed)
	}
	return nil
}

// resetFaults heals every fault kind on n, whatever the nemesis managed;
// each undo of a fault that is not there fails harmlessly.
func resetFaults(n *node) {
	if n.isPaused() {
		n.signalPause(false)
	}
	ipCmd("ip", "link", "set", vethName(n.index), "up")
	ipCmd("ip", "-n", n.name, "route", "flush", "type", "blackhole")
	ipCmd("tc", "qdisc", "del", "dev", vethName(n.index), "root")
	os.Remove(filepath.Join(n.dataDir, "chaos-fill"))
}

// drainQueue consumes queue q through node n until it is empty.
func drainQueue(n *node, q string, h *history) error {
	c, err := dial(n)
	if err != nil {
		return err
	}
	defer c.Close()
	ds, err := consume(c, "drain", []string{q})
	if err != nil {
		return err
	}
	probe, err := c.Channel()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(drainTimeout)
	for time.Now().Before(deadline) {
		d, ok, idle := ds.next(time.After(drainIdle))
		switch {
		case idle:
			st, err := probe.QueueDeclarePassive(q, true, false, false, false, nil)
			if err != nil {
				return err
			}
			if st.Messages == 0 {
				return nil
			}
		case !ok:
			return errors.New("drain consumer closed")
		default:
			h.record(Event{Proc: "drain", Type: evOK, F: "deliver", Node: n.name, ID: d.MessageId, Redelivered: d.Redelivered})
			if err := d.Ack(false); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("%s on %s still had messages after %v", q, n.name, drainTimeout)
}
