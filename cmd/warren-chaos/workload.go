package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// workQueue is the queue every independent node holds, each its own
// durable queue of that name; a cluster has one per node (workQueues).
const workQueue = "chaos.q"

// Client timeouts: a paused or cut-off node must turn into an unknown
// outcome and a reconnect, not a hang.
const (
	confirmTimeout = 5 * time.Second
	heartbeat      = 2 * time.Second
	handshakeLimit = 5 * time.Second
	reconnectPause = 200 * time.Millisecond
)

// workload runs the clients against the nodes until its context ends.
type workload struct {
	cfg    config
	nodes  []*node
	queues []string // the work queues (workQueues)
	h      *history
	wg     sync.WaitGroup
}

// dial connects to node n with heartbeats and a bounded handshake, only
// ever to an address inside the harness's subnet.
func dial(n *node) (*amqp.Connection, error) {
	return amqp.DialConfig("amqp://guest:guest@"+n.amqpAddr()+"/", amqp.Config{
		Heartbeat: heartbeat,
		Dial: func(network, addr string) (net.Conn, error) {
			c, err := dialChecked(context.Background(), network, addr)
			if err != nil {
				return nil, err
			}
			// amqp091 clears the deadline once the connection is open.
			return c, c.SetDeadline(time.Now().Add(handshakeLimit))
		},
	})
}

func (w *workload) start(ctx context.Context) {
	spawn := func(name string, seed uint64, f func(context.Context, string, *rand.Rand)) {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			f(ctx, name, rand.New(rand.NewPCG(w.cfg.Seed, seed)))
		}()
	}
	for i := 0; i < w.cfg.Publishers; i++ {
		spawn(fmt.Sprintf("pub-%d", i), uint64(100+i), w.publisher)
	}
	for i := 0; i < w.cfg.Consumers; i++ {
		spawn(fmt.Sprintf("cons-%d", i), uint64(200+i), w.consumer)
	}
	spawn("get-0", 300, w.getter)
	spawn("tx-0", 400, w.txConsumer)
	for i := 0; i < w.cfg.DefClients; i++ {
		spawn(fmt.Sprintf("def-%d", i), uint64(500+i), w.definitions)
	}
}

// session runs one connection's work against a random node again and
// again until ctx ends or the operation budget is spent.
func (w *workload) session(ctx context.Context, rnd *rand.Rand, f func(ctx context.Context, n *node, c *amqp.Connection) error) {
	for ctx.Err() == nil && w.h.ops.Load() < w.h.maxOps {
		n := w.nodes[rnd.IntN(len(w.nodes))]
		c, err := dial(n)
		if err == nil {
			stop := context.AfterFunc(ctx, func() { c.Close() })
			err = f(ctx, n, c)
			stop()
			c.Close()
		}
		if errors.Is(err, errBudget) {
			return
		}
		sleepCtx(ctx, reconnectPause)
	}
}

var errBudget = errors.New("operation budget spent")

// publisher publishes persistent messages with unique message ids in
// windows of 10 and waits for their confirms; a confirm that does not come
// (closed connection, timeout) leaves the publish unknown.
func (w *workload) publisher(ctx context.Context, proc string, rnd *rand.Rand) {
	seq := 0
	var pace time.Duration // between windows of 10
	if w.cfg.PubRate > 0 {
		pace = 10 * time.Second / time.Duration(w.cfg.PubRate)
	}
	next := time.Now()
	w.session(ctx, rnd, func(ctx context.Context, n *node, c *amqp.Connection) error {
		ch, err := c.Channel()
		if err != nil {
			return err
		}
		if err := ch.Confirm(false); err != nil {
			return err
		}
		confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 64))
		returns := ch.NotifyReturn(make(chan amqp.Return, 64))
		for ctx.Err() == nil {
			q := w.queues[rnd.IntN(len(w.queues))]
			if err := w.publishWindow(proc, &seq, n, q, ch, confirms, returns); err != nil {
				return err
			}
			if next = next.Add(pace); time.Until(next) > 0 {
				sleepCtx(ctx, time.Until(next))
			} else {
				next = time.Now() // behind (a fault): no burst to catch up
			}
		}
		return nil
	})
}

type pending struct {
	op int64
	id string
}

func (w *workload) publishWindow(proc string, seq *int, n *node, q string, ch *amqp.Channel, confirms <-chan amqp.Confirmation, returns <-chan amqp.Return) error {
	inflight := map[uint64]pending{}
	defer func() { // whatever is left has no known outcome
		for _, p := range inflight {
			w.h.complete(p.op, evUnknown, Event{Proc: proc, F: "publish", ID: p.id, Node: n.name})
		}
	}()
	for k := 0; k < 10; k++ {
		*seq++
		id := fmt.Sprintf("%s-%d", proc, *seq)
		op := w.h.invoke(Event{Proc: proc, F: "publish", ID: id, Node: n.name, Q: q})
		if op == 0 {
			return errBudget
		}
		tag := ch.GetNextPublishSeqNo()
		inflight[tag] = pending{op, id}
		err := ch.Publish("", q, true, false, amqp.Publishing{
			MessageId: id, DeliveryMode: amqp.Persistent, Body: []byte(id),
		})
		if err != nil {
			return err
		}
	}
	return w.awaitConfirms(proc, n, inflight, confirms, returns)
}

