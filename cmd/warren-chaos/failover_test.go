package main

import "testing"

// publishTo records a publish of id to queue q through node with outcome.
func (b *histBuilder) publishTo(node, q, id, outcome string) *histBuilder {
	b.op++
	b.add(Event{Proc: "pub-0", Type: evInvoke, F: "publish", Op: b.op, ID: id, Node: node, Q: q})
	return b.add(Event{Proc: "pub-0", Type: outcome, F: "publish", Op: b.op, ID: id, Node: node})
}

const sec = int64(1_000_000_000)

// A node cut from the majority may confirm for minorityConfirmLimit after
// the cut (its leader has not noticed yet), never later; the rule is the
// quorum queues', a classic queue homed there confirms on.
func TestCheckMinorityConfirm(t *testing.T) {
	b := &histBuilder{}
	cut := b.t + 1000
	nem := []nemesisEvent{{T: cut, Event: "fault", Family: "partition", Kind: "majority-minority", Nodes: []string{"w1"}},
		{T: cut + 20*sec, Event: "heal", Family: "partition", Kind: "majority-minority", Nodes: []string{"w1"}}}
	b.t = cut + 5*sec
	b.publishTo("w1", "q.w1", "early", evOK).deliver("early", false)
	b.publishTo("w2", "q.w1", "other-side", evOK).deliver("other-side", false)
	b.t = cut + 7*sec
	b.publishTo("w1", "q.w1", "nacked", evFail)
	wantKinds(t, check(b.hist, nem, "cluster", "quorum", ""))
	b.publishTo("w1", "q.w1", "late", evOK).deliver("late", false)
	wantKinds(t, check(b.hist, nem, "cluster", "quorum", ""), "minority-confirm:late")
	wantKinds(t, check(b.hist, nem, "cluster", "classic", ""))
	b.t = cut + 21*sec // after the heal
	b.publishTo("w1", "q.w1", "healed", evOK).deliver("healed", false)
	wantKinds(t, check(b.hist, nem, "cluster", "quorum", ""), "minority-confirm:late")
}

// The failover time of a fault is the longest wait, over the queues, for
// the next confirm through a node the fault left alone; confirms through
// the faulted node do not count.
func TestFailoverIsSlowestQueueOnTheMajority(t *testing.T) {
	b := &histBuilder{}
	b.publishTo("w1", "q.w1", "a", evOK).publishTo("w1", "q.w2", "b", evOK)
	kill := b.t + 1000
	nem := []nemesisEvent{{T: kill, Event: "fault", Family: "crash", Kind: "kill-9", Nodes: []string{"w1"}},
		{T: kill + 30*sec, Event: "heal", Family: "crash", Kind: "kill-9", Nodes: []string{"w1"}}}
	b.t = kill + sec - 1000
	b.publishTo("w2", "q.w2", "c", evOK) // w2's queue: 1 s
	b.t = kill + 2*sec - 1000
	b.publishTo("w1", "q.w1", "d", evOK) // through the faulted node: ignored
	b.t = kill + 8*sec - 1000
	b.publishTo("w2", "q.w1", "e", evOK) // w1's queue on its new leader: 8 s
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		b.deliver(id, false)
	}
	s := check(b.hist, nem, "cluster", "quorum", "")
	u := s.Unavailability[0]
	if u.NextConfirmMs != 1000 || u.MajorityNextConfirmMs != 1000 || u.FailoverMs != 8000 || s.MaxFailoverMs != 8000 {
		t.Errorf("fault unavailability %+v, max failover %d", u, s.MaxFailoverMs)
	}
	if h := s.Unavailability[1]; h.FailoverMs != -1 {
		t.Errorf("heal has a failover time: %+v", h)
	}
}
