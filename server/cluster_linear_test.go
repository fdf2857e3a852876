package server

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	amqp091 "github.com/rabbitmq/amqp091-go"
)

// The definitions model of the linearizability test: one queue, whether
// it exists and its amq.direct binding keys (sorted, comma-joined, so
// states compare with ==).
type linState struct {
	exists bool
	keys   string
}

type linInput struct{ op, key string }

// linOutput is an operation's outcome: "ok", "not-found" (a bind's 404),
// "home-down" (RabbitMQ's 404 for a queue whose home node is down),
// "unknown" (the connection or node was lost: it may have taken effect),
// or for the final read the keys seen.
type linOutput struct {
	status string
	keys   string
}

func (s linState) with(key string, add bool) linState {
	var keys []string
	if s.keys != "" {
		keys = strings.Split(s.keys, ",")
	}
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == key })
	if add {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	s.keys = strings.Join(keys, ",")
	return s
}

// linStep is RabbitMQ 3.10's answers: declare and delete succeed (a delete
// of a missing queue too), unbind succeeds even of what is not bound, a
// bind to a missing queue is 404 NOT_FOUND, and a declare or delete of a
// queue whose home node is down is 404 saying so.
func linStep(state, input, output any) (bool, any) {
	s, in, out := state.(linState), input.(linInput), output.(linOutput)
	if out.status == "home-down" {
		// 404 for a durable queue whose home node is down: it exists, and
		// the refused declare or delete changed nothing.
		return s.exists, s
	}
	switch in.op {
	case "declare":
		s.exists = true
	case "delete":
		s = linState{}
	case "bind":
		switch {
		case out.status == "not-found":
			return !s.exists, s
		case out.status == "ok" && !s.exists:
			return false, s
		case s.exists:
			s = s.with(in.key, true)
		}
	case "unbind":
		s = s.with(in.key, false)
	case "read":
		return s.exists == (out.status == "ok") && s.keys == out.keys, s
	}
	return true, s
}

var linModel = porcupine.Model{
	Init: func() any { return linState{} },
	Step: linStep,
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		return fmt.Sprintf("%s %s -> %s %s", in.op, in.key, out.status, out.keys)
	},
}

// linHistory collects the operations of every client, per queue.
type linHistory struct {
	mu  sync.Mutex
	ops map[string][]porcupine.Operation
}

func (h *linHistory) add(q string, op porcupine.Operation) {
	h.mu.Lock()
	h.ops[q] = append(h.ops[q], op)
	h.mu.Unlock()
}

var (
	linQueues = []string{"lin.0", "lin.1"}
	linKeys   = []string{"k0", "k1", "k2"}
	linOps    = []string{"declare", "delete", "bind", "unbind"}
)

