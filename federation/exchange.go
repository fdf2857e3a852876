package federation

import (
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
)

// xsession is one connected exchange link: the upstream queue it consumes,
// the internal exchange the downstream bindings are copied onto, and what
// it has bound there.
type xsession struct {
	l           *link
	c           *conns
	mv          *mover
	cmdCh       *amqp.Channel // binds and unbinds: its own (channel-use-mode multiple) or upCh (single)
	upX, queue  string        // the upstream exchange and the queue bound to it
	internalX   string        // the upstream exchange the bindings are on, "Q A" or "Q B"
	suffix      string
	upCluster   string // the upstream's cluster_name, "" when it announces none
	upVhost     string
	deliveries  <-chan amqp.Delivery
	upChClosed  chan *amqp.Error
	cmdClosed   chan *amqp.Error
	downChClose chan *amqp.Error
	bound       map[string]Binding // canonical key → binding made on internalX
}

// exchangeSession connects, declares and binds what the plugin does
// (rabbit_federation_exchange_link:go/1) and moves messages until a side
// fails or the link is halted.
func (l *link) exchangeSession() error {
	c, err := l.connect()
	defer c.close()
	if err != nil {
		return err
	}
	t, u := l.spec.target, l.spec.up
	s := &xsession{l: l, c: c, mv: newMover(u), upX: orDefault(u.exchange, t.Name),
		upVhost: uriVhost(c.uri, t.Vhost), bound: make(map[string]Binding)}
	s.upCluster, _ = c.up.Properties["cluster_name"].(string)
	s.queue = upstreamQueueName(s.upX, s.upVhost, t.Name, t.Vhost, l.m.clusterName())
	if s.downChClose, err = s.mv.openDown(c.down, u.prefetch); err != nil {
		return fmt.Errorf("downstream: %w", err)
	}
	if err := s.openUpstream(); err != nil {
		return fmt.Errorf("upstream: %w", err)
	}
	l.running(c.down)
	return s.move()
}

// upstreamQueueName is upstream_queue_name/3: "federation: UX -> CLUSTER",
// with the downstream exchange (and vhost) appended where they differ.
func upstreamQueueName(upX, upVhost, downX, downVhost, cluster string) string {
	down := ""
	switch {
	case downVhost != upVhost:
		down = ":" + downVhost + ":" + downX
	case downX != upX:
		down = ":" + downX
	}
	return "federation: " + upX + " -> " + cluster + down
}

func (s *xsession) openUpstream() error {
	u, up := s.l.spec.up, s.c.up
	ch, err := up.Channel()
	if err != nil {
		return err
	}
	s.mv.upCh = ch
	s.upChClosed = ch.NotifyClose(make(chan *amqp.Error, 1))
	s.cmdCh = ch
	if !u.singleChannel {
		if s.cmdCh, err = up.Channel(); err != nil {
			return err
		}
	}
	s.cmdClosed = s.cmdCh.NotifyClose(make(chan *amqp.Error, 1))
	if err := s.ensureUpstreamExchange(); err != nil {
		return err
	}
	args := amqp.Table{"x-internal-purpose": "federation"}
	if u.expires > 0 {
		args["x-expires"] = u.expires
	}
	if u.messageTTL >= 0 {
		args["x-message-ttl"] = u.messageTTL
	}
	if u.queueType != "" {
		args["x-queue-type"] = u.queueType
	}
	if u.haPolicy != "" {
		args["x-ha-policy"] = u.haPolicy
	}
	if _, err := ch.QueueDeclare(s.queue, true, false, false, false, args); err != nil {
		return err
	}
	if u.ackMode != "no-ack" {
		if err := ch.Qos(u.prefetch, 0, false); err != nil {
			return err
		}
	}
	if s.deliveries, err = ch.Consume(s.queue, "", u.ackMode == "no-ack", false, false, false, nil); err != nil {
		return err
	}
	return s.ensureBindings()
}

// ensureUpstreamExchange declares the upstream exchange, as the downstream
// one is declared, when a passive declare finds none.
func (s *xsession) ensureUpstreamExchange() error {
	err := disposable(s.c.up, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclarePassive(s.upX, "fanout", true, false, false, false, nil)
	})
	if replyCode(err) != amqp.NotFound {
		return err
	}
	t := s.l.spec.target
	return s.cmdCh.ExchangeDeclare(s.upX, t.Type, t.Durable, t.AutoDelete, t.Internal, false, table(t.Args))
}

