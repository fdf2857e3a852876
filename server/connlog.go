package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"syscall"

	"github.com/warrenmq/warren/amqp"
)

// A connection's life in the log, in the order and at the levels RabbitMQ
// 3.10 writes it (rabbit_reader): "accepting AMQP connection" once a valid
// protocol header arrived (a TCP probe that sends nothing leaves no line),
// then, after connection.open, the user, vhost, mechanism and the
// client-provided name, then "closing AMQP connection" with who closed it.
// Lines a flood of connections produces go through the failure log's limiter
// (loginfail.go); none is written per frame or per message.

// Who ended a connection, in its close line.
const (
	closedByClient = "client"
	closedByBroker = "broker"
)

// connClose is how a running connection ended: set by the reader when the
// client sends connection.close or the reader closes for a connection
// exception (hardClose), or by forceClose from any goroutine under stateMu.
type connClose struct {
	by   string // closedByClient or closedByBroker; empty while open
	code uint16
	text string
}

// logAccepted writes the connection's first line: peer and local address.
func (c *conn) logAccepted() {
	c.headerRead = true
	c.logLimited(slog.LevelInfo, "accepting AMQP connection", failureAccept, "",
		"local", c.nc.LocalAddr().String(), "protocol", c.dialect.String())
}

// logOpened writes the line of a connection that authenticated and was
// granted its vhost.
func (c *conn) logOpened() {
	attrs := []any{"user", c.user.name, "vhost", c.vhost.name, "mechanism", c.mechanism}
	if name, ok := c.clientProps["connection_name"].(string); ok && name != "" {
		attrs = append(attrs, "connection_name", clipUser(name))
	}
	c.log.Info("connection authenticated and granted access to vhost", attrs...)
}

// logHandshakeEnd writes why a handshake ended with err, unless it was
// already logged (refusals, failed logins), the server closed it, or the
// peer went before sending a protocol header.
func (c *conn) logHandshakeEnd(err error) {
	if errors.Is(err, errClosed) || errors.Is(err, errHandshakeRefused) || c.forced() {
		return
	}
	if !c.headerRead && (errors.Is(err, io.EOF) || isConnReset(err)) {
		return
	}
	reason := err.Error()
	if errors.Is(err, io.EOF) || isConnReset(err) {
		reason = "client unexpectedly closed TCP connection"
	}
	c.logLimited(slog.LevelWarn, "closing AMQP connection", failureHandshake, "",
		"state", c.phase.String(), "reason", reason)
}

// logClosed writes the last line of a connection that was running; err is
// what ended its read loop.
func (c *conn) logClosed(err error) {
	cl := c.closeReason()
	attrs := []any{"vhost", c.vhost.name, "user", c.user.name}
	level := slog.LevelInfo
	switch {
	case cl.by != "":
		attrs = append(attrs, "closed_by", cl.by, "code", cl.code, "text", cl.text)
		if cl.by == closedByBroker {
			level = slog.LevelWarn
		}
	case errors.Is(err, io.EOF) || isConnReset(err):
		level = slog.LevelWarn
		attrs = append(attrs, "closed_by", closedByClient, "reason", "client unexpectedly closed TCP connection")
	default:
		level = slog.LevelWarn
		attrs = append(attrs, "closed_by", closedByBroker, "reason", errorText(err))
	}
	c.log.Log(context.Background(), level, "closing AMQP connection", attrs...)
}

// closeReason is the recorded close, the reader's own before a forced one.
func (c *conn) closeReason() connClose {
	if c.closed.by != "" {
		return c.closed
	}
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	return c.forcedWith
}

func errorText(err error) string {
	if err == nil {
		return "connection closed"
	}
	return err.Error()
}

// isConnReset reports a socket the peer reset: the client went without
// connection.close, as with io.EOF.
func isConnReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// logChannelError writes a channel exception, as RabbitMQ's "Channel error on
// connection" (which it writes at error; a client's mistake is a warning
// here), rate-limited per peer and user.
func (ch *channel) logChannelError(e *amqp.Error) {
	c := ch.conn
	c.logLimited(slog.LevelWarn, "channel error", failureChannel, c.user.name,
		"vhost", c.vhost.name, "channel", ch.id, "code", e.Code, "text", e.ReplyText())
}
