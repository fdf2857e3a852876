package main

import (
	"strings"
	"testing"
)

// histBuilder writes hand-made histories with increasing timestamps.
type histBuilder struct {
	t    int64
	op   int64
	hist []Event
}

func (b *histBuilder) add(e Event) *histBuilder {
	b.t += 1000
	e.T = b.t
	b.hist = append(b.hist, e)
	return b
}

// publish records a publish of id with the given outcome.
func (b *histBuilder) publish(id, outcome string) *histBuilder {
	b.op++
	b.add(Event{Proc: "pub-0", Type: evInvoke, F: "publish", Op: b.op, ID: id, Node: "w1"})
	return b.add(Event{Proc: "pub-0", Type: outcome, F: "publish", Op: b.op, ID: id, Node: "w1"})
}

func (b *histBuilder) deliver(id string, redelivered bool) *histBuilder {
	return b.add(Event{Proc: "cons-0", Type: evOK, F: "deliver", ID: id, Node: "w1", Redelivered: redelivered})
}

func (b *histBuilder) commit(ids ...string) *histBuilder {
	b.op++
	b.add(Event{Proc: "tx-0", Type: evInvoke, F: "commit", Op: b.op, IDs: ids, Node: "w1"})
	return b.add(Event{Proc: "tx-0", Type: evOK, F: "commit", Op: b.op, IDs: ids, Node: "w1"})
}

// def records a definition operation of proc that completes before the
// next one starts, unless overlap leaves its completion to the caller.
func (b *histBuilder) def(proc, f, q, key, outcome string, keys ...string) *histBuilder {
	b.op++
	b.add(Event{Proc: proc, Type: evInvoke, F: f, Op: b.op, Node: "w1", Q: q, Key: key})
	e := Event{Proc: proc, Type: outcome, F: f, Op: b.op, Node: "w1", Q: q, Key: key, Keys: keys}
	if outcome == evFail {
		e.Err = errNotFound
	}
	return b.add(e)
}

func kinds(s summary) []string {
	var out []string
	for _, v := range s.Violations {
		out = append(out, v.Kind+":"+v.ID)
	}
	return out
}

func wantKinds(t *testing.T, s summary, want ...string) {
	t.Helper()
	if got := kinds(s); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("violations %v, want %v", got, want)
	}
}

func TestCheckCleanHistoryPasses(t *testing.T) {
	b := &histBuilder{}
	b.publish("m1", evOK).publish("m2", evOK).publish("m3", evUnknown).publish("m4", evFail)
	b.deliver("m1", false).deliver("m2", false).deliver("m2", true) // a redelivery is allowed
	b.deliver("m3", false)                                          // unconfirmed but delivered: recovered
	b.def("def-0", "declare", "q", "", evOK).def("def-0", "bind", "q", "k0", evOK)
	b.def("def-1", "bindings", "q", "", evOK, "k0").def("def-1", "delete", "q", "", evOK)
	b.def("def-0", "exists", "q", "", evFail).def("def-0", "bind", "q", "k1", evFail)
	s := check(b.hist, nil, "node", "classic", "")
	wantKinds(t, s)
	if s.Confirmed != 2 || s.Recovered != 1 || s.Redeliveries != 1 || s.PublishUnknown != 1 || s.DefinitionOps != 6 {
		t.Errorf("summary %+v", s)
	}
}

func TestCheckFindsLostMessage(t *testing.T) {
	b := &histBuilder{}
	b.publish("m1", evOK).publish("m2", evOK).deliver("m1", false)
	s := check(b.hist, nil, "node", "classic", "")
	wantKinds(t, s, "lost:m2")
	if len(s.Violations[0].Events) != 2 {
		t.Errorf("lost violation should quote the publish invoke and confirm: %+v", s.Violations[0])
	}
}

func TestCheckFindsUnexpectedMessage(t *testing.T) {
	b := &histBuilder{}
	b.publish("m1", evOK).deliver("m1", false).deliver("ghost", false)
	wantKinds(t, check(b.hist, nil, "node", "classic", ""), "unexpected:ghost")
}

func TestCheckFindsDuplicateWithoutRedelivered(t *testing.T) {
	b := &histBuilder{}
	b.publish("m1", evOK).deliver("m1", false).deliver("m1", false)
	wantKinds(t, check(b.hist, nil, "node", "classic", ""), "duplicate-not-redelivered:m1")
}

