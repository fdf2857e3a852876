package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// The minority rule of -scope cluster: a node cut from the Raft majority
// (a majority-minority partition's minority, an isolated node) cannot
// commit anything, and no commit reaches it, so its definitions are frozen
// for the fault. It may answer what changes nothing (an equivalent
// redeclare, a delete of a missing queue) from that frozen state, and must
// refuse every real change with 541. So the definition operations it
// answers (ok or 404) during the fault must all be consistent with one
// state per queue; two that cannot both be no-ops (a delete-ok and a
// declare-ok of one queue, a bind-ok and an unbind-ok of one key) mean it
// accepted a change without a majority.

// minorityGrace skips operations invoked right after the cut: an entry
// committed just before it may still be applied on the minority node.
const minorityGrace = time.Second

// window is one fault that cut nodes from the majority.
type window struct {
	fault    nemesisEvent
	from, to int64
	nodes    []string
}

func cutWindows(nem []nemesisEvent) []window {
	var out []window
	for i, e := range nem {
		if e.Event != "fault" || (e.Kind != "majority-minority" && e.Kind != "isolate") {
			continue
		}
		w := window{fault: e, from: e.T + int64(minorityGrace), to: int64(^uint64(0) >> 1), nodes: e.Nodes}
		for _, h := range nem[i+1:] {
			if h.Event == "heal" && h.Kind == e.Kind {
				w.to = h.T
				break
			}
		}
		out = append(out, w)
	}
	return out
}

// frozen collects what the answers on one node and queue say about its
// frozen state.
type frozen struct {
	exists map[bool][]Event // exists → the answers that require it
	key    map[string]map[bool][]Event
	events []Event
}

func (f *frozen) need(exists bool, e Event) { f.exists[exists] = append(f.exists[exists], e) }

func (f *frozen) needKey(k string, in bool, e Event) {
	if f.key[k] == nil {
		f.key[k] = map[bool][]Event{}
	}
	f.key[k][in] = append(f.key[k][in], e)
}

// checkMinority applies the minority rule to a cluster run's history; it
// returns the violations and counts the 541 refusals on cut-off nodes.
func checkMinority(hist []Event, nem []nemesisEvent, s *summary) []violation {
	invokes := map[int64]Event{}
	var out []violation
	wins := cutWindows(nem)
	states := map[string]*frozen{} // window index/node/queue
	var order []string
	for _, e := range hist {
		if !slices.Contains(defOps, e.F) {
			continue
		}
		if e.Type == evInvoke {
			invokes[e.Op] = e
			continue
		}
		inv, ok := invokes[e.Op]
		if !ok {
			continue
		}
		for wi, w := range wins {
			if inv.T < w.from || e.T > w.to || !slices.Contains(w.nodes, inv.Node) {
				continue
			}
			if e.Type == evUnknown && strings.Contains(e.Err, noMajorityText) {
				s.MinorityRefusals++
			}
			if e.Type != evOK && !(e.Type == evFail && e.Err == errNotFound) {
				continue
			}
			s.MinorityAnswers++
			k := fmt.Sprintf("%d/%s/%s", wi, inv.Node, inv.Q)
			f := states[k]
			if f == nil {
				f = &frozen{exists: map[bool][]Event{}, key: map[string]map[bool][]Event{}}
				states[k] = f
				order = append(order, k)
			}
			f.events = append(f.events, inv, e)
			f.constrain(inv, e)
		}
	}
	for _, k := range order {
		if v, bad := states[k].conflict(); bad {
			v.ID = k
			out = append(out, v)
		}
	}
	return out
}

// constrain records what answer e to operation inv requires of the state.
func (f *frozen) constrain(inv, e Event) {
	if e.Type == evFail { // 404: the queue is missing
		f.need(false, e)
		return
	}
	switch inv.F {
	case "declare", "exists":
		f.need(true, e)
	case "delete":
		f.need(false, e)
	case "bind":
		f.need(true, e)
		f.needKey(inv.Key, true, e)
	case "unbind":
		f.needKey(inv.Key, false, e) // or the queue is missing
	case "bindings":
		f.need(true, e)
		for _, k := range defKeys {
			f.needKey(k, slices.Contains(e.Keys, k), e)
		}
	}
}

// conflict reports answers that no single state explains.
func (f *frozen) conflict() (violation, bool) {
	if len(f.exists[true]) > 0 && len(f.exists[false]) > 0 {
		return violation{Detail: "a node cut from the Raft majority answered as if the queue existed and as if it did not: it accepted a change without a majority",
			Events: pick(f.exists[true][0], f.exists[false][0])}, true
	}
	if len(f.exists[false]) > 0 {
		return violation{}, false // missing: every unbind is a no-op
	}
	keys := make([]string, 0, len(f.key))
	for k := range f.key {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if in := f.key[k]; len(in[true]) > 0 && len(in[false]) > 0 {
			return violation{Detail: fmt.Sprintf("a node cut from the Raft majority answered as if binding %s existed and as if it did not: it accepted a change without a majority", k),
				Events: pick(in[true][0], in[false][0])}, true
		}
	}
	return violation{}, false
}

func pick(es ...Event) []Event { return es }
