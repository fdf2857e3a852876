package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// conn is one client connection. It has exactly two goroutines: the reader,
// which owns all channel state and handles every frame in order, and the
// writer, which flushes the outbox to the socket and sends heartbeats.
type conn struct {
	srv    *Server
	nc     net.Conn
	log    *slog.Logger
	out    *outbox
	id     uint64
	name   string
	opened time.Time

	// Negotiated in the handshake, then read-only.
	user        *account
	vhost       *Vhost
	frameMax    uint32
	channelMax  uint16
	heartbeat   time.Duration
	clientCaps  amqp.Table
	clientProps amqp.Table
	mechanism   string // the SASL mechanism the client authenticated with
	// dialect is the framing fixed by the protocol header; phase tracks the
	// handshake (handshake.go).
	dialect amqp.Dialect
	phase   handshakePhase
	// peerCN is the subject CN of a verified TLS client certificate, and
	// externalOK whether EXTERNAL is offered (tls.go).
	peerCN     string
	externalOK bool
	tlsInfo    *TLSConnInfo // nil on plain TCP; set once by the reader before the handshake
	// vhostSlot is the vhost this connection is counted against (limits.go).
	vhostSlot *Vhost
	// userSlot says the connection is counted against its user's
	// max-connections (user_limits.go).
	userSlot bool

	// Reader-owned state.
	channels map[uint16]*channel
	rbuf     []byte
	rstart   int // first unparsed byte of rbuf
	// rbufCap mirrors cap(rbuf) for the memory breakdown, which runs on
	// other goroutines than the reader that grows rbuf.
	rbufCap   atomic.Int64
	publisher bool
	dirty     []*channel // channels with confirms to flush at the end of a read batch
	stores    storeBatch // persistent publishes of the current read (store_batch.go)
	closing   bool       // the server sent connection.close and awaits close-ok
	closed    connClose  // how the connection ended, for its close line (connlog.go)
	// headerRead is set once a valid protocol header arrived: only then does
	// the connection have lines in the log.
	headerRead bool
	// closeDeadline bounds the wait for close-ok after the server closed.
	closeDeadline time.Time
	// handshakeDeadline is set until connection.open completes.
	handshakeDeadline time.Time
	lastRead          time.Time // when bytes last arrived, for heartbeat timeouts

	// bodyReserved is the bytes allocated for bodies not yet received
	// (content.go), bounded by bodyReserveLimit. Reader-owned.
	bodyReserved uint64

	// stateMu guards running, forcedClose and forcedWith, the hand-over
	// between the handshake and forceClose from other goroutines.
	stateMu     sync.Mutex
	running     bool
	forcedClose bool
	forcedWith  connClose // the close forceClose sent, for the close line

	exclMu    sync.Mutex
	exclusive []*Queue // exclusive queues to delete when the connection goes

	done      chan struct{} // closed when the reader is finished
	writerWG  sync.WaitGroup
	lastWrite atomic.Int64 // unix nanos of the writer's last socket write
	// closeAfterFlush asks the writer to shut the socket once the outbox is written.
	closeAfterFlush atomic.Bool

	stats connStats
}

type connStats struct {
	recvOct, sendOct counter
	recvCnt, sendCnt counter
}

// ConnInfo is a snapshot of a connection for the management API.
type ConnInfo struct {
	ID               uint64
	Name             string
	User, Vhost      string
	Peer, Local      string
	Channels         int
	FrameMax         uint32
	ChannelMax       uint16
	Heartbeat        time.Duration
	ClientProperties amqp.Table
	// Protocol names the connection's dialect as RabbitMQ's management API
	// does: "AMQP 0-9-1" (also for the 0-9 header) or "AMQP 0-8".
	Protocol         string
	ConnectedAt      time.Time
	RecvOct, SendOct uint64
	// TLS describes the session of an AMQPS connection; nil on plain TCP.
	TLS *TLSConnInfo
	// AuthMechanism is the SASL mechanism the client logged in with.
	AuthMechanism string
}

