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
	for _, n := range nodes {
		err := drainNode(n, h)
		e := Event{Proc: "drain", F: "drain", Node: n.name, Q: workQueue}
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

// drainNode consumes n's work queue until it is empty.
func drainNode(n *node, h *history) error {
	c, err := dial(n)
	if err != nil {
		return err
	}
	defer c.Close()
	deliveries, err := consume(c, "drain")
	if err != nil {
		return err
	}
	probe, err := c.Channel()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(drainTimeout)
	for time.Now().Before(deadline) {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return errors.New("drain consumer closed")
			}
			h.record(Event{Proc: "drain", Type: evOK, F: "deliver", Node: n.name, ID: d.MessageId, Redelivered: d.Redelivered})
			if err := d.Ack(false); err != nil {
				return err
			}
		case <-time.After(drainIdle):
			q, err := probe.QueueDeclarePassive(workQueue, true, false, false, false, nil)
			if err != nil {
				return err
			}
			if q.Messages == 0 {
				return nil
			}
		}
	}
	return fmt.Errorf("%s still had messages after %v", n.name, drainTimeout)
}
