package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// defState is one queue's definition state: whether it exists and its
// amq.direct binding keys (sorted, comma-joined, so states compare by ==).
type defState struct {
	exists bool
	keys   string
}

type defInput struct{ f, key string }

type defOutput struct {
	status string // ok, not-found or unknown
	keys   []string
}

func (s defState) withKey(k string, add bool) defState {
	set := map[string]bool{}
	for _, x := range strings.Split(s.keys, ",") {
		if x != "" {
			set[x] = true
		}
	}
	if add {
		set[k] = true
	} else {
		delete(set, k)
	}
	list := make([]string, 0, len(set))
	for x := range set {
		list = append(list, x)
	}
	sort.Strings(list)
	s.keys = strings.Join(list, ",")
	return s
}

// stepDef is the model of one queue's definitions as RabbitMQ 3.10 and
// Warren answer: delete and unbind of what is missing succeed (Warren's
// unbind of a missing queue answers 404, also accepted); an unknown
// outcome may have taken effect, and porcupine places it last if not.
func stepDef(s defState, in defInput, out defOutput) (bool, defState) {
	definite := out.status != evUnknown
	switch out.status {
	case errNotFound:
		return !s.exists, s
	case errHomeDown:
		// The queue exists and nothing changed: its home could not act.
		return s.exists, s
	}
	switch in.f {
	case "declare":
		s.exists = true
	case "delete":
		s = defState{}
	case "bind":
		if definite && !s.exists {
			return false, s
		}
		if s.exists {
			s = s.withKey(in.key, true)
		}
	case "unbind":
		s = s.withKey(in.key, false)
	case "exists":
		return !definite || s.exists, s
	case "bindings":
		return !definite || (s.exists && s.keys == strings.Join(out.keys, ",")), s
	}
	return true, s
}

var defModel = porcupine.Model{
	Init: func() any { return defState{} },
	Step: func(state, input, output any) (bool, any) {
		return stepDef(state.(defState), input.(defInput), output.(defOutput))
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(defInput), output.(defOutput)
		return fmt.Sprintf("%s %s -> %s %v", in.f, in.key, out.status, out.keys)
	},
	DescribeState: func(state any) string {
		s := state.(defState)
		return fmt.Sprintf("exists=%v keys=[%s]", s.exists, s.keys)
	},
}

// defOperations pairs the definition invokes with their completions into
// porcupine operations, one partition per queue (per node and queue while
// nodes are independent). Reads with unknown outcomes say nothing and are
// left out; other unknowns never return.
//
// In a cluster every change goes through Raft and is answered once the
// client's node applied it, but reads (a passive declare, the management
// API's bindings, a 404 decided before proposing) are answered from the
// node's own state, as RabbitMQ's are, and may lag other nodes. What the
// node promises is that a read reflects at least every change completed
// anywhere before the invoke of the last change completed on that node
// (it applied the log up to that change). So a read's call time is moved
// back to that invoke: porcupine may place it anywhere from there on.
func defOperations(hist []Event, scope string) (map[string][]porcupine.Operation, int) {
	clients := map[string]int{}
	invokes := map[int64]Event{}
	floor := map[string]int64{}   // node → invoke time of its last completed change
	readFrom := map[int64]int64{} // op → its node's floor at its invoke
	done := map[int64]bool{}
	parts := map[string][]porcupine.Operation{}
	n := 0
	addOp := func(inv Event, out defOutput, ret int64) {
		if out.status == evUnknown && (inv.F == "exists" || inv.F == "bindings") {
			return
		}
		key := inv.Q
		if scope == "node" {
			key = inv.Node + "/" + inv.Q
		}
		if _, ok := clients[inv.Proc]; !ok {
			clients[inv.Proc] = len(clients)
		}
		call := inv.T
		if scope == "cluster" && isReadAnswer(inv.F, out.status) {
			call = min(call, readFrom[inv.Op])
		}
		parts[key] = append(parts[key], porcupine.Operation{ClientId: clients[inv.Proc],
			Input: defInput{inv.F, inv.Key}, Call: call, Output: out, Return: ret, Metadata: inv})
	}
	for _, e := range hist {
		if !slices.Contains(defOps, e.F) {
			continue
		}
		if e.Type == evInvoke {
			invokes[e.Op] = e
			readFrom[e.Op] = floor[e.Node]
			n++
			continue
		}
		inv, ok := invokes[e.Op]
		if !ok {
			continue
		}
		done[e.Op] = true
		out := defOutput{status: e.Type, keys: e.Keys}
		switch {
		case e.Type == evFail && (e.Err == errNotFound || e.Err == errHomeDown):
			out.status = e.Err
		case e.Type != evOK:
			out.status = evUnknown
		}
		ret := e.T
		if out.status == evUnknown {
			ret = math.MaxInt64
		}
		if out.status == evOK && !isReadAnswer(inv.F, out.status) {
			floor[inv.Node] = max(floor[inv.Node], inv.T)
		}
		addOp(inv, out, ret)
	}
	for op, inv := range invokes {
		if !done[op] {
			addOp(inv, defOutput{status: evUnknown}, math.MaxInt64)
		}
	}
	return parts, n
}