func newConn(s *Server, nc net.Conn, id uint64) *conn {
	c := &conn{
		srv: s, nc: nc, id: id, opened: time.Now(),
		name:     fmt.Sprintf("%s -> %s", nc.RemoteAddr(), nc.LocalAddr()),
		log:      s.log.With("conn", id, "peer", nc.RemoteAddr().String()),
		out:      newOutbox(s.cfg.WriteBufferLimit),
		channels: make(map[uint16]*channel),
		rbuf:     make([]byte, 0, 64<<10),
		done:     make(chan struct{}),
		frameMax: s.cfg.FrameMax,
	}
	c.rbufCap.Store(int64(cap(c.rbuf)))
	return c
}

// errClosed ends the read loop without logging: the connection finished normally.
var errClosed = errors.New("connection closed")

// serve runs the connection to completion on the reader goroutine.
func (c *conn) serve() {
	defer c.nc.Close()
	if !c.srv.registerConn(c) {
		return // the server is closing
	}
	defer c.srv.unregisterConn(c)
	defer c.releaseVhostSlot()
	defer c.releaseUserSlot()
	if err := c.handshake(); err != nil {
		c.logHandshakeEnd(err)
		return
	}
	c.logOpened()
	c.writerWG.Add(1)
	go c.writeLoop()
	c.logClosed(c.readLoop())
	c.flushStores() // publishes read before the socket closed are kept
	c.cleanup()
	close(c.done)
	c.writerWG.Wait()
}

// startRunning moves the connection from handshake to running, unless it was
// force-closed meanwhile.
func (c *conn) startRunning() bool {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if c.forcedClose {
		return false
	}
	c.running = true
	return true
}

func (c *conn) isRunning() bool {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	return c.running
}

func (c *conn) forced() bool {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	return c.forcedClose
}

// cleanup releases everything the connection holds: channels requeue their
// unacked messages, consumers go, exclusive queues are deleted.
func (c *conn) cleanup() {
	for _, ch := range c.channels {
		ch.shutdown()
		c.forgetChannel(ch)
	}
	c.exclMu.Lock()
	qs := c.exclusive
	c.exclusive = nil
	c.exclMu.Unlock()
	for _, q := range qs {
		q.vhost.removeQueue(q, "exclusive owner closed")
	}
}

func (c *conn) addExclusive(q *Queue) {
	c.exclMu.Lock()
	c.exclusive = append(c.exclusive, q)
	c.exclMu.Unlock()
}

func (c *conn) removeExclusive(q *Queue) {
	c.exclMu.Lock()
	if i := slices.Index(c.exclusive, q); i >= 0 {
		c.exclusive = slices.Delete(c.exclusive, i, i+1)
	}
	c.exclMu.Unlock()
}

// readFrame returns the next frame, reading from the socket when the buffer
// holds no whole frame. The payload aliases rbuf until the next call.
func (c *conn) readFrame() (amqp.Frame, error) {
	for {
		f, n, err := amqp.ParseFrame(c.rbuf[c.rstart:], c.frameMax)
		if err != nil {
			return amqp.Frame{}, err
		}
		if n > 0 {
			c.rstart += n
			c.stats.recvCnt.inc()
			return f, nil
		}
		if err := c.fill(); err != nil {
			return amqp.Frame{}, err
		}
	}
}

// hasFrame reports whether a whole frame is already buffered.
func (c *conn) hasFrame() bool {
	b := c.rbuf[c.rstart:]
	size := amqp.FrameSize(b)
	return size > 0 && len(b) >= size
}

