package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	dialect, ok := amqp.HeaderDialect(hdr[:])
	if !ok {
		// Tell the client which protocol we speak, then close (AMQP 0-9-1 §4.2.2).
		_, err := c.nc.Write(amqp.ProtocolHeader)
		return errors.Join(fmt.Errorf("%w: % x", amqp.ErrBadHeader, hdr), err)
	}
	c.dialect = dialect
	c.logAccepted()
	if err := c.writeDirect(c.startMethod()); err != nil {
		return err
	}
	c.phase = phaseStarting
	startOk := new(amqp.ConnectionStartOk)
	if err := c.expect(startOk); err != nil {
		return err
	}
	c.clientProps = startOk.ClientProperties
	c.clientCaps, _ = startOk.ClientProperties["capabilities"].(amqp.Table)
	if err := c.authenticate(startOk); err != nil {
		return err
	}
	c.mechanism = startOk.Mechanism
	tune := &amqp.ConnectionTune{
		ChannelMax: cfg.ChannelMax, FrameMax: cfg.FrameMax, Heartbeat: uint16(cfg.Heartbeat / time.Second),
	}
	if err := c.writeDirect(tune); err != nil {
		return err
	}
	c.phase = phaseTuning
	tuneOk := new(amqp.ConnectionTuneOk)
	if err := c.expect(tuneOk); err != nil {
		return err
	}
	if err := c.negotiate(tuneOk); err != nil {
		return err
	}
	c.phase = phaseOpening
	open := new(amqp.ConnectionOpen)
	if err := c.expect(open); err != nil {
		return err
	}
	if err := c.openVhost(open.VirtualHost); err != nil {
		return err
	}
	// From here on forceClose queues a connection.close for the writer, which
	// starts right after open-ok, instead of dropping the socket.
	if hook := testHookVhostOpened; hook != nil {
		hook(c)
	}
	if !c.startRunning() {
		return errClosed
	}
	// A user deleted after openVhost checked it but before startRunning was
	// not seen by closeUserConnections, which closes running connections only.
	// Deletion removes the account before it looks, so checking after
	// startRunning closes the gap: either this check sees the user gone or
	// the deletion sees this connection running.
	if c.srv.users.get(c.user.name) == nil {
		c.forceClose(amqp.ConnectionForced, fmt.Sprintf("user '%s' is deleted", c.user.name))
	}
	if err := c.writeDirect(&amqp.ConnectionOpenOk{}); err != nil {
		return err
	}
	c.handshakeDeadline = time.Time{}
	c.lastRead = time.Now()
	return c.nc.SetDeadline(time.Time{})
}

// testHookVhostOpened, when set by a test, runs between the vhost check of
// connection.open and the connection becoming running.
var testHookVhostOpened func(*conn)

// startMethod is the connection.start of the connection's dialect. Like
// RabbitMQ, Warren announces no capabilities to AMQP 0-8 clients.
func (c *conn) startMethod() *amqp.ConnectionStart {
	caps := serverCapabilities
	if c.dialect == amqp.Dialect08 {
		caps = amqp.Table{}
	}
	major, minor := c.dialect.StartVersion()
	return &amqp.ConnectionStart{
		VersionMajor: major, VersionMinor: minor,
		ServerProperties: amqp.Table{
			"product":      "Warren",
			"version":      c.srv.cfg.ProductVersion,
			"platform":     "Go",
			"copyright":    "Warren authors",
			"information":  "AMQP 0-9-1 broker; RabbitMQ-compatible",
			"cluster_name": c.srv.announcedClusterName(),
			"capabilities": caps,
		},
		Mechanisms: c.mechanisms(),
		Locales:    []byte("en_US"),
	}
}

// handshakePhase is where the handshake stands, named as RabbitMQ's reader
// names its connection states.
type handshakePhase uint8

const (
	phaseStarting handshakePhase = iota // start sent, awaiting start-ok
	phaseTuning                         // tune sent, awaiting tune-ok
	phaseOpening                        // tune-ok accepted, awaiting open
)

func (p handshakePhase) String() string {
	return [...]string{"starting", "tuning", "opening"}[p]
}

// fail ends the handshake for e as RabbitMQ 3.10 does: before tune-ok is
// accepted the socket is closed without a word after LoginFailureDelay; once
// the client waits for open-ok it gets connection.close.
func (c *conn) fail(e *amqp.Error) error {
	if c.phase == phaseOpening {
		return c.refuse(e)
	}
	return c.dropHandshake(e)
}

