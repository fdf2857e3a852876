package main

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Quorum-queue rules of -scope cluster -queue-type quorum (cluster-design
// §6.7). A quorum queue's leader confirms only while it is in contact with
// the metadata Raft majority, so a node cut from that majority stops
// confirming soon after the cut; on the majority side the queue's leader
// is re-elected among the in-sync replicas, and the time that takes is the
// fault's failover time, reported per fault (not judged: the bound is the
// design's, the figure is what a run measured).

// minorityConfirmLimit is how long after a cut a cut-off node may still
// confirm publishes: the leader notices it lost the metadata majority
// within this (cluster-design §6.7). A classic queue homed there confirms
// for as long as its clients reach it, so the rule is quorum-only.
const minorityConfirmLimit = 6 * time.Second

// checkMinorityConfirms reports every publish confirmed by a node more than
// minorityConfirmLimit after a majority-minority or isolate fault cut it
// off, until the heal.
func checkMinorityConfirms(hist []Event, nem []nemesisEvent) []violation {
	wins := cutWindows(nem)
	invokes := map[int64]Event{}
	var out []violation
	for _, e := range hist {
		if e.F != "publish" {
			continue
		}
		if e.Type == evInvoke {
			invokes[e.Op] = e
			continue
		}
		if e.Type != evOK {
			continue
		}
		for _, w := range wins {
			limit := w.fault.T + int64(minorityConfirmLimit)
			if e.T <= limit || e.T >= w.to || !slices.Contains(w.nodes, e.Node) {
				continue
			}
			inv := invokes[e.Op]
			out = append(out, violation{ID: e.ID, Detail: fmt.Sprintf(
				"%s confirmed %v after the %s cut of %v at %s (limit %v): a quorum queue committed without the metadata majority",
				e.Node, time.Duration(e.T-w.fault.T).Round(time.Millisecond), w.fault.Kind, w.nodes,
				time.Unix(0, w.fault.T).UTC().Format("15:04:05.000"), minorityConfirmLimit),
				Events: pick(inv, e)})
		}
	}
	return out
}

// confirmOn is one confirmed publish: when, through which node, to which
// queue.
type confirmOn struct {
	t       int64
	node, q string
}

// majorityConfirms lists the run's confirms in time order with the queue
// of their invoke.
func majorityConfirms(hist []Event) []confirmOn {
	qOf := map[int64]string{}
	var out []confirmOn
	for _, e := range hist {
		if e.F != "publish" {
			continue
		}
		switch e.Type {
		case evInvoke:
			qOf[e.Op] = e.Q
		case evOK:
			out = append(out, confirmOn{t: e.T, node: e.Node, q: qOf[e.Op]})
			delete(qOf, e.Op)
		}
	}
	return out
}

// failover fills, for each fault, the time to the next confirm through a
// node the fault did not touch (the majority side), and the failover time:
// the longest, over the work queues, of the time to that queue's next such
// confirm, before the next fault (-1: a queue had none). The queue whose
// leader the fault took is the slow one; the others answer at once.
func failover(hist []Event, nem []nemesisEvent, us []unavailability) {
	confirms := majorityConfirms(hist)
	var queues []string // every queue published to
	for _, e := range hist {
		if e.F == "publish" && e.Type == evInvoke && !slices.Contains(queues, e.Q) {
			queues = append(queues, e.Q)
		}
	}
	var faultTimes []int64
	for _, e := range nem {
		if e.Event == "fault" {
			faultTimes = append(faultTimes, e.T)
		}
	}
	for i := range us {
		u := &us[i]
		u.MajorityNextConfirmMs, u.FailoverMs = -1, -1
		if u.Event != "fault" {
			continue
		}
		end := int64(1<<63 - 1)
		if j := sort.Search(len(faultTimes), func(j int) bool { return faultTimes[j] > u.T }); j < len(faultTimes) {
			end = faultTimes[j]
		}
		next := map[string]int64{}
		start := sort.Search(len(confirms), func(j int) bool { return confirms[j].t > u.T })
		for _, c := range confirms[start:] {
			if c.t >= end {
				break
			}
			if slices.Contains(u.Nodes, c.node) {
				continue
			}
			if u.MajorityNextConfirmMs < 0 {
				u.MajorityNextConfirmMs = (c.t - u.T) / int64(time.Millisecond)
			}
			if _, seen := next[c.q]; !seen {
				next[c.q] = c.t
			}
			if len(next) == len(queues) {
				break
			}
		}
		if len(next) < len(queues) {
			continue
		}
		var worst int64
		for _, t := range next {
			worst = max(worst, t-u.T)
		}
		u.FailoverMs = worst / int64(time.Millisecond)
	}
}