// fill reads more bytes from the socket, compacting and growing rbuf as needed.
func (c *conn) fill() error {
	if c.rstart > 0 {
		n := copy(c.rbuf, c.rbuf[c.rstart:])
		c.rbuf = c.rbuf[:n]
		c.rstart = 0
	}
	if need := amqp.FrameSize(c.rbuf); need > cap(c.rbuf) {
		grown := make([]byte, len(c.rbuf), need)
		copy(grown, c.rbuf)
		c.rbuf = grown
		c.rbufCap.Store(int64(cap(grown)))
	} else if len(c.rbuf) == cap(c.rbuf) {
		grown := make([]byte, len(c.rbuf), 2*cap(c.rbuf))
		copy(grown, c.rbuf)
		c.rbuf = grown
		c.rbufCap.Store(int64(cap(grown)))
	}
	for {
		if err := c.nc.SetReadDeadline(c.readDeadline()); err != nil {
			return err
		}
		n, err := c.nc.Read(c.rbuf[len(c.rbuf):cap(c.rbuf)])
		c.rbuf = c.rbuf[:len(c.rbuf)+n]
		c.stats.recvOct.add(n)
		if n > 0 {
			c.lastRead = time.Now()
		}
		if err == nil {
			return nil
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || c.closing {
			return err
		}
		if c.heartbeat > 0 && time.Since(c.lastRead) >= 2*c.heartbeat {
			return fmt.Errorf("missed heartbeats from client, timeout: %s", c.heartbeat)
		}
		if !c.handshakeDeadline.IsZero() {
			return fmt.Errorf("handshake not finished within %s", c.srv.cfg.HandshakeTimeout)
		}
		// A periodic wake-up: look for consumers past their ack timeout.
		c.checkConsumerTimeouts()
		if n > 0 {
			return nil
		}
	}
}

// readDeadline is the next time the reader must wake: two heartbeat intervals
// after the last byte read, or the next consumer-timeout check if sooner.
func (c *conn) readDeadline() time.Time {
	if c.closing {
		return c.closeDeadline
	}
	if !c.handshakeDeadline.IsZero() {
		return c.handshakeDeadline
	}
	next := time.Now().Add(c.srv.cfg.ConsumerTimeoutCheck)
	if c.heartbeat > 0 {
		if hb := c.lastRead.Add(2 * c.heartbeat); hb.Before(next) {
			next = hb
		}
	}
	return next
}

// checkConsumerTimeouts closes, with 406, every channel holding a delivery
// unacknowledged for longer than its queue's consumer timeout; closing the
// channel requeues its deliveries.
func (c *conn) checkConsumerTimeouts() {
	now := c.srv.clock()
	def := c.srv.cfg.ConsumerTimeout
	for _, ch := range c.channels {
		if ch.closing {
			continue
		}
		var expired time.Duration
		ch.umu.Lock()
		for i := ch.unacked.head; i < len(ch.unacked.items); i++ {
			d := &ch.unacked.items[i]
			limit := def
			if ct := d.q.consumerTimeout(); ct > 0 {
				limit = ct
			}
			if limit > 0 && time.Duration(now-d.at)*time.Millisecond > limit {
				expired = limit
				break
			}
		}
		ch.umu.Unlock()
		if expired > 0 {
			ch.softClose(amqp.NewError(amqp.PreconditionFailed, 0,
				"delivery acknowledgement on channel %d timed out. Timeout value used: %d ms. This timeout value can be configured, see consumers doc guide to learn more",
				ch.id, expired.Milliseconds()))
		}
	}
}

// readLoop handles frames until the connection ends.
func (c *conn) readLoop() error {
	for {
		if !c.hasFrame() {
			c.endBatch()
			if err := c.waitAlarm(); err != nil {
				return err
			}
		}
		f, err := c.readFrame()
		if err != nil {
			if c.closing {
				return errClosed
			}
			if errors.Is(err, amqp.ErrFrameTooLarge) || errors.Is(err, amqp.ErrFrameEnd) || errors.Is(err, amqp.ErrFrameType) {
				return c.hardClose(amqp.NewError(amqp.FrameError, 0, "%v", err))
			}
			return err
		}
		if err := c.handleFrameSafely(f); err != nil {
			var ae *amqp.Error
			if errors.As(err, &ae) {
				if err := c.hardClose(ae); err != nil {
					return err
				}
				continue
			}
			return err
		}
	}
}

// endBatch runs after the frames of one socket read are handled: it writes
// the deferred persistent messages and flushes coalesced publisher confirms.
func (c *conn) endBatch() {
	c.flushStores()
	for _, ch := range c.dirty {
		ch.flushConfirms()
	}
	clear(c.dirty)
	c.dirty = c.dirty[:0]
}

// hardClose sends connection.close for a connection exception and keeps
// reading until close-ok (or a deadline), discarding everything else, as the
// spec requires.
func (c *conn) hardClose(e *amqp.Error) error {
	if c.closing {
		return errClosed
	}
	c.closing = true
	c.closed = connClose{by: closedByBroker, code: e.Code, text: e.ReplyText()}
	c.endBatch()
	c.out.sendMethod(0, c.wire(&amqp.ConnectionClose{ReplyCode: e.Code, ReplyText: e.ReplyText(), ClassID: e.ClassID, MethodID: e.MethodID}))
	c.closeDeadline = time.Now().Add(3 * time.Second)
	return nil
}

// testHookFrame, when set by a test, runs before each frame is handled; it
// lets a test make the handler fail in ways no client input can.
var testHookFrame atomic.Pointer[func(f amqp.Frame)]

// handleFrameSafely handles a frame, turning a panic in a handler into a 541
// INTERNAL_ERROR for this connection instead of a crashed broker.
func (c *conn) handleFrameSafely(f amqp.Frame) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("internal error handling frame", "panic", r, "stack", string(debug.Stack()))
			err = amqp.NewError(amqp.InternalError, 0, "internal error: %v", r)
		}
	}()
	if hook := testHookFrame.Load(); hook != nil {
		(*hook)(f)
	}
	return c.handleFrame(f)
}

