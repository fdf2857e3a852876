package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/cluster"
)

// memNet joins in-process servers' remote-queue planes: a call runs the
// other node's handler in the caller's goroutine, as the rpc plane runs it
// on the other node. A node marked down answers nothing, as a dead node.
// A hold on a method parks its calls until released (a slow home).
type memNet struct {
	mu       sync.Mutex
	handlers map[string]map[string]peerHandler
	down     map[string]bool
	hold     map[string]chan struct{}
	cut      map[[2]string]bool // from, to: calls that way fail (a one-way partition)
	// lostAnswers (home, caller): the home runs the caller's calls but its
	// answers never come back (a one-way partition the other way round).
	lostAnswers map[[2]string]bool
	// observe, when set, sees every call's method and payload.
	observe func(method string, payload []byte)
}

func newMemNet() *memNet {
	return &memNet{handlers: make(map[string]map[string]peerHandler), down: make(map[string]bool), hold: make(map[string]chan struct{}),
		cut: make(map[[2]string]bool), lostAnswers: make(map[[2]string]bool)}
}

var errMemNodeDown = errors.New("memnet: node down")

type memPeer struct {
	net  *memNet
	node string
}

func (p memPeer) Handle(method string, h peerHandler) {
	p.net.mu.Lock()
	defer p.net.mu.Unlock()
	if p.net.handlers[p.node] == nil {
		p.net.handlers[p.node] = make(map[string]peerHandler)
	}
	p.net.handlers[p.node][method] = h
}

func (p memPeer) Call(ctx context.Context, node, method string, payload []byte) ([]byte, error) {
	n := p.net
	n.mu.Lock()
	h, down, hold := n.handlers[node][method], n.down[node] || n.down[p.node] || n.cut[[2]string{p.node, node}], n.hold[method]
	observe := n.observe
	n.mu.Unlock()
	if observe != nil {
		observe(method, payload)
	}
	if down || h == nil {
		return nil, fmt.Errorf("%w: %s", errMemNodeDown, node)
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	ans, err := h(ctx, p.node, append([]byte(nil), payload...))
	n.mu.Lock()
	lost := n.lostAnswers[[2]string{node, p.node}]
	n.mu.Unlock()
	if lost {
		return nil, fmt.Errorf("%w: answer from %s lost", errMemNodeDown, node)
	}
	return ans, err
}

func (n *memNet) setDown(node string, down bool) {
	n.mu.Lock()
	n.down[node] = down
	n.mu.Unlock()
}

// holdMethod parks calls of method until the returned release is called.
func (n *memNet) holdMethod(method string) (release func()) {
	ch := make(chan struct{})
	n.mu.Lock()
	n.hold[method] = ch
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		delete(n.hold, method)
		n.mu.Unlock()
		close(ch)
	}
}

// startNodes starts one server per name, joined by net.
func startNodes(t testing.TB, net *memNet, names ...string) []*testServer {
	t.Helper()
	out := make([]*testServer, len(names))
	for i, name := range names {
		ts := startServer(t, func(c *Config) { c.NodeName = name })
		ts.enableRemoteQueues(name, memPeer{net, name}, memPeer{net, name})
		out[i] = ts
	}
	return out
}

// declareHomed declares a durable queue on its home over AMQP and applies
// its definition on every other node as the meta Raft log would carry it
// (DeclareQueue with the home's node name), which gives them its proxy.
func declareHomed(t testing.TB, home *testServer, others []*testServer, name string, args ...amqp.Table) {
	t.Helper()
	var declared amqp.Table
	if len(args) > 0 {
		declared = args[0]
	}
	_, ch := home.channel(t)
	if _, err := ch.QueueDeclare(name, true, false, false, false, amqp091.Table(declared)); err != nil {
		t.Fatal(err)
	}
	for _, ts := range others {
		cmd, err := EncodeCommand(DeclareQueue{Vhost: "/", Name: name, Durable: true, Arguments: tableBytes(declared), Node: home.cfg.NodeName})
		must(t, err)
		res, err := ts.ApplyCommitted(ts.AppliedIndex()+1, [][]byte{cmd})
		must(t, err)
		if res[0] != nil {
			t.Fatalf("applying the definition on %s: %v", ts.cfg.NodeName, res[0])
		}
		if _, ok := ts.Vhost("/").queue(name).h.(*remoteQueue); !ok {
			t.Fatalf("%s serves %q with %T, not a proxy", ts.cfg.NodeName, name, ts.Vhost("/").queue(name).h)
		}
	}
}

