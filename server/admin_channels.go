package server

import (
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// The administrative API (see admin.go): channel and connection listings,
// message counters and node totals.

// channelStats are a channel's management counters and mirrors of its
// reader-owned mode, updated by the reader with atomics so any goroutine may
// read them. See the hooks in channel.go, publish.go and tx.go.
type channelStats struct {
	publish, returned, dropped           counter
	publishConfirm                       counter // publishes in confirm mode
	deliver, deliverNoAck, get, getNoAck counter
	getEmpty, redeliver, ack             counter

	confirmMode, txMode atomic.Bool
	prefetch            atomic.Uint32 // basic.qos global=false
}

func (st *channelStats) delivered(noAck, redelivered bool) {
	if noAck {
		st.deliverNoAck.inc()
	} else {
		st.deliver.inc()
	}
	if redelivered {
		st.redeliver.inc()
	}
}

func (st *channelStats) got(noAck, redelivered bool) {
	if noAck {
		st.getNoAck.inc()
	} else {
		st.get.inc()
	}
	if redelivered {
		st.redeliver.inc()
	}
}

// unroutable counts a publish that reached no queue: returned when mandatory,
// dropped otherwise.
func (st *channelStats) unroutable(routed, mandatory bool) {
	switch {
	case routed:
	case mandatory:
		st.returned.inc()
	default:
		st.dropped.inc()
	}
}

func (st *channelStats) settled(kind settleKind, n int) {
	if kind == settleAck {
		st.ack.add(n)
	}
}

func (st *channelStats) enterConfirm() { st.confirmMode.Store(true) }

func (st *channelStats) counters() MessageCounters {
	return MessageCounters{
		Publish: st.publish.value(), PublishConfirm: st.publishConfirm.value(),
		ReturnUnroutable: st.returned.value(), DropUnroutable: st.dropped.value(),
		Deliver: st.deliver.value(), DeliverNoAck: st.deliverNoAck.value(),
		Get: st.get.value(), GetNoAck: st.getNoAck.value(), GetEmpty: st.getEmpty.value(),
		Redeliver: st.redeliver.value(), Ack: st.ack.value(),
	}
}

// MessageCounters are cumulative message counts, as RabbitMQ's message_stats.
type MessageCounters struct {
	Publish          uint64 // messages published by clients
	PublishConfirm   uint64 // of those, published on channels in confirm mode
	Confirm          uint64 // publisher confirms (basic.ack) sent
	ReturnUnroutable uint64 // mandatory messages returned as unroutable
	DropUnroutable   uint64 // non-mandatory messages that reached no queue
	Deliver          uint64 // deliveries to consumers that must ack
	DeliverNoAck     uint64 // deliveries to no-ack consumers
	Get              uint64 // basic.get with acknowledgement
	GetNoAck         uint64 // basic.get without acknowledgement
	GetEmpty         uint64 // basic.get on an empty queue
	Redeliver        uint64 // deliveries and gets of redelivered messages
	Ack              uint64 // acknowledgements from clients
}

// Add adds o to m field by field.
func (m *MessageCounters) Add(o MessageCounters) {
	m.Publish += o.Publish
	m.PublishConfirm += o.PublishConfirm
	m.Confirm += o.Confirm
	m.ReturnUnroutable += o.ReturnUnroutable
	m.DropUnroutable += o.DropUnroutable
	m.Deliver += o.Deliver
	m.DeliverNoAck += o.DeliverNoAck
	m.Get += o.Get
	m.GetNoAck += o.GetNoAck
	m.GetEmpty += o.GetEmpty
	m.Redeliver += o.Redeliver
	m.Ack += o.Ack
}

// VhostCounters returns the message counters of every vhost: closed
// channels' totals plus the open channels' counts.
func (s *Server) VhostCounters() map[string]MessageCounters {
	a := &s.admin
	a.chmu.Lock()
	out := make(map[string]MessageCounters, len(a.retired))
	for vh, r := range a.retired {
		out[vh] = *r
	}
	for ch := range a.channels {
		m := out[ch.conn.vhost.name]
		m.Add(ch.counters())
		out[ch.conn.vhost.name] = m
	}
	a.chmu.Unlock()
	return out
}

// ConnDetail is a connection snapshot with its channel count and traffic.
type ConnDetail struct {
	ConnInfo
	RecvCnt     uint64
	SendPending int // bytes waiting in the connection's write buffer
}

// ConnectionDetails returns every connection past its handshake, by id.
func (s *Server) ConnectionDetails() []ConnDetail {
	s.mu.RLock()
	conns := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		if c.isRunning() {
			conns = append(conns, c)
		}
	}
	s.mu.RUnlock()
	perConn := make(map[*conn]int)
	for _, ch := range s.admin.liveChannels() {
		perConn[ch.conn]++
	}
	out := make([]ConnDetail, 0, len(conns))
	for _, c := range conns {
		d := ConnDetail{ConnInfo: c.Info(), RecvCnt: c.stats.recvCnt.value()}
		d.Channels = perConn[c]
		c.out.mu.Lock()
		d.SendPending = len(c.out.buf)
		c.out.mu.Unlock()
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ChannelInfo is a snapshot of an open channel.
type ChannelInfo struct {
	ConnID                 uint64
	ConnName               string
	Number                 uint16
	User, Vhost, Peer      string
	Confirm, Transactional bool
	Prefetch               uint16 // basic.qos global=false
	GlobalPrefetch         uint32 // basic.qos global=true
	Consumers, Unacked     int
	Unconfirmed            uint64
	Stats                  MessageCounters
}

// Channels returns every open channel, by connection id and channel number.
func (s *Server) Channels() []ChannelInfo {
	chs := s.admin.liveChannels()
	out := make([]ChannelInfo, 0, len(chs))
	for _, ch := range chs {
		out = append(out, ch.info())
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ConnID != out[j].ConnID {
			return out[i].ConnID < out[j].ConnID
		}
		return out[i].Number < out[j].Number
	})
	return out
}

func (ch *channel) info() ChannelInfo {
	c := ch.conn
	st := &ch.stats
	info := ChannelInfo{
		ConnID: c.id, ConnName: c.name, Number: ch.id, User: c.user.name, Vhost: c.vhost.name,
		Peer: c.nc.RemoteAddr().String(), Confirm: st.confirmMode.Load(), Transactional: st.txMode.Load(),
		Prefetch: uint16(st.prefetch.Load()), GlobalPrefetch: ch.globalPrefetch.Load(), Stats: st.counters(),
	}
	ch.cmu.Lock()
	info.Consumers = len(ch.consumers)
	ch.cmu.Unlock()
	ch.umu.Lock()
	info.Unacked = ch.unacked.len()
	ch.umu.Unlock()
	info.Stats.Confirm, info.Unconfirmed = ch.confirmState()
	return info
}

// confirmState returns the publisher confirms the channel has sent and the
// publishes still waiting for theirs.
func (ch *channel) confirmState() (acked, pending uint64) {
	t := &ch.confirms
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.acked, uint64(len(t.entries) - t.head)
}

// counters returns the channel's message counters, confirms included.
func (ch *channel) counters() MessageCounters {
	m := ch.stats.counters()
	m.Confirm, _ = ch.confirmState()
	return m
}

// ConsumerInfo is a snapshot of one consumer.
type ConsumerInfo struct {
	Tag                string
	Queue, Vhost       string
	ConnID             uint64
	ConnName           string
	Channel            uint16
	User, Peer         string
	AckRequired        bool
	Exclusive, Active  bool
	Prefetch           uint16
	Priority           int64
	Arguments          amqp.Table
	Timeout            time.Duration // 0 = none
	SingleActiveWaiter bool          // waiting for its turn as single active consumer
}

// Consumers returns the queue's consumers in delivery-priority order.
func (q *Queue) Consumers() []ConsumerInfo { return q.h.consumerInfos() }

// localConsumers lists the consumers of a queue whose consumers are the
// Queue's.
func (q *Queue) localConsumers() []ConsumerInfo {
	q.mu.Lock()
	cs := slices.Clone(q.consumers)
	sac := q.qa.singleActive
	timeout := q.qa.consumerTimeout
	q.mu.Unlock()
	out := make([]ConsumerInfo, len(cs))
	for i, c := range cs {
		o := c.sink.owner()
		if timeout == 0 {
			timeout = o.DefaultTimeout
		}
		out[i] = ConsumerInfo{
			Tag: c.tag, Queue: q.name, Vhost: q.vhost.name, ConnID: o.ConnID, ConnName: o.ConnName,
			Channel: o.Channel, User: o.User, Peer: o.Peer,
			AckRequired: !c.noAck, Exclusive: c.exclusive, Active: !sac || i == 0,
			Prefetch: c.prefetch, Priority: c.priority, Arguments: c.args, Timeout: timeout,
			SingleActiveWaiter: sac && i > 0,
		}
	}
	return out
}

// Consumers returns every consumer of every vhost, sorted by vhost, queue and tag.
func (s *Server) Consumers() []ConsumerInfo {
	var out []ConsumerInfo
	for _, vh := range s.Vhosts() {
		for _, q := range vh.Queues() {
			out = append(out, q.Consumers()...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Vhost != b.Vhost {
			return a.Vhost < b.Vhost
		}
		if a.Queue != b.Queue {
			return a.Queue < b.Queue
		}
		return a.Tag < b.Tag
	})
	return out
}

// CloseConnectionNamed closes the connection with the given name with 320
// CONNECTION_FORCED and reason; a missing connection is ErrNotFound.
func (s *Server) CloseConnectionNamed(name, reason string) error {
	for _, c := range s.Connections() {
		if c.Name == name {
			if s.CloseConnection(c.ID, reason) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: connection %q", ErrNotFound, name)
}

// Totals are the node's object and message totals.
type Totals struct {
	Connections, Channels, Consumers, Exchanges, Queues int
	Messages, Ready, Unacked                            int
}

// Totals counts the node's objects and messages.
func (s *Server) Totals() Totals {
	var t Totals
	t.Connections = len(s.Connections())
	t.Channels = len(s.admin.liveChannels())
	for _, vh := range s.Vhosts() {
		vh.mu.RLock()
		t.Exchanges += len(vh.exchanges)
		t.Queues += len(vh.queues)
		vh.mu.RUnlock()
		for _, q := range vh.Queues() {
			if !q.homedHere() {
				continue // its home counts its messages
			}
			info := q.h.info()
			t.Ready += info.Ready
			t.Unacked += info.Unacked
			t.Consumers += info.Consumers
		}
	}
	t.Messages = t.Ready + t.Unacked
	return t
}