// handleFrame dispatches one frame.
func (c *conn) handleFrame(f amqp.Frame) error {
	if c.dialect == amqp.Dialect08 && f.Type == amqp.TypeMethod {
		var ok bool
		if f.Payload, ok = amqp.From08(f.Payload); !ok {
			id, _ := amqp.MethodID(f.Payload)
			return amqp.NewError(amqp.ChannelError, id, "unexpected method in connection state running")
		}
	}
	if c.closing {
		if f.Type == amqp.TypeMethod && f.Channel == 0 {
			if id, _ := amqp.MethodID(f.Payload); id == (&amqp.ConnectionCloseOk{}).ID() {
				return errClosed
			}
		}
		return nil
	}
	if f.Type == amqp.TypeHeartbeat {
		if f.Channel != 0 {
			return amqp.NewError(amqp.FrameError, 0, "heartbeat frame on channel %d", f.Channel)
		}
		return nil
	}
	if f.Channel == 0 {
		if f.Type != amqp.TypeMethod {
			return amqp.NewError(amqp.UnexpectedFrame, 0, "content frame on channel 0")
		}
		c.flushStores() // connection.close and the like see every publish
		return c.handleConnectionMethod(f.Payload)
	}
	c.flushBeforeFrame(f)
	ch := c.channels[f.Channel]
	if ch == nil {
		return c.openChannel(f)
	}
	return ch.handleFrame(f)
}