func (w *workload) awaitConfirms(proc string, n *node, inflight map[uint64]pending, confirms <-chan amqp.Confirmation, returns <-chan amqp.Return) error {
	timeout := time.NewTimer(confirmTimeout)
	defer timeout.Stop()
	returned := map[string]bool{}
	for len(inflight) > 0 {
		select {
		case conf, ok := <-confirms:
			if !ok {
				return errors.New("channel closed awaiting confirms")
			}
			drainReturns(returns, returned)
			p, known := inflight[conf.DeliveryTag]
			if !known {
				return fmt.Errorf("confirm of unknown delivery tag %d", conf.DeliveryTag)
			}
			delete(inflight, conf.DeliveryTag)
			switch {
			case !conf.Ack:
				w.h.complete(p.op, evFail, Event{Proc: proc, F: "publish", ID: p.id, Node: n.name, Err: "nack"})
			case returned[p.id]:
				w.h.complete(p.op, evFail, Event{Proc: proc, F: "publish", ID: p.id, Node: n.name, Err: "returned unroutable"})
			default:
				w.h.complete(p.op, evOK, Event{Proc: proc, F: "publish", ID: p.id, Node: n.name})
			}
		case <-timeout.C:
			return fmt.Errorf("no confirm within %v", confirmTimeout)
		}
	}
	return nil
}

// drainReturns takes the basic.returns already received: a return precedes
// the ack of the same message. A closed channel has none left.
func drainReturns(returns <-chan amqp.Return, returned map[string]bool) {
	for {
		select {
		case r, ok := <-returns:
			if !ok {
				return
			}
			returned[r.MessageId] = true
		default:
			return
		}
	}
}

// recordDelivery logs a delivery as an observation.
func (w *workload) recordDelivery(proc, f string, n *node, d amqp.Delivery) {
	w.h.record(Event{Proc: proc, Type: evOK, F: f, Node: n.name, ID: d.MessageId, Redelivered: d.Redelivered})
}

// sessionLife ends a consumer's session after a while, so a queue whose
// home was down when it subscribed gets a consumer again once it is back.
const sessionLife = 15 * time.Second

// consumer consumes with manual acks and prefetch 50, acking each delivery.
func (w *workload) consumer(ctx context.Context, proc string, rnd *rand.Rand) {
	w.session(ctx, rnd, func(ctx context.Context, n *node, c *amqp.Connection) error {
		ds, err := consume(c, proc, w.queues)
		if err != nil {
			return err
		}
		end := time.After(sessionLife)
		for {
			d, ok, done := ds.next(end)
			switch {
			case done:
				return nil
			case !ok:
				return errors.New("deliveries closed")
			}
			w.recordDelivery(proc, "deliver", n, d)
			w.h.record(Event{Proc: proc, Type: evInfo, F: "ack", Node: n.name, ID: d.MessageId})
			if err := d.Ack(false); err != nil {
				return err
			}
		}
	})
}

// consume opens one channel with prefetch 50 and a manual-ack consumer on
// each queue that can be reached.
func consume(c *amqp.Connection, tag string, queues []string) (*deliveries, error) {
	ch, err := c.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Qos(50, 0, false); err != nil {
		return nil, err
	}
	return consumeOn(c, ch, tag, queues)
}

// consumeOn consumes the queues on ch, leaving out those whose home node
// is down (a cluster's 404, which would close ch), as found by a passive
// declare on a probe channel: a client consuming a work queue that is
// unreachable consumes the others meanwhile.
func consumeOn(c *amqp.Connection, ch *amqp.Channel, tag string, queues []string) (*deliveries, error) {
	var srcs []<-chan amqp.Delivery
	for i, q := range queues {
		if len(queues) > 1 {
			probe, err := c.Channel()
			if err != nil {
				return nil, err
			}
			_, err = probe.QueueDeclarePassive(q, true, false, false, false, nil)
			if isHomeDown(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			probe.Close()
		}
		src, err := ch.Consume(q, fmt.Sprintf("%s.%d", tag, i), false, false, false, false, nil)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, src)
	}
	if len(srcs) == 0 {
		return nil, errors.New("no work queue reachable")
	}
	return newDeliveries(srcs), nil
}

// getter polls with basic.get and acks what it gets.
func (w *workload) getter(ctx context.Context, proc string, rnd *rand.Rand) {
	w.session(ctx, rnd, func(ctx context.Context, n *node, c *amqp.Connection) error {
		ch, err := c.Channel()
		if err != nil {
			return err
		}
		for i := 0; ctx.Err() == nil; i++ {
			d, ok, err := ch.Get(w.queues[i%len(w.queues)], false)
			if err != nil {
				return err
			}
			if !ok {
				sleepCtx(ctx, 50*time.Millisecond) // an empty queue: poll again shortly
				continue
			}
			w.recordDelivery(proc, "get", n, d)
			w.h.record(Event{Proc: proc, Type: evInfo, F: "ack", Node: n.name, ID: d.MessageId})
			if err := d.Ack(false); err != nil {
				return err
			}
		}
		return nil
	})
}