func TestCheckFindsCommittedAckReturned(t *testing.T) {
	b := &histBuilder{}
	b.publish("m1", evOK).publish("m2", evOK).deliver("m1", false).deliver("m2", false)
	b.commit("m1", "m2").deliver("m2", true) // redelivered, but its ack was committed
	wantKinds(t, check(b.hist, nil, "node", "classic", ""), "committed-ack-returned:m2")
}

func TestCheckFindsDrainFailureAndNodeExit(t *testing.T) {
	b := &histBuilder{}
	b.add(Event{Proc: "drain", Type: evFail, F: "drain", Node: "w2", Err: "no answer"})
	nem := []nemesisEvent{{T: 1, Event: "node-exit", Nodes: []string{"w1"}, Err: "exit status 1"}}
	wantKinds(t, check(b.hist, nem, "node", "classic", ""), "drain-incomplete:w2", "node-exit:[w1]")
}

// A queue seen missing after its declare-ok, with no delete in between, is
// not linearizable; nor are bindings that lose a bind-ok.
func TestCheckFindsNonLinearizableDefinitions(t *testing.T) {
	b := &histBuilder{}
	b.def("def-0", "declare", "q", "", evOK).def("def-1", "exists", "q", "", evFail)
	b.def("def-0", "declare", "r", "", evOK).def("def-0", "bind", "r", "k0", evOK).def("def-1", "bindings", "r", "", evOK)
	s := check(b.hist, nil, "node", "classic", "")
	wantKinds(t, s, "definitions-not-linearizable:w1/q", "definitions-not-linearizable:w1/r")
	if len(s.Violations[0].Events) == 0 {
		t.Errorf("violation names no operations: %+v", s.Violations[0])
	}
}

// An operation whose outcome is unknown may or may not have taken effect;
// both histories are linearizable.
func TestCheckUnknownDefinitionMayHaveHappened(t *testing.T) {
	for _, seen := range []string{evOK, evFail} {
		b := &histBuilder{}
		b.def("def-0", "declare", "q", "", evUnknown).def("def-1", "exists", "q", "", seen)
		wantKinds(t, check(b.hist, nil, "node", "classic", ""))
	}
}

// defOn records a definition operation of proc on node, completing
// before the next one starts; outcome evFail is a 404 (errNotFound) unless
// reason says otherwise.
func (b *histBuilder) defOn(node, proc, f, q, key, outcome, reason string) *histBuilder {
	b.op++
	b.add(Event{Proc: proc, Type: evInvoke, F: f, Op: b.op, Node: node, Q: q, Key: key})
	e := Event{Proc: proc, Type: outcome, F: f, Op: b.op, Node: node, Q: q, Key: key}
	switch {
	case reason != "":
		e.Err = reason
	case outcome == evFail:
		e.Err = errNotFound
	}
	return b.add(e)
}

// With independent nodes the same queue name on two nodes is two objects;
// in a cluster it is one, and a node's reads may lag the others until the
// node has itself completed a later change.
func TestCheckDefinitionScope(t *testing.T) {
	b := &histBuilder{}
	b.def("def-0", "declare", "q", "", evOK)
	b.defOn("w2", "def-1", "exists", "q", "", evFail, "")
	wantKinds(t, check(b.hist, nil, "node", "classic", ""))
	wantKinds(t, check(b.hist, nil, "cluster", "classic", "")) // w2 had not applied the declare yet
	b.defOn("w2", "def-1", "bind", "q", "k0", evOK, "")
	b.defOn("w2", "def-1", "exists", "q", "", evFail, "") // after w2 applied a later change
	wantKinds(t, check(b.hist, nil, "node", "classic", ""), "definitions-not-linearizable:w2/q")
	wantKinds(t, check(b.hist, nil, "cluster", "classic", ""), "definitions-not-linearizable:q")
}

// A cluster's 404 for a queue whose home is down says the queue exists.
func TestCheckHomeDownMeansExists(t *testing.T) {
	b := &histBuilder{}
	b.def("def-0", "declare", "q", "", evOK).defOn("w1", "def-0", "delete", "q", "", evFail, errHomeDown)
	b.defOn("w1", "def-0", "bind", "q", "k0", evOK, "")
	wantKinds(t, check(b.hist, nil, "cluster", "classic", ""))
	b = &histBuilder{}
	b.defOn("w1", "def-0", "exists", "r", "", evFail, errHomeDown) // r was never declared
	wantKinds(t, check(b.hist, nil, "cluster", "classic", ""), "definitions-not-linearizable:r")
}