func (c *conn) openChannel(f amqp.Frame) error {
	if f.Type != amqp.TypeMethod {
		return amqp.NewError(amqp.UnexpectedFrame, 0, "content frame on unopened channel %d", f.Channel)
	}
	id, err := amqp.MethodID(f.Payload)
	if err != nil {
		return amqp.NewError(amqp.FrameError, 0, "%v", err)
	}
	var open amqp.ChannelOpen
	if id != open.ID() {
		return amqp.NewError(amqp.ChannelError, id, "expected 'channel.open' on channel %d", f.Channel)
	}
	if err := open.Decode(f.Payload[4:]); err != nil {
		return amqp.NewError(amqp.SyntaxError, id, "%v", err)
	}
	if f.Channel > c.channelMax || len(c.channels) >= int(c.channelMax) {
		return amqp.NewError(amqp.NotAllowed, id, "number of channels opened (%d) has reached the negotiated channel_max (%d)", len(c.channels), c.channelMax)
	}
	ch := newChannel(c, f.Channel)
	if err := c.reserveChannelSlot(ch); err != nil {
		return err
	}
	c.channels[f.Channel] = ch
	c.srv.admin.track(ch)
	c.out.sendMethod(f.Channel, c.wire(&amqp.ChannelOpenOk{}))
	return nil
}

func (c *conn) handleConnectionMethod(payload []byte) error {
	m, err := amqp.DecodeMethod(payload)
	if err != nil {
		return methodDecodeError(payload, err)
	}
	switch m := m.(type) {
	case *amqp.ConnectionClose:
		c.closed = connClose{by: closedByClient, code: m.ReplyCode, text: m.ReplyText}
		c.cleanup()
		c.out.sendMethod(0, c.wire(&amqp.ConnectionCloseOk{}))
		return errClosed
	case *amqp.ConnectionCloseOk:
		return errClosed
	case *amqp.ConnectionUpdateSecret:
		// RabbitMQ 3.10 hands the secret to the backends whose state can
		// expire (OAuth 2 tokens); the internal, password backend is not one
		// of them, so the secret is accepted without a check and changes
		// nothing (rabbit_access_control:update_state/2).
		c.log.Info("user updated secret", "user", c.user.name, "reason", m.Reason)
		c.out.sendMethod(0, &amqp.ConnectionUpdateSecretOk{})
		return nil
	}
	return amqp.NewError(amqp.CommandInvalid, m.ID(), "unexpected method %s on channel 0", m.Name())
}

// wire returns m as the connection's dialect encodes it: for AMQP 0-8 a few
// connection-level methods differ (amqp.As08), and nothing else does.
func (c *conn) wire(m amqp.Method) amqp.Method {
	if c.dialect == amqp.Dialect08 {
		return amqp.As08(m)
	}
	return m
}

// methodDecodeError turns a method decoding failure into the right exception.
func methodDecodeError(payload []byte, err error) *amqp.Error {
	id, _ := amqp.MethodID(payload)
	if errors.Is(err, amqp.ErrUnknownMethod) {
		return amqp.NewError(amqp.NotImplemented, id, "unknown method %s", amqp.MethodName(id))
	}
	return amqp.NewError(amqp.SyntaxError, id, "malformed %s: %v", amqp.MethodName(id), err)
}

// writeLoop flushes the outbox and sends heartbeats until the reader is done,
// then flushes what is left (e.g. a connection.close-ok) and returns.
func (c *conn) writeLoop() {
	defer c.writerWG.Done()
	var spare []byte
	var tick <-chan time.Time
	if c.heartbeat > 0 {
		t := time.NewTicker(c.heartbeat / 2)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-c.out.kick:
		case <-tick:
			if time.Since(time.Unix(0, c.lastWrite.Load())) >= c.heartbeat/2 {
				c.out.mu.Lock()
				c.out.buf = amqp.AppendHeartbeat(c.out.buf)
				c.out.mu.Unlock()
			}
		case <-c.done:
			buf, _ := c.out.take(spare)
			c.write(buf)
			c.out.close()
			return
		}
		buf, waiting := c.out.take(spare)
		if len(buf) > 0 {
			if !c.write(buf) {
				c.out.close()
				c.nc.Close() // unblocks the reader, which cleans up
				<-c.done
				return
			}
		}
		if c.closeAfterFlush.Load() {
			c.shutRead()
		}
		spare = buf[:0]
		if cap(spare) > 4<<20 {
			spare = nil // do not keep a burst's buffer forever
		}
		for _, q := range waiting {
			q.redispatch()
		}
	}
}