// homeCounts are the home queue's ready messages and consumers.
func homeCounts(ts *testServer, name string) (int, int) {
	q := ts.Vhost("/").queue(name)
	if q == nil {
		return -1, -1
	}
	return q.h.counts()
}

// TestRemotePublishOnBConsumeOnC publishes with confirms on B to a queue
// homed on A and consumes on C with acks and a prefetch: every message
// arrives once, in order, and the consumer never holds more than its
// prefetch unacked.
func TestRemotePublishOnBConsumeOnC(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b", "warren@c")
	a, b, c := nodes[0], nodes[1], nodes[2]
	declareHomed(t, a, []*testServer{b, c}, "q")

	const n, prefetch = 3000, 10
	_, pub := b.channel(t)
	must(t, pub.Confirm(false))
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, n))
	for i := range n {
		must(t, pub.Publish("", "q", false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte(fmt.Sprint(i))}))
	}
	for range n {
		if conf := nextConfirm(t, confirms); !conf.Ack {
			t.Fatalf("publish %d nacked", conf.DeliveryTag)
		}
	}
	if ready, _ := homeCounts(a, "q"); ready != n {
		t.Fatalf("home holds %d messages after %d confirms", ready, n)
	}

	_, sub := c.channel(t)
	must(t, sub.Qos(prefetch, 0, false))
	ds, err := sub.Consume("q", "", false, false, false, false, nil)
	must(t, err)
	var held []amqp091.Delivery
	for i := range n {
		d := recv(t, ds)
		if string(d.Body) != fmt.Sprint(i) || d.Redelivered {
			t.Fatalf("delivery %d: body %q redelivered %v", i, d.Body, d.Redelivered)
		}
		held = append(held, d)
		if len(held) > prefetch {
			t.Fatalf("%d deliveries unacked with prefetch %d", len(held), prefetch)
		}
		if len(held) == prefetch {
			// Nothing more arrives until an ack returns credit.
			select {
			case d := <-ds:
				t.Fatalf("delivery %q beyond the prefetch", d.Body)
			case <-time.After(20 * time.Millisecond):
			}
			must(t, held[len(held)-1].Ack(true))
			held = held[:0]
		}
	}
	waitFor(t, 5*time.Second, "the home's queue to be empty and settled", func() bool {
		q := a.Vhost("/").queue("q")
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.ready.len() == 0 && q.pending.len() == 0
	})
}

// TestRemoteConfirmWaitsForHome holds the home's answer to a forwarded
// publish: the client's confirm waits for it.
func TestRemoteConfirmWaitsForHome(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b")
	a, b := nodes[0], nodes[1]
	declareHomed(t, a, nodes[1:], "q")
	_, pub := b.channel(t)
	must(t, pub.Confirm(false))
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, 1))
	release := net.holdMethod(rpcPublish)
	must(t, pub.Publish("", "q", false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte("x")}))
	select {
	case conf := <-confirms:
		t.Fatalf("confirm %+v before the home answered", conf)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if conf := nextConfirm(t, confirms); !conf.Ack {
		t.Fatal("nacked")
	}
	if ready, _ := homeCounts(a, "q"); ready != 1 {
		t.Fatalf("home holds %d messages", ready)
	}
}

// TestRemoteConfirmTimeout: a home that does not answer a forwarded
// publish within the confirm timeout gets it nacked to the client.
func TestRemoteConfirmTimeout(t *testing.T) {
	saved := remoteConfirmTimeout
	remoteConfirmTimeout = 200 * time.Millisecond
	t.Cleanup(func() { remoteConfirmTimeout = saved })
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b")
	declareHomed(t, nodes[0], nodes[1:], "q")
	_, pub := nodes[1].channel(t)
	must(t, pub.Confirm(false))
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, 1))
	release := net.holdMethod(rpcPublish)
	defer release()
	publish(t, pub, "", "q", "x")
	if conf := nextConfirm(t, confirms); conf.Ack {
		t.Fatal("acked although the home never answered")
	}
}

