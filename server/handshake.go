package server

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// serverCapabilities are the RabbitMQ extensions Warren announces.
var serverCapabilities = amqp.Table{
	"publisher_confirms":           true,
	"exchange_exchange_bindings":   true,
	"basic.nack":                   true,
	"consumer_cancel_notify":       true,
	"connection.blocked":           true,
	"consumer_priorities":          true,
	"authentication_failure_close": true,
	"per_consumer_qos":             true,
	"direct_reply_to":              true,
}

// handshake runs protocol header, start, tune and open, synchronously on the
// reader goroutine before the writer exists. It must finish within
// HandshakeTimeout.
func (c *conn) handshake() error {
	cfg := &c.srv.cfg
	c.handshakeDeadline = time.Now().Add(cfg.HandshakeTimeout)
	if err := c.nc.SetDeadline(c.handshakeDeadline); err != nil {
		return err
	}
	if err := c.startTLSHandshake(); err != nil {
		return err
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c.nc, hdr[:]); err != nil {
		return fmt.Errorf("reading protocol header: %w", err)
	}
	if string(hdr[:]) != string(amqp.ProtocolHeader) {
		// Tell the client which protocol we speak, then close (AMQP 0-9-1 §4.2.2).
		_, err := c.nc.Write(amqp.ProtocolHeader)
		return errors.Join(fmt.Errorf("%w: % x", amqp.ErrBadHeader, hdr), err)
	}
	start := &amqp.ConnectionStart{
		VersionMajor: 0, VersionMinor: 9,
		ServerProperties: amqp.Table{
			"product":      "Warren",
			"version":      cfg.ProductVersion,
			"platform":     "Go",
			"copyright":    "Warren authors",
			"information":  "AMQP 0-9-1 broker; RabbitMQ-compatible",
			"cluster_name": "warren",
			"capabilities": serverCapabilities,
		},
		Mechanisms: c.mechanisms(),
		Locales:    []byte("en_US"),
	}
	if err := c.writeDirect(start); err != nil {
		return err
	}
	startOk := new(amqp.ConnectionStartOk)
	if err := c.expect(startOk); err != nil {
		return err
	}
	c.clientProps = startOk.ClientProperties
	c.clientCaps, _ = startOk.ClientProperties["capabilities"].(amqp.Table)
	if err := c.authenticate(startOk); err != nil {
		return err
	}
	tune := &amqp.ConnectionTune{
		ChannelMax: cfg.ChannelMax, FrameMax: cfg.FrameMax, Heartbeat: uint16(cfg.Heartbeat / time.Second),
	}
	if err := c.writeDirect(tune); err != nil {
		return err
	}
	tuneOk := new(amqp.ConnectionTuneOk)
	if err := c.expect(tuneOk); err != nil {
		return err
	}
	if err := c.negotiate(tuneOk); err != nil {
		return err
	}
	open := new(amqp.ConnectionOpen)
	if err := c.expect(open); err != nil {
		return err
	}
	if err := c.openVhost(open.VirtualHost); err != nil {
		return err
	}
	// From here on forceClose queues a connection.close for the writer, which
	// starts right after open-ok, instead of dropping the socket.
	if !c.startRunning() {
		return errClosed
	}
	if err := c.writeDirect(&amqp.ConnectionOpenOk{}); err != nil {
		return err
	}
	c.handshakeDeadline = time.Time{}
	c.lastRead = time.Now()
	return c.nc.SetDeadline(time.Time{})
}

// negotiate applies the client's tune-ok: lower non-zero values win.
func (c *conn) negotiate(t *amqp.ConnectionTuneOk) error {
	cfg := &c.srv.cfg
	c.channelMax = cfg.ChannelMax
	if t.ChannelMax != 0 && t.ChannelMax < c.channelMax {
		c.channelMax = t.ChannelMax
	}
	c.frameMax = cfg.FrameMax
	if t.FrameMax != 0 {
		if t.FrameMax < amqp.FrameMinSize {
			return c.refuse(amqp.NewError(amqp.NotAllowed, t.ID(), "frame_max=%d < %d min size", t.FrameMax, amqp.FrameMinSize))
		}
		if t.FrameMax > cfg.FrameMax {
			return c.refuse(amqp.NewError(amqp.NotAllowed, t.ID(), "frame_max=%d > %d max size", t.FrameMax, cfg.FrameMax))
		}
		c.frameMax = t.FrameMax
	}
	c.heartbeat = time.Duration(t.Heartbeat) * time.Second
	return nil
}