// shutRead ends the reader's blocking read so it cleans up; the writer keeps
// the write side open to flush what is left.
func (c *conn) shutRead() {
	if tc, ok := c.nc.(interface{ CloseRead() error }); ok {
		if err := tc.CloseRead(); err == nil {
			return
		}
	}
	c.nc.Close()
}

// write sends buf and reports success. A write stalled for a minute counts as a
// dead peer.
func (c *conn) write(buf []byte) bool {
	if len(buf) == 0 {
		return true
	}
	if err := c.nc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
		return false
	}
	n, err := c.nc.Write(buf)
	c.stats.sendOct.add(n)
	c.lastWrite.Store(time.Now().UnixNano())
	if err != nil {
		c.log.Debug("write failed", "err", err)
		return false
	}
	return true
}

// waitAlarm blocks a publishing connection while a resource alarm is on, as
// RabbitMQ does: the socket is not read until the alarm clears.
func (c *conn) waitAlarm() error {
	if !c.publisher {
		return nil
	}
	cleared := c.srv.alarms.clearedChan()
	if cleared == nil {
		return nil
	}
	// AMQP 0-8 has no connection.blocked: its 10.60 is connection.close.
	notify := c.supportsCap("connection.blocked") && c.dialect != amqp.Dialect08
	if notify {
		c.out.sendMethod(0, &amqp.ConnectionBlocked{Reason: c.srv.alarms.reason()})
	}
	// Heartbeats from a blocked client are not read; do not time it out.
	if err := c.nc.SetReadDeadline(time.Time{}); err != nil {
		return err
	}
	select {
	case <-cleared:
	case <-c.srv.quit:
		return errClosed
	}
	if notify {
		c.out.sendMethod(0, &amqp.ConnectionUnblocked{})
	}
	return nil
}

func (c *conn) supportsCap(name string) bool {
	v, _ := c.clientCaps[name].(bool)
	return v
}

// Info returns a snapshot of the connection. Safe from any goroutine.
func (c *conn) Info() ConnInfo {
	info := ConnInfo{
		ID: c.id, Name: c.name, Peer: c.nc.RemoteAddr().String(), Local: c.nc.LocalAddr().String(),
		FrameMax: c.frameMax, ChannelMax: c.channelMax, Heartbeat: c.heartbeat,
		ClientProperties: c.clientProps, ConnectedAt: c.opened, Protocol: c.dialect.String(),
		RecvOct: c.stats.recvOct.value(), SendOct: c.stats.sendOct.value(),
		TLS: c.tlsInfo, AuthMechanism: c.mechanism,
	}
	if c.user != nil {
		info.User = c.user.name
	}
	if c.vhost != nil {
		info.Vhost = c.vhost.name
	}
	return info
}

// isLoopback reports whether addr is a loopback address.
func isLoopback(addr net.Addr) bool {
	if ta, ok := addr.(*net.TCPAddr); ok {
		return ta.IP.IsLoopback()
	}
	return false
}

// parseAMQPLain decodes an AMQPLAIN response: a field table without its length.
func parseAMQPLain(resp []byte) (user, pass string, ok bool) {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(resp)))
	t, err := amqp.DecodeTable(append(b, resp...))
	if err != nil {
		return "", "", false
	}
	user, ok1 := t["LOGIN"].(string)
	pass, ok2 := t["PASSWORD"].(string)
	return user, pass, ok1 && ok2
}

// parsePlain decodes a SASL PLAIN response: authzid NUL authcid NUL password.
func parsePlain(resp []byte) (user, pass string, ok bool) {
	parts := bytes.SplitN(resp, []byte{0}, 3)
	if len(parts) != 3 {
		return "", "", false
	}
	return string(parts[1]), string(parts[2]), true
}