// TestRemoteRequeueAndConnectionClose: a nack with requeue on C redelivers
// from A with redelivered set; closing C's connection with unacked messages
// returns them to A.
func TestRemoteRequeueAndConnectionClose(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@c")
	a, c := nodes[0], nodes[1]
	declareHomed(t, a, nodes[1:], "q")
	_, pub := a.channel(t)
	for i := range 3 {
		publish(t, pub, "", "q", fmt.Sprint(i))
	}
	conn, sub := c.channel(t)
	ds, err := sub.Consume("q", "", false, false, false, false, nil)
	must(t, err)
	d := recv(t, ds)
	must(t, d.Nack(false, true))
	var again amqp091.Delivery
	for again.Body == nil || string(again.Body) != string(d.Body) {
		again = recv(t, ds)
	}
	if !again.Redelivered {
		t.Fatal("requeued message not marked redelivered")
	}
	waitFor(t, 5*time.Second, "all three held on A", func() bool {
		q := a.Vhost("/").queue("q")
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.pending.len() == 3
	})
	must(t, conn.Close())
	waitFor(t, 5*time.Second, "the unacked messages back on A", func() bool {
		ready, consumers := homeCounts(a, "q")
		return ready == 3 && consumers == 0
	})
	_, get := a.channel(t)
	m, ok, err := get.Get("q", true)
	must(t, err)
	if !ok || !m.Redelivered {
		t.Fatalf("after the connection closed: got %v redelivered %v", ok, m.Redelivered)
	}
}

// TestRemoteGetPurgeDelete uses basic.get, queue.purge, passive declare and
// queue.delete (if-empty refused, then done) on a queue homed on another
// node, with RabbitMQ's answers.
func TestRemoteGetPurgeDelete(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b")
	a, b := nodes[0], nodes[1]
	declareHomed(t, a, nodes[1:], "q")
	_, pub := a.channel(t)
	for i := range 5 {
		publish(t, pub, "", "q", fmt.Sprint(i))
	}
	// The publishes on a are not confirmed: wait until its queue has all five.
	waitFor(t, 5*time.Second, "5 messages on the home", func() bool { return readyOf(a.Vhost("/").queue("q")) == 5 })
	_, ch := b.channel(t)
	m, ok, err := ch.Get("q", false)
	must(t, err)
	if !ok || string(m.Body) != "0" || m.MessageCount != 4 {
		t.Fatalf("get: ok %v body %q remaining %d", ok, m.Body, m.MessageCount)
	}
	must(t, m.Ack(false))
	q, err := ch.QueueDeclarePassive("q", true, false, false, false, nil)
	must(t, err)
	if q.Messages != 4 {
		t.Fatalf("passive declare counts %d messages", q.Messages)
	}
	waitFor(t, 5*time.Second, "the ack to reach A", func() bool {
		hq := a.Vhost("/").queue("q")
		hq.mu.Lock()
		defer hq.mu.Unlock()
		return hq.pending.len() == 0
	})
	n, err := ch.QueuePurge("q", false)
	must(t, err)
	if n != 4 {
		t.Fatalf("purge dropped %d", n)
	}
	publish(t, pub, "", "q", "late")
	if _, err := pub.QueueDeclarePassive("q", true, false, false, false, nil); err != nil {
		t.Fatal(err) // a round trip on A's channel: the publish is enqueued
	}
	_, err = ch.QueueDelete("q", false, true, false)
	expectCode(t, err, 406)
	if want := "PRECONDITION_FAILED - queue 'q' in vhost '/' not empty"; err.(*amqp091.Error).Reason != want {
		t.Fatalf("reason %q, want %q", err.(*amqp091.Error).Reason, want)
	}
	_, ch = b.channel(t)
	n, err = ch.QueueDelete("q", false, false, false)
	must(t, err)
	if n != 1 || a.Vhost("/").queue("q") != nil || b.Vhost("/").queue("q") != nil {
		t.Fatalf("delete answered %d; on A %v, on B %v", n, a.Vhost("/").queue("q"), b.Vhost("/").queue("q"))
	}
}