// negotiate applies the client's tune-ok. As in RabbitMQ
// (validate_negotiated_integer_value), a value below the minimum, above the
// server's, or 0 ("no limit") where the server has one is refused.
func (c *conn) negotiate(t *amqp.ConnectionTuneOk) error {
	cfg := &c.srv.cfg
	if e := checkTuned("frame_max", t.FrameMax, amqp.FrameMinSize, cfg.FrameMax); e != nil {
		return c.fail(e)
	}
	if e := checkTuned("channel_max", uint32(t.ChannelMax), 1, uint32(cfg.ChannelMax)); e != nil {
		return c.fail(e)
	}
	c.frameMax = t.FrameMax
	c.channelMax = t.ChannelMax
	c.heartbeat = time.Duration(t.Heartbeat) * time.Second
	return nil
}

// checkTuned checks one tune-ok value against the minimum and the server's
// limit (0: none), in RabbitMQ's words.
func checkTuned(field string, client, least, server uint32) *amqp.Error {
	tune := (&amqp.ConnectionTune{}).ID()
	if client != 0 && client < least {
		return amqp.NewError(amqp.NotAllowed, tune, "negotiated %s = %d is lower than the minimum allowed value (%d)", field, client, least)
	}
	if server != 0 && (client == 0 || client > server) {
		detail := ""
		if client == 0 && field == "channel_max" { // RabbitMQ's get_client_value_detail/2
			detail = " (no limit)"
		}
		return amqp.NewError(amqp.NotAllowed, tune, "negotiated %s = %d%s is higher than the maximum allowed value (%d)", field, client, detail, server)
	}
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
		return c.fail(amqp.NewError(amqp.CommandInvalid, so.ID(), "unknown authentication mechanism '%s'", so.Mechanism))
	}
	if !ok {
		return c.fail(amqp.NewError(amqp.SyntaxError, so.ID(), "malformed %s response", so.Mechanism))
	}
	acct, ok := c.srv.users.authenticate(user, pass)
	if !ok {
		return c.loginRefused(so.Mechanism, user, "invalid credentials")
	}
	if acct.loopbackOnly && !isLoopback(c.nc.RemoteAddr()) {
		return c.loginRefused(so.Mechanism, user, "user can only connect via localhost")
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
	if err := c.reserveUserSlot(); err != nil {
		return c.refuse(err)
	}
	c.vhost = vh
	return nil
}

// refuse sends connection.close during the handshake and gives the client a
// moment to answer close-ok before the socket is dropped.
func (c *conn) refuse(e *amqp.Error) error {
	c.logLimited(slog.LevelWarn, "refusing connection", failureHandshake, "", "code", e.Code, "reason", e.ReplyText())
	return errors.Join(e, c.sendRefusal(e))
}

// sendRefusal writes connection.close for e and waits up to a second for
// close-ok.
func (c *conn) sendRefusal(e *amqp.Error) error {
	if err := c.nc.SetWriteDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	werr := c.writeDirect(&amqp.ConnectionClose{ReplyCode: e.Code, ReplyText: e.ReplyText(), ClassID: e.ClassID, MethodID: e.MethodID})
	if werr == nil {
		c.handshakeDeadline = time.Now().Add(time.Second) // readFrame's deadline
		_, _ = c.readFrame()                              // close-ok, or nothing: either way we are done
	}
	return werr
}

// expect reads the next frame and decodes it into m, which must be the method
// the handshake is waiting for. Heartbeats are skipped, as RabbitMQ does
// before the connection is open.
func (c *conn) expect(m amqp.Method) error {
	for {
		f, err := c.readFrame()
		if err != nil {
			return err
		}
		if f.Type == amqp.TypeHeartbeat && f.Channel == 0 {
			continue
		}
		if f.Type != amqp.TypeMethod || f.Channel != 0 {
			return c.fail(amqp.NewError(amqp.UnexpectedFrame, 0, "expected %s, got a frame of type %d on channel %d", m.Name(), f.Type, f.Channel))
		}
		return c.decodeExpected(f.Payload, m)
	}
}

func (c *conn) decodeExpected(payload []byte, m amqp.Method) error {
	if c.dialect == amqp.Dialect08 {
		var ok bool
		if payload, ok = amqp.From08(payload); !ok {
			id, _ := amqp.MethodID(payload)
			return c.fail(amqp.NewError(amqp.ChannelError, id, "unexpected method in connection state %s", c.phase))
		}
	}
	id, err := amqp.MethodID(payload)
	if err != nil {
		return c.fail(amqp.NewError(amqp.FrameError, 0, "%v", err))
	}
	if id == (&amqp.ConnectionClose{}).ID() {
		return errClosed
	}
	if id != m.ID() {
		return c.fail(amqp.NewError(amqp.ChannelError, id, "unexpected method in connection state %s", c.phase))
	}
	if err := m.Decode(payload[4:]); err != nil {
		return c.fail(amqp.NewError(amqp.SyntaxError, id, "malformed %s: %v", m.Name(), err))
	}
	return nil
}

func (c *conn) writeDirect(m amqp.Method) error {
	b := amqp.AppendMethodFrame(nil, 0, c.wire(m))
	_, err := c.nc.Write(b)
	c.stats.sendOct.add(len(b))
	return err
}