// TestClusterDefinitionsAreLinearizable: clients on every node of a
// three-node cluster declare, delete, bind and unbind the same two durable
// queues concurrently while the Raft leader is stopped in the middle; each
// queue's history (with a final read after a barrier through the log) is
// linearizable under RabbitMQ's answers, checked with porcupine. An
// operation cut off by the stop is unknown: it may or may not have taken
// effect.
func TestClusterDefinitionsAreLinearizable(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	hist := &linHistory{ops: map[string][]porcupine.Operation{}}
	const clientsPerNode, opsPerClient = 2, 60
	var wg sync.WaitGroup
	for i, n := range nodes {
		for j := range clientsPerNode {
			id := i*clientsPerNode + j
			conn := n.dial(t)
			wg.Add(1)
			go func() {
				defer wg.Done()
				linClient(conn, id, opsPerClient, rand.New(rand.NewPCG(uint64(id), 14)), hist)
			}()
		}
	}
	var leader *clusterNode
	waitFor(t, 10*time.Second, "some operations before the stop", func() bool {
		hist.mu.Lock()
		defer hist.mu.Unlock()
		return len(hist.ops[linQueues[0]])+len(hist.ops[linQueues[1]]) >= 60
	})
	for _, n := range nodes {
		if n.ClusterNode().IsLeader() {
			leader = n
		}
	}
	if leader == nil {
		leader = nodes[0]
	}
	must(t, leader.Close())
	wg.Wait()

	var survivor *clusterNode
	for _, n := range nodes {
		if n != leader {
			survivor = n
			break
		}
	}
	must(t, survivor.logBarrier())
	total := 0
	for _, q := range linQueues {
		hist.add(q, linRead(survivor, q))
		ops := hist.ops[q]
		total += len(ops)
		res, info := porcupine.CheckOperationsVerbose(linModel, ops, 30*time.Second)
		if res != porcupine.Ok {
			path := t.TempDir() + "/" + q + ".html"
			if err := porcupine.VisualizePath(linModel, info, path); err != nil {
				t.Logf("drawing the history: %v", err)
			}
			sorted := slices.Clone(ops)
			sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
			t0 := sorted[0].Call
			for _, o := range sorted {
				ret := "inf"
				if o.Return != math.MaxInt64 {
					ret = fmt.Sprint((o.Return - t0) / 1e5)
				}
				t.Logf("client %d %6d-%5s %s", o.ClientId, (o.Call-t0)/1e5, ret, linModel.DescribeOperation(o.Input, o.Output))
			}
			t.Fatalf("the history of %s (%d operations) is not linearizable (%s); drawn in %s", q, len(ops), res, path)
		}
	}
	t.Logf("%d operations checked", total)
}

// linClient runs n random operations on its connection; once the
// connection is lost (its node stopped), it stops.
func linClient(conn *amqp091.Connection, id, n int, rnd *rand.Rand, hist *linHistory) {
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	for range n {
		q, in := linQueues[rnd.IntN(len(linQueues))], linInput{op: linOps[rnd.IntN(len(linOps))]}
		if in.op == "bind" || in.op == "unbind" {
			in.key = linKeys[rnd.IntN(len(linKeys))]
		}
		call := time.Now().UnixNano()
		switch in.op {
		case "declare":
			_, err = ch.QueueDeclare(q, true, false, false, false, nil)
		case "delete":
			_, err = ch.QueueDelete(q, false, false, false)
		case "bind":
			err = ch.QueueBind(q, in.key, "amq.direct", false, nil)
		case "unbind":
			err = ch.QueueUnbind(q, in.key, "amq.direct", nil)
		}
		op := porcupine.Operation{ClientId: id, Input: in, Call: call, Return: time.Now().UnixNano(), Output: linOutput{status: "ok"}}
		if err != nil {
			switch {
			case amqpCode(err) == 404 && strings.Contains(err.Error(), "is down or inaccessible"):
				op.Output = linOutput{status: "home-down"}
			case amqpCode(err) == 404:
				op.Output = linOutput{status: "not-found"}
			default:
				op.Output, op.Return = linOutput{status: "unknown"}, math.MaxInt64
			}
		}
		hist.add(q, op)
		if err == nil {
			continue
		}
		if amqpCode(err) != 404 {
			return // the node stopped or could not commit: stop here
		}
		if ch, err = conn.Channel(); err != nil {
			return
		}
	}
}

// linRead is the final state of q on n, as one read operation.
func linRead(n *clusterNode, q string) porcupine.Operation {
	call := time.Now().UnixNano()
	out := linOutput{status: "not-found"}
	if n.Vhost("/").queue(q) != nil {
		out.status = "ok"
		var keys []string
		d, _ := n.ExportDefinitions("/")
		for _, b := range d.Bindings {
			if b.Source == "amq.direct" && b.Destination == q {
				keys = append(keys, b.RoutingKey)
			}
		}
		sort.Strings(keys)
		out.keys = strings.Join(keys, ",")
	}
	return porcupine.Operation{ClientId: 1000, Input: linInput{op: "read"}, Call: call, Output: out, Return: time.Now().UnixNano() + 1}
}