// ensureBindings is ensure_upstream_bindings/2: a fresh internal exchange
// (the suffix the last run did not use, found by a passive declare, so the
// old bindings keep routing until the new ones are made), the queue bound
// to it, the downstream bindings copied onto it, and the old one deleted.
func (s *xsession) ensureBindings() error {
	old := "B"
	err := disposable(s.c.up, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclarePassive(s.queue+" A", "fanout", true, true, true, false, nil)
	})
	switch replyCode(err) {
	case 0:
		old = "A"
	case amqp.NotFound:
	default:
		return err
	}
	s.suffix = map[string]string{"A": "B", "B": "A"}[old]
	s.internalX = s.queue + " " + s.suffix
	if err := s.declareInternal(); err != nil {
		return err
	}
	if err := s.mv.upCh.QueueBind(s.queue, "", s.internalX, false, nil); err != nil {
		return err
	}
	if err := s.syncBindings(); err != nil {
		return err
	}
	return disposable(s.c.up, func(ch *amqp.Channel) error {
		return ch.ExchangeDelete(s.queue+" "+old, false, false)
	})
}

// declareInternal declares the internal exchange: of type
// x-federation-upstream, which drops at the upstream what would exceed
// max-hops or loop back, or fanout where the upstream has no such type
// (503), the link then dropping those messages itself.
func (s *xsession) declareInternal() error {
	u, t := s.l.spec.up, s.l.spec.target
	if err := disposable(s.c.up, func(ch *amqp.Channel) error { return ch.ExchangeDelete(s.internalX, false, false) }); err != nil {
		return err
	}
	purpose := amqp.Table{"x-internal-purpose": "federation"}
	xfu := amqp.Table{"x-max-hops": int64(u.maxHops), "x-downstream-name": s.l.m.clusterName(),
		"x-downstream-vhost": t.Vhost, "x-internal-purpose": "federation"}
	// On a connection of its own: an unknown exchange type is a
	// connection error (disposable_connection_call).
	conn, err := s.l.dial(s.c.uri, s.upVhost, nil, "Federation link (upstream: "+u.name+", policy: "+t.Name+")")
	if err != nil {
		return err
	}
	err = disposable(conn, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare(s.internalX, "x-federation-upstream", true, true, true, false, xfu)
	})
	_ = conn.Close() // refused or done: nothing more to say on it
	if replyCode(err) == amqp.CommandInvalid {
		return s.cmdCh.ExchangeDeclare(s.internalX, "fanout", true, true, true, false, purpose)
	}
	return err
}

// syncBindings makes the internal exchange's bindings those of the
// downstream exchange, each (key, arguments) once, with the x-bound-from
// header that stops bindings going further than messages can.
func (s *xsession) syncBindings() error {
	t := s.l.spec.target
	want := make(map[string]Binding)
	for _, b := range s.l.m.cfg.Bindings(t.Vhost, t.Name) {
		args, ok := s.boundArgs(table(b.Args))
		if !ok {
			continue
		}
		nb := Binding{Key: b.Key, Args: args}
		want[encode([]any{nb.Key, nb.Args})] = nb
	}
	for k, b := range s.bound {
		if _, ok := want[k]; !ok {
			if err := s.cmdCh.ExchangeUnbind(s.internalX, b.Key, s.upX, s.l.spec.up.bindNowait, table(b.Args)); err != nil {
				return err
			}
			delete(s.bound, k)
		}
	}
	for k, b := range want {
		if _, ok := s.bound[k]; !ok {
			if err := s.cmdCh.ExchangeBind(s.internalX, b.Key, s.upX, s.l.spec.up.bindNowait, table(b.Args)); err != nil {
				return err
			}
			s.bound[k] = b
		}
	}
	return nil
}

// boundFrom is the binding header (rabbit_federation ?BINDING_HEADER).
const boundFrom = "x-bound-from"