// TestRemoteConsumerCancelledOnDelete: deleting the queue on its home
// sends a consumer on another node basic.cancel.
func TestRemoteConsumerCancelledOnDelete(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@c")
	a, c := nodes[0], nodes[1]
	declareHomed(t, a, nodes[1:], "q")
	_, sub := c.channel(t)
	cancels := sub.NotifyCancel(make(chan string, 1))
	_, err := sub.Consume("q", "ctag", false, false, false, false, nil)
	must(t, err)
	_, ach := a.channel(t)
	_, err = ach.QueueDelete("q", false, false, false)
	must(t, err)
	select {
	case tag := <-cancels:
		if tag != "ctag" {
			t.Fatalf("cancelled %q", tag)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no basic.cancel on the consumer's node")
	}
}

// TestRemoteHomeDown: while the home node does not answer, passive declare,
// basic.get and basic.consume fail with RabbitMQ's 404 and a publish with
// confirms is nacked; once it answers again they work.
func TestRemoteHomeDown(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b")
	a, b := nodes[0], nodes[1]
	declareHomed(t, a, nodes[1:], "q")
	net.setDown("warren@a", true)
	want := "NOT_FOUND - home node 'warren@a' of durable queue 'q' in vhost '/' is down or inaccessible"
	for _, op := range []struct {
		name string
		run  func(*amqp091.Channel) error
	}{
		{"passive declare", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive("q", true, false, false, false, nil)
			return err
		}},
		{"get", func(ch *amqp091.Channel) error { _, _, err := ch.Get("q", true); return err }},
		{"consume", func(ch *amqp091.Channel) error {
			_, err := ch.Consume("q", "", true, false, false, false, nil)
			return err
		}},
	} {
		_, ch := b.channel(t)
		err := op.run(ch)
		var e *amqp091.Error
		if !errors.As(err, &e) || e.Code != 404 || e.Reason != want {
			t.Fatalf("%s: %v, want %q", op.name, err, want)
		}
	}
	_, pub := b.channel(t)
	must(t, pub.Confirm(false))
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, 2))
	publish(t, pub, "", "q", "lost")
	if conf := nextConfirm(t, confirms); conf.Ack {
		t.Fatal("a publish to a queue whose home is down was acked")
	}
	net.setDown("warren@a", false)
	publish(t, pub, "", "q", "kept")
	if conf := nextConfirm(t, confirms); !conf.Ack {
		t.Fatal("nacked after the home returned")
	}
	_, ch := b.channel(t)
	m, ok, err := ch.Get("q", true)
	must(t, err)
	if !ok || string(m.Body) != "kept" {
		t.Fatalf("after the home returned: %v %q", ok, m.Body)
	}
}

// TestRemoteConsumerPriorityAndSingleActive: the home decides between
// consumers on other nodes by x-priority, and with single active consumer
// only the first consumer gets messages until it cancels.
func TestRemoteConsumerPriorityAndSingleActive(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b", "warren@c")
	a, b, c := nodes[0], nodes[1], nodes[2]
	declareHomed(t, a, nodes[1:], "prio")
	declareHomed(t, a, nodes[1:], "sac", amqp.Table{"x-single-active-consumer": true})
	_, pub := a.channel(t)

	_, low := c.channel(t)
	lowDs, err := low.Consume("prio", "low", true, false, false, false, amqp091.Table{"x-priority": int32(0)})
	must(t, err)
	_, high := b.channel(t)
	highDs, err := high.Consume("prio", "high", true, false, false, false, amqp091.Table{"x-priority": int32(5)})
	must(t, err)
	waitFor(t, 5*time.Second, "both consumers on the home", func() bool { _, n := homeCounts(a, "prio"); return n == 2 })
	for i := range 20 {
		publish(t, pub, "", "prio", fmt.Sprint(i))
	}
	for range 20 {
		recv(t, highDs)
	}
	expectNone(t, lowDs, low, pub)

	_, first := b.channel(t)
	firstDs, err := first.Consume("sac", "first", false, false, false, false, nil)
	must(t, err)
	_, second := c.channel(t)
	secondDs, err := second.Consume("sac", "second", false, false, false, false, nil)
	must(t, err)
	waitFor(t, 5*time.Second, "both consumers on the home", func() bool { _, n := homeCounts(a, "sac"); return n == 2 })
	publish(t, pub, "", "sac", "one")
	must(t, recv(t, firstDs).Ack(false))
	expectNone(t, secondDs, second, pub)
	must(t, first.Cancel("first", false))
	publish(t, pub, "", "sac", "two")
	if d := recv(t, secondDs); string(d.Body) != "two" {
		t.Fatalf("second consumer got %q", d.Body)
	}
}