// isReadAnswer reports an answer a cluster node may give from its own
// state: a read, a refusal because the queue is missing or its home is
// down, and a delete-ok, which for a queue the node believes missing is
// answered there without a proposal (as RabbitMQ answers it; the run's
// deletes of missing queues come back in 0.1 ms, no Raft round). A real
// delete placed earlier than its invoke is the price of that relaxation.
func isReadAnswer(f, status string) bool {
	return f == "exists" || f == "bindings" || status == errNotFound || status == errHomeDown ||
		(f == "delete" && status == evOK)
}

// defCheckTimeout bounds porcupine's search of one partition; a search
// that does not end is reported (as porcupine's Unknown), not passed.
const defCheckTimeout = 30 * time.Second

// checkDefinitions checks each partition's linearizability.
func checkDefinitions(hist []Event, scope, htmlPattern string, s *summary) []violation {
	parts, n := defOperations(hist, scope)
	s.DefinitionOps = n
	keys := make([]string, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []violation
	for _, k := range keys {
		res, info := porcupine.CheckOperationsVerbose(defModel, parts[k], defCheckTimeout)
		if res == porcupine.Ok {
			continue
		}
		v := violation{ID: k, Detail: fmt.Sprintf("%d operations on %s: porcupine says %s", len(parts[k]), k, res)}
		v.Events = stuckOps(parts[k], info)
		if htmlPattern != "" {
			path := fmt.Sprintf(htmlPattern, strings.NewReplacer("/", "_").Replace(k))
			if err := porcupine.VisualizePath(defModel, info, path); err == nil {
				v.Detail += "; drawn in " + path
			}
		}
		out = append(out, v)
	}
	return out
}

// stuckOps returns the longest partial linearization's last operations and
// the first ones (by call time) it could not place: the operations involved.
func stuckOps(ops []porcupine.Operation, info porcupine.LinearizationInfo) []Event {
	var longest []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, lin := range part {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	placed := map[int64]bool{}
	var evs []Event
	for i, op := range longest {
		placed[op.Metadata.(Event).Op] = true
		if i >= len(longest)-5 {
			evs = append(evs, opEvent(op))
		}
	}
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	for _, op := range sorted {
		if !placed[op.Metadata.(Event).Op] && len(evs) < 10 {
			evs = append(evs, opEvent(op))
		}
	}
	return evs
}

// opEvent is an operation as its invoke event with the outcome in Err.
func opEvent(op porcupine.Operation) Event {
	e := op.Metadata.(Event)
	out := op.Output.(defOutput)
	e.Type, e.Keys = "op", out.keys
	e.Err = out.status
	if op.Return != math.MaxInt64 {
		e.Err += fmt.Sprintf(" after %v", time.Duration(op.Return-op.Call))
	}
	return e
}