func (c *conn) authenticate(so *amqp.ConnectionStartOk) error {
	var user, pass string
	var ok bool
	switch so.Mechanism {
	case "PLAIN":
		user, pass, ok = parsePlain(so.Response)
	case "AMQPLAIN":
		user, pass, ok = parseAMQPLain(so.Response)
	case "EXTERNAL":
		return c.authenticateExternal(so)
	default:
		return c.refuse(amqp.NewError(amqp.CommandInvalid, so.ID(), "unknown authentication mechanism '%s'", so.Mechanism))
	}
	if !ok {
		return c.refuse(amqp.NewError(amqp.SyntaxError, so.ID(), "malformed %s response", so.Mechanism))
	}
	acct, ok := c.srv.users.authenticate(user, pass)
	if !ok {
		c.log.Warn("login refused", "user", user, "mechanism", so.Mechanism)
		return c.refuse(amqp.NewError(amqp.AccessRefused, so.ID(),
			"Login was refused using authentication mechanism %s. For details see the broker logfile.", so.Mechanism))
	}
	if acct.loopbackOnly && !isLoopback(c.nc.RemoteAddr()) {
		c.log.Warn("login refused: user may only connect via localhost", "user", user)
		return c.refuse(amqp.NewError(amqp.AccessRefused, so.ID(), "User '%s' can only connect via localhost", user))
	}
	c.user = acct
	return nil
}

func (c *conn) openVhost(name string) error {
	vh := c.srv.Vhost(name)
	open := (&amqp.ConnectionOpen{}).ID()
	if vh == nil {
		return c.refuse(amqp.NewError(amqp.NotAllowed, open, "vhost %s not found", name))
	}
	if c.srv.users.permission(c.user.name, name) == nil {
		return c.refuse(amqp.NewError(amqp.NotAllowed, open, "access to vhost '%s' refused for user '%s'", name, c.user.name))
	}
	if err := c.reserveVhostSlot(vh); err != nil {
		return c.refuse(err)
	}
	c.vhost = vh
	return nil
}

// refuse sends connection.close during the handshake and gives the client a
// moment to answer close-ok before the socket is dropped.
func (c *conn) refuse(e *amqp.Error) error {
	c.log.Info("refusing connection", "reason", e.ReplyText())
	werr := c.writeDirect(&amqp.ConnectionClose{ReplyCode: e.Code, ReplyText: e.ReplyText(), ClassID: e.ClassID, MethodID: e.MethodID})
	if werr == nil {
		_ = c.nc.SetReadDeadline(time.Now().Add(time.Second))
		_, _ = c.readFrame() // close-ok, or nothing: either way we are done
	}
	return errors.Join(e, werr)
}

// expect reads the next frame and decodes it into m, which must be the method
// the handshake is waiting for.
func (c *conn) expect(m amqp.Method) error {
	f, err := c.readFrame()
	if err != nil {
		return err
	}
	if f.Type != amqp.TypeMethod || f.Channel != 0 {
		return c.refuse(amqp.NewError(amqp.UnexpectedFrame, 0, "expected %s, got a frame of type %d on channel %d", m.Name(), f.Type, f.Channel))
	}
	id, err := amqp.MethodID(f.Payload)
	if err != nil {
		return c.refuse(amqp.NewError(amqp.FrameError, 0, "%v", err))
	}
	if id == (&amqp.ConnectionClose{}).ID() {
		return errClosed
	}
	if id != m.ID() {
		return c.refuse(amqp.NewError(amqp.CommandInvalid, id, "expected %s, got %s", m.Name(), amqp.MethodName(id)))
	}
	if err := m.Decode(f.Payload[4:]); err != nil {
		return c.refuse(amqp.NewError(amqp.SyntaxError, id, "malformed %s: %v", m.Name(), err))
	}
	return nil
}

func (c *conn) writeDirect(m amqp.Method) error {
	b := amqp.AppendMethodFrame(nil, 0, m)
	_, err := c.nc.Write(b)
	c.stats.sendOct.add(len(b))
	return err
}