// A node cut from the majority may answer from its frozen state but must
// not accept a change: a delete-ok and a declare-ok of one queue there
// cannot both be no-ops. Its 541 refusals are counted.
func TestCheckMinorityAcceptedChange(t *testing.T) {
	b := &histBuilder{}
	b.def("def-0", "declare", "q", "", evOK)
	cut := b.t
	b.t += int64(minorityGrace)
	b.defOn("w1", "def-0", "declare", "q", "", evOK, "").defOn("w1", "def-0", "exists", "q", "", evOK, "")
	b.defOn("w1", "def-0", "bind", "q", "k1", evUnknown, "Exception (541) Reason: \"INTERNAL_ERROR - failed to bind ... ("+noMajorityText+": no Raft majority within 10s)\"")
	nem := []nemesisEvent{{T: cut, Event: "fault", Family: "partition", Kind: "majority-minority", Nodes: []string{"w1"}},
		{T: b.t + 1_000_000_000, Event: "heal", Family: "partition", Kind: "majority-minority", Nodes: []string{"w1"}}}
	s := check(b.hist, nem, "cluster", "classic", "")
	wantKinds(t, s)
	if s.MinorityRefusals != 1 || s.MinorityAnswers != 2 {
		t.Errorf("minority refusals %d answers %d, want 1 and 2", s.MinorityRefusals, s.MinorityAnswers)
	}
	b.defOn("w1", "def-0", "delete", "q", "", evOK, "")
	nem[1].T = b.t + 1
	wantKinds(t, check(b.hist, nem, "cluster", "classic", ""), "minority-accepted-change:0/w1/q")
}

func TestUnavailabilityIsTimeToNextConfirm(t *testing.T) {
	b := &histBuilder{}
	b.publish("m1", evOK) // confirm at t=2000
	nem := []nemesisEvent{{T: 1500, Event: "fault", Family: "crash"}, {T: 5000, Event: "heal", Family: "crash"}}
	b.t = 1500 + 3_000_000_000 - 1000
	b.publish("m2", evOK) // confirm 3 s after the fault
	b.deliver("m1", false).deliver("m2", false)
	s := check(b.hist, nem, "node", "classic", "")
	if len(s.Unavailability) != 2 || s.Unavailability[0].NextConfirmMs != 0 || s.Unavailability[1].NextConfirmMs != 2999 {
		t.Errorf("unavailability %+v", s.Unavailability)
	}
	if s.Faults != 1 || s.MaxUnavailableMs != 2999 {
		t.Errorf("faults %d max %d", s.Faults, s.MaxUnavailableMs)
	}
}

// A heal after which publishes go on but none is confirmed again is a node
// that did not recover; the run's final heal, after the workload, is not.
func TestCheckFindsNoConfirmAfterHeal(t *testing.T) {
	b := &histBuilder{}
	b.publish("m1", evOK).deliver("m1", false)
	heal := b.t + 1000
	nem := []nemesisEvent{{T: heal - 500, Event: "fault", Family: "disk", Kind: "full", Nodes: []string{"w1"}},
		{T: heal, Event: "heal", Family: "disk", Kind: "full", Nodes: []string{"w1"}}}
	wantKinds(t, check(b.hist, nem, "node", "classic", "")) // no publish after it: the run's end
	b.t = heal + int64(healGrace) + 1
	b.publish("m2", evFail)
	wantKinds(t, check(b.hist, nem, "node", "classic", ""), "no-confirm-after-heal:[w1]")
	b.publish("m3", evOK).deliver("m3", false)
	wantKinds(t, check(b.hist, nem, "node", "classic", ""))
	// Publishes that fail only after the next fault began do not count
	// against the heal (a cluster run cut the same node off again).
	b = &histBuilder{}
	b.publish("m1", evOK).deliver("m1", false)
	heal = b.t + 1000
	next := heal + 2000
	nem = []nemesisEvent{{T: heal - 500, Event: "fault", Family: "partition", Kind: "majority-minority", Nodes: []string{"w1"}},
		{T: heal, Event: "heal", Family: "partition", Kind: "majority-minority", Nodes: []string{"w1"}},
		{T: next, Event: "fault", Family: "partition", Kind: "majority-minority", Nodes: []string{"w1"}}}
	b.t = heal + int64(healGrace) + 1
	b.publish("m2", evUnknown)
	wantKinds(t, check(b.hist, nem, "node", "classic", ""))
}
