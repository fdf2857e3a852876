package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// tsHeader carries the publish time (int64 Unix nanoseconds) of messages
// whose body is shorter than 8 bytes.
const tsHeader = "x-warren-perf-ts"

const (
	// dialTimeout bounds the TCP connect.
	dialTimeout = 10 * time.Second
	// closeTimeout bounds the connection.close handshake.
	closeTimeout = 5 * time.Second
)

// brokerConn is an AMQP connection together with its socket, which the
// runner closes to stop a worker whose publish is blocked by a broker
// applying flow control: the client library offers no other way.
type brokerConn struct {
	*amqp.Connection
	sock net.Conn
	// aborted is set by abort: errors from the dead connection afterwards
	// are expected.
	aborted atomic.Bool
}

// dial opens one connection named after role, so that the broker's
// management UI shows which worker it belongs to.
func dial(rawURL, role string) (*brokerConn, error) {
	props := amqp.NewConnectionProperties()
	props["connection_name"] = "warren-perf " + role
	bc := &brokerConn{}
	d := net.Dialer{Timeout: dialTimeout}
	cfg := amqp.Config{
		Properties: props,
		Dial: func(network, addr string) (net.Conn, error) {
			c, err := d.Dial(network, addr)
			bc.sock = c
			return c, err
		},
	}
	conn, err := amqp.DialConfig(rawURL, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w at %s (%s): %w", ErrConnect, redactURL(rawURL), role, err)
	}
	bc.Connection = conn
	return bc, nil
}

// openChannel dials and opens one channel; on failure nothing stays open.
func openChannel(rawURL, role string) (*brokerConn, *amqp.Channel, error) {
	conn, err := dial(rawURL, role)
	if err != nil {
		return nil, nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("%w (%s): open channel: %w", ErrConnect, role, err), conn.close())
	}
	return conn, ch, nil
}

// close closes the connection cleanly, waiting at most closeTimeout for
// the broker. A connection that is already closed (by the broker, or by
// abort) is not an error here.
func (c *brokerConn) close() error {
	err := c.CloseDeadline(time.Now().Add(closeTimeout))
	if err != nil && !errors.Is(err, amqp.ErrClosed) && !c.aborted.Load() {
		return fmt.Errorf("close connection: %w", err)
	}
	return nil
}

// abort closes the socket under the connection, which fails any read or
// write in progress. A socket that is already closed is not an error.
func (c *brokerConn) abort() error {
	c.aborted.Store(true)
	if err := c.sock.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("abort connection: %w", err)
	}
	return nil
}

// closeReason returns why a channel was closed, as reported on its
// NotifyClose listener, or amqp.ErrClosed if it closed without a reason.
func closeReason(closed <-chan *amqp.Error) error {
	select {
	case e, ok := <-closed:
		if ok && e != nil {
			return e
		}
	default:
	}
	return amqp.ErrClosed
}

// stampTimestamp writes the publish time into msg: into the first 8 bytes
// of the body (big-endian Unix nanoseconds) when it is long enough, else
// into the tsHeader header.
func stampTimestamp(msg *amqp.Publishing, unixNano int64) {
	if len(msg.Body) >= 8 {
		binary.BigEndian.PutUint64(msg.Body, uint64(unixNano))
		return
	}
	if msg.Headers == nil {
		msg.Headers = amqp.Table{}
	}
	msg.Headers[tsHeader] = unixNano
}

// decodeTimestamp reads the publish time written by stampTimestamp. It
// reports false when there is none or it is not a positive number, as for a
// message from another publisher on a predeclared queue.
func decodeTimestamp(body []byte, headers amqp.Table) (int64, bool) {
	var ts int64
	if len(body) >= 8 {
		ts = int64(binary.BigEndian.Uint64(body))
	} else {
		switch v := headers[tsHeader].(type) {
		case int64:
			ts = v
		case int32:
			ts = int64(v)
		case uint64:
			ts = int64(v)
		default:
			return 0, false
		}
	}
	return ts, ts > 0
}