// TestRemoteFanOutCrossesOnce: a message routed on B to two queues homed on
// A travels as one forwarded entry naming both, and is confirmed once both
// have it.
func TestRemoteFanOutCrossesOnce(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b")
	a, b := nodes[0], nodes[1]
	declareHomed(t, a, nodes[1:], "q1")
	declareHomed(t, a, nodes[1:], "q2")
	_, ch := b.channel(t)
	must(t, ch.ExchangeDeclare("fx", "fanout", false, false, false, false, nil))
	must(t, ch.QueueBind("q1", "", "fx", false, nil))
	must(t, ch.QueueBind("q2", "", "fx", false, nil))
	var mu sync.Mutex
	var entries []int
	net.mu.Lock()
	net.observe = func(method string, payload []byte) {
		if method != rpcPublish {
			return
		}
		rd := wireReader{b: payload}
		rd.string()
		rd.uint()
		for range rd.count() {
			rd.string()
			mu.Lock()
			entries = append(entries, rd.count())
			mu.Unlock()
			break // the test publishes one message
		}
	}
	net.mu.Unlock()
	must(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	publish(t, ch, "fx", "", "both")
	if conf := nextConfirm(t, confirms); !conf.Ack {
		t.Fatal("nacked")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(entries) != 1 || entries[0] != 2 {
		t.Fatalf("forwarded entries naming %v queues, want one naming 2", entries)
	}
	for _, name := range []string{"q1", "q2"} {
		if ready, _ := homeCounts(a, name); ready != 1 {
			t.Fatalf("%s holds %d", name, ready)
		}
	}
}

// BenchmarkRemotePublishConsume compares a queue on the client's node
// (local) with one homed on another in-process node (forwarded): a
// confirm-mode publisher with up to 256 publishes outstanding and an autoack
// consumer, both over TCP on node B. cpu-ns/op is the process's CPU time
// (user+system, both nodes and the clients) per message.
func BenchmarkRemotePublishConsume(b *testing.B) {
	for _, forwarded := range []bool{false, true} {
		name := "local"
		if forwarded {
			name = "forwarded"
		}
		b.Run(name, func(b *testing.B) {
			net := newMemNet()
			nodes := startNodes(b, net, "warren@a", "warren@b")
			home, ingress := nodes[1], nodes[1]
			if forwarded {
				home = nodes[0]
			}
			if forwarded {
				declareHomed(b, home, nodes[1:], "bench")
			} else {
				declareHomed(b, home, nil, "bench")
			}
			benchPublishConsume(b, ingress)
		})
	}
}

func benchPublishConsume(b *testing.B, ts *testServer) {
	_, pub := ts.channel(b)
	_, sub := ts.channel(b)
	must(b, pub.Confirm(false))
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, 512))
	d, err := sub.Consume("bench", "", true, false, false, false, nil)
	must(b, err)
	body := make([]byte, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range b.N {
			if _, ok := <-d; !ok {
				return
			}
		}
	}()
	const window = 256
	b.ReportAllocs()
	b.SetBytes(16)
	cpu0 := processCPU(b)
	b.ResetTimer()
	outstanding := 0
	for range b.N {
		if outstanding == window {
			if !(<-confirms).Ack {
				b.Fatal("nack")
			}
			outstanding--
		}
		must(b, pub.Publish("", "bench", false, false, amqp091.Publishing{Body: body}))
		outstanding++
	}
	for ; outstanding > 0; outstanding-- {
		if !(<-confirms).Ack {
			b.Fatal("nack")
		}
	}
	<-done
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestRemoteOverClusterRPC runs the forwarded publish, consume and ack
// through the cluster package's authenticated rpc plane between two
// in-process cluster nodes.
func TestRemoteOverClusterRPC(t *testing.T) {
	names := []string{"warren@a", "warren@b"}
	var nodes []*cluster.Node
	var seeds []string
	for _, name := range names {
		cfg := cluster.DefaultConfig()
		cfg.NodeName, cfg.DataDir, cfg.BindAddr = name, t.TempDir(), "127.0.0.1:0"
		cfg.Secret, cfg.ClusterName, cfg.BootstrapExpect = "a test secret of more than sixteen characters", "remote-test", 2
		cfg.Seeds = seeds
		g := memberlist.DefaultLocalConfig()
		g.ProbeInterval, g.GossipInterval, g.PushPullInterval = 200*time.Millisecond, 50*time.Millisecond, time.Second
		cfg.Gossip = g
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		n, err := cluster.New(cfg, &appliedFSM{})
		must(t, err)
		t.Cleanup(func() { n.Shutdown() })
		nodes = append(nodes, n)
		seeds = append(seeds, n.Addr())
	}
	waitFor(t, 10*time.Second, "both nodes alive in gossip", func() bool {
		alive := 0
		for _, m := range nodes[0].Members() {
			if m.State == cluster.StateAlive {
				alive++
			}
		}
		return alive == 2
	})
	servers := make([]*testServer, 2)
	for i, name := range names {
		servers[i] = startServer(t, func(c *Config) { c.NodeName = name })
		servers[i].ServeRemoteQueues(nodes[i])
	}
	a, b := servers[0], servers[1]
	declareHomed(t, a, servers[1:], "q")
	_, pub := b.channel(t)
	must(t, pub.Confirm(false))
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, 100))
	for i := range 100 {
		publish(t, pub, "", "q", fmt.Sprint(i))
	}
	for range 100 {
		if !nextConfirm(t, confirms).Ack {
			t.Fatal("nacked")
		}
	}
	_, sub := b.channel(t)
	must(t, sub.Qos(7, 0, false))
	ds, err := sub.Consume("q", "", false, false, false, false, nil)
	must(t, err)
	for i := range 100 {
		d := recv(t, ds)
		if string(d.Body) != fmt.Sprint(i) {
			t.Fatalf("delivery %d is %q", i, d.Body)
		}
		must(t, d.Ack(false))
	}
	waitFor(t, 5*time.Second, "the acks on the home", func() bool {
		q := a.Vhost("/").queue("q")
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.ready.len() == 0 && q.pending.len() == 0
	})
}