// boundArgs is update_binding/2: a binding goes upstream with this hop
// prepended to x-bound-from, its hops counting down from the smallest
// max-hops it crossed; false when it has none left or has come from the
// upstream itself.
func (s *xsession) boundArgs(args amqp.Table) (amqp.Table, bool) {
	u, t := s.l.spec.up, s.l.spec.target
	hops := u.maxHops
	if prev, ok := args[boundFrom].([]any); ok && len(prev) > 0 {
		if alreadySeen(prev, s.upCluster, s.upVhost) {
			return nil, false
		}
		first, _ := prev[0].(amqp.Table)
		hops = min(intOf(first["hops"])-1, u.maxHops)
	}
	if hops <= 0 {
		return nil, false
	}
	entry := amqp.Table{"cluster-name": s.l.m.clusterName(), "vhost": t.Vhost,
		"exchange": t.Vhost + ":" + t.Name + " " + s.suffix, "hops": int16(hops)}
	return prepend(args, boundFrom, entry), true
}

func intOf(v any) int {
	switch n := v.(type) {
	case int16:
		return int(n)
	case int32:
		return int(n)
	case int64:
		return int(n)
	case int:
		return n
	case uint8:
		return int(n)
	case int8:
		return int(n)
	}
	return 0
}

// move forwards deliveries until a side fails or the link is halted.
func (s *xsession) move() error {
	l, mv := s.l, s.mv
	for {
		select {
		case <-l.ctx.Done():
			err := mv.drain(s.c)
			if l.removed.Load() && !l.spec.up.keepUpstream {
				err = errors.Join(err, s.deleteUpstream())
			}
			return err
		case e := <-s.c.upClosed:
			return sideError("upstream", e)
		case e := <-s.c.downClosed:
			return sideError("downstream", e)
		case e := <-s.upChClosed:
			return sideError("upstream channel", e)
		case e := <-s.cmdClosed:
			return sideError("upstream command channel", e)
		case e := <-s.downChClose:
			return sideError("downstream channel", e)
		case <-l.rebind:
			if err := s.syncBindings(); err != nil {
				return fmt.Errorf("propagating bindings: %w", err)
			}
		case c := <-mv.confirms:
			if err := mv.settle(c); err != nil {
				return err
			}
		case dl, ok := <-mv.intake(s.deliveries):
			if !ok {
				return sideError("upstream consumer", nil)
			}
			if err := s.forward(dl); err != nil {
				return err
			}
		}
	}
}

// deleteUpstream deletes what the link declared upstream, the internal
// exchange and then the queue, as rabbit_federation_exchange_link's
// terminate does when the link is removed (its policy or upstream gone, or
// the exchange deleted) and resource-cleanup-mode is not never. Messages
// still in the queue go with it, as they do on RabbitMQ.
func (s *xsession) deleteUpstream() error {
	if err := disposable(s.c.up, func(ch *amqp.Channel) error { return ch.ExchangeDelete(s.internalX, false, false) }); err != nil {
		return fmt.Errorf("deleting upstream exchange %q: %w", s.internalX, err)
	}
	if err := disposable(s.c.up, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(s.queue, false, false, false); return err }); err != nil {
		return fmt.Errorf("deleting upstream queue %q: %w", s.queue, err)
	}
	return nil
}

// forward republishes one message into the downstream exchange with its
// routing key, this hop prepended to x-received-from, unless it has made
// max-hops hops or been here already (the check a fanout upstream
// exchange leaves to the link).
func (s *xsession) forward(dl amqp.Delivery) error {
	t, u := s.l.spec.target, s.l.spec.up
	if !shouldForward(dl.Headers, u.maxHops, s.l.m.clusterName(), t.Vhost) {
		return s.mv.drop(dl)
	}
	hop := amqp.Table{"uri": redactURI(s.c.uri), "exchange": s.upX, "redelivered": dl.Redelivered}
	if s.upCluster != "" {
		hop["cluster-name"] = s.upCluster
	}
	hop["vhost"] = s.upVhost
	return s.mv.forward(dl, t.Name, dl.RoutingKey, prepend(dl.Headers, receivedFrom, hop))
}

func (m *Manager) clusterName() string {
	if m.cfg.ClusterName != nil {
		if n := m.cfg.ClusterName(); n != "" {
			return n
		}
	}
	return m.cfg.Node
}
