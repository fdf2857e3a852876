package server

import (
	"encoding/binary"
	"net"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// Resource limits (Config.Max*). Each check is O(1) on its path and takes at
// most a leaf lock (limitsMu), so limits cost nothing to connections that do
// not hit them.

// refusedLogEvery spaces the log lines about refused sockets and accept
// errors, so a flood is logged about once a second, not per socket.
const refusedLogEvery = time.Second

// logLimiter lets one log line through per refusedLogEvery.
type logLimiter struct{ last atomic.Int64 } // unix nanos of the last line

func (l *logLimiter) allow() bool {
	now := time.Now().UnixNano()
	last := l.last.Load()
	return now-last >= int64(refusedLogEvery) && l.last.CompareAndSwap(last, now)
}

// Why a socket was refused right after accept.
const (
	refusedConnectionLimit = iota // MaxConnections
	refusedSocketShare            // the descriptor budget (fdlimit.go)
)

// admitSocket counts an accepted AMQP socket against the descriptor budget
// and MaxConnections and reports whether it may be served, and if not why.
// Every admitted socket must be released with releaseSocket.
func (s *Server) admitSocket() (ok bool, refused int) {
	if !s.fds.take() {
		return false, refusedSocketShare
	}
	n := s.sockets.Add(1)
	if max := s.cfg.MaxConnections; max > 0 && n > int64(max) {
		s.sockets.Add(-1)
		s.fds.release()
		return false, refusedConnectionLimit
	}
	return true, 0
}

// releaseSocket undoes admitSocket when the connection's reader finishes.
func (s *Server) releaseSocket() {
	s.sockets.Add(-1)
	s.fds.release()
}

// refuseSocket closes a socket accepted beyond a limit at once: no
// goroutine, no handshake, so existing connections are not slowed.
func (s *Server) refuseSocket(nc net.Conn, why int) {
	// Counted before the close, so a client that has seen its socket closed
	// always finds it in RefusedConnections.
	total := s.refusedSockets.Add(1)
	if err := nc.Close(); err != nil {
		s.log.Debug("closing refused socket", "err", err)
	}
	if !s.refusedLog.allow() {
		return
	}
	peer := nc.RemoteAddr().String()
	if why == refusedSocketShare {
		s.log.Warn("refusing connections: socket limit is reached", "sockets_limit", s.fds.sockets,
			"fd_limit", s.fds.fdLimit, "peer", peer, "refused_total", total)
		return
	}
	s.log.Warn("refusing connections: node connection limit is reached",
		"limit", s.cfg.MaxConnections, "peer", peer, "refused_total", total)
}

// RefusedConnections returns how many sockets were closed because the node
// connection limit or the socket share was reached.
func (s *Server) RefusedConnections() uint64 { return s.refusedSockets.Load() }

// reserveVhostSlot counts the connection against its vhost's connection
// limit (vhost_limits.go) at connection.open; RabbitMQ refuses with 530 and
// the text below.
func (c *conn) reserveVhostSlot(vh *Vhost) *amqp.Error {
	s := c.srv
	max := vh.limits.maxConns.Load()
	s.limitsMu.Lock()
	defer s.limitsMu.Unlock()
	if max != noLimit && int64(s.vhostConns[vh]) >= max {
		return amqp.NewError(amqp.NotAllowed, (&amqp.ConnectionOpen{}).ID(),
			"access to vhost '%s' refused for user '%s': connection limit (%d) is reached", vh.name, c.user.name, max)
	}
	s.vhostConns[vh]++
	c.vhostSlot = vh
	return nil
}

// releaseVhostSlot undoes reserveVhostSlot when the connection ends.
func (c *conn) releaseVhostSlot() {
	if c.vhostSlot == nil {
		return
	}
	s := c.srv
	s.limitsMu.Lock()
	if s.vhostConns[c.vhostSlot]--; s.vhostConns[c.vhostSlot] <= 0 {
		delete(s.vhostConns, c.vhostSlot) // bound the map by live vhosts in use
	}
	s.limitsMu.Unlock()
	c.vhostSlot = nil
}

// queueLimitError enforces the vhost's queue limit (vhost_limits.go) before
// a queue is created, with RabbitMQ's text. The caller holds vh.mu.
func (vh *Vhost) queueLimitError(name string) *amqp.Error {
	if max := vh.limits.maxQueues.Load(); max != noLimit && int64(len(vh.queues)+vh.declaring) >= max {
		return amqp.NewError(amqp.PreconditionFailed, methodQueueDeclare,
			"cannot declare queue '%s': queue limit in vhost '%s' (%d) is reached", name, vh.name, max)
	}
	return nil
}

// consumerLimitError enforces MaxConsumersPerChannel at basic.consume with
// RabbitMQ's 530 and text.
func (ch *channel) consumerLimitError() *amqp.Error {
	max := ch.conn.srv.cfg.MaxConsumersPerChannel
	if max <= 0 {
		return nil
	}
	ch.cmu.Lock()
	n := len(ch.consumers)
	ch.cmu.Unlock()
	if n >= max {
		return amqp.NewError(amqp.NotAllowed, methodBasicConsume, "reached maximum (%d) of consumers per channel", max)
	}
	return nil
}

// methodTableError enforces MaxFieldTableSize on a method's arguments table.
// Methods are re-encoded only when a limit is set and they carry a table.
func (ch *channel) methodTableError(m amqp.Method) *amqp.Error {
	max := ch.conn.srv.cfg.MaxFieldTableSize
	if max <= 0 {
		return nil
	}
	var args amqp.Table
	switch m := m.(type) {
	case *amqp.ExchangeDeclare:
		args = m.Arguments
	case *amqp.ExchangeBind:
		args = m.Arguments
	case *amqp.ExchangeUnbind:
		args = m.Arguments
	case *amqp.QueueDeclare:
		args = m.Arguments
	case *amqp.QueueBind:
		args = m.Arguments
	case *amqp.QueueUnbind:
		args = m.Arguments
	case *amqp.BasicConsume:
		args = m.Arguments
	}
	if len(args) == 0 {
		return nil
	}
	if n := len(amqp.AppendTable(nil, args)) - 4; n > max {
		return amqp.NewError(amqp.PreconditionFailed, m.ID(),
			"arguments table of %d bytes exceeds the limit of %d bytes", n, max)
	}
	return nil
}

// headersTableError enforces MaxFieldTableSize on the headers property of a
// content header frame payload, reading only the table's length prefix.
func (ch *channel) headersTableError(payload []byte) *amqp.Error {
	max := ch.conn.srv.cfg.MaxFieldTableSize
	if max <= 0 || !ch.pubActive || ch.pubHeader || len(payload) < 12 {
		return nil // handleHeader reports malformed or unexpected frames
	}
	if n, ok := headersTableLen(payload[12:]); ok && n > max {
		ch.pubActive = false
		return amqp.NewError(amqp.PreconditionFailed, methodBasicPublish,
			"headers table of %d bytes exceeds the limit of %d bytes", n, max)
	}
	return nil
}

// headersTableLen returns the byte length of the headers table in raw basic
// properties, and whether the property is present and its length readable.
// The headers follow content-type and content-encoding (both shortstr).
func headersTableLen(props []byte) (int, bool) {
	if len(props) < 2 {
		return 0, false
	}
	flags := binary.BigEndian.Uint16(props)
	if flags&amqp.FlagHeaders == 0 {
		return 0, false
	}
	off := 2
	for cont := flags; cont&1 != 0; { // continuation flag words
		if off+2 > len(props) {
			return 0, false
		}
		cont = binary.BigEndian.Uint16(props[off:])
		off += 2
	}
	for _, f := range []uint16{amqp.FlagContentType, amqp.FlagContentEncoding} {
		if flags&f == 0 {
			continue
		}
		if off >= len(props) {
			return 0, false
		}
		off += 1 + int(props[off])
	}
	if off+4 > len(props) {
		return 0, false
	}
	return int(binary.BigEndian.Uint32(props[off:])), true
}