// appliedFSM is the meta log's state machine for a test of the rpc plane
// alone: it keeps the applied index and no definitions.
type appliedFSM struct {
	mu    sync.Mutex
	index uint64
}

func (f *appliedFSM) ApplyBatch(es []cluster.Entry) []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(es) > 0 {
		f.index = es[len(es)-1].Index
	}
	return make([]error, len(es))
}

func (f *appliedFSM) AppliedIndex() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.index
}

func (*appliedFSM) Snapshot(w io.Writer) error { return nil }

func (*appliedFSM) Restore(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err }

// TestRemoteNodeDown: when the home is reported down, its queue's consumers
// on another node get basic.cancel; when a consuming node is reported down,
// the home cancels its consumers and requeues what they and its basic.get
// clients held unacked, redelivered.
func TestRemoteNodeDown(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b")
	a, b := nodes[0], nodes[1]
	declareHomed(t, a, nodes[1:], "q")
	_, pub := a.channel(t)
	publish(t, pub, "", "q", "one")
	publish(t, pub, "", "q", "two")
	_, sub := b.channel(t)
	cancels := sub.NotifyCancel(make(chan string, 1))
	must(t, sub.Qos(2, 0, false)) // the third message stays for basic.get
	ds, err := sub.Consume("q", "ctag", false, false, false, false, nil)
	must(t, err)
	recv(t, ds)
	recv(t, ds)
	publish(t, pub, "", "q", "three")
	_, getter := b.channel(t)
	if _, ok, err := getter.Get("q", false); err != nil || !ok {
		t.Fatalf("get on B: ok %v err %v", ok, err)
	}

	net.setDown("warren@b", true)
	a.NodeDown("warren@b")
	if ready, consumers := homeCounts(a, "q"); ready != 3 || consumers != 0 {
		t.Fatalf("home after losing the consumers' node: %d ready, %d consumers", ready, consumers)
	}
	m, ok, err := pub.Get("q", true)
	must(t, err)
	if !ok || !m.Redelivered {
		t.Fatalf("requeued message: ok %v redelivered %v", ok, m.Redelivered)
	}

	net.setDown("warren@b", false)
	net.setDown("warren@a", true)
	b.NodeDown("warren@a")
	select {
	case tag := <-cancels:
		if tag != "ctag" {
			t.Fatalf("cancelled %q", tag)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no basic.cancel after the home node went down")
	}
}

// TestRemotePublishThenGet: a basic.get after a publish without confirms on
// the same node sees the message, as on a local queue: synchronous
// operations wait for the home's answer to the publishes before them.
func TestRemotePublishThenGet(t *testing.T) {
	net := newMemNet()
	nodes := startNodes(t, net, "warren@a", "warren@b")
	declareHomed(t, nodes[0], nodes[1:], "q")
	_, ch := nodes[1].channel(t)
	release := net.holdMethod(rpcPublish)
	publish(t, ch, "", "q", "first")
	got := make(chan string, 1)
	go func() {
		m, ok, err := ch.Get("q", true)
		if err != nil || !ok {
			got <- fmt.Sprintf("ok %v err %v", ok, err)
			return
		}
		got <- string(m.Body)
	}()
	time.AfterFunc(50*time.Millisecond, release) // the publish is still with the network when get is sent
	select {
	case body := <-got:
		if body != "first" {
			t.Fatalf("get after publish: %s", body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("get did not answer")
	}
}
