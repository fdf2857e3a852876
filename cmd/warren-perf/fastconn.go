package main

// The fast client's connection: dialing, the AMQP handshake, buffered
// frame reading, serialised writes, heartbeats and closing. Publishers and
// consumers build on it in fastpub.go and fastcons.go.

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// fastReadBuf is the size of a fast connection's read buffer: many
	// deliveries or confirms per read syscall, and at least one frame of
	// clientFrameMax.
	fastReadBuf = 256 << 10
	// fastChannel is the one channel a fast connection opens.
	fastChannel = 1
	// clientProduct names the client in the broker's connection list.
	clientProduct = "warren-perf fast client"
)

// amqpURI is what the fast client takes from an AMQP URI.
type amqpURI struct {
	addr     string // host:port
	host     string // for TLS server name checks
	tls      bool
	user     string
	password string
	vhost    string
}

// parseAMQPURI parses amqp://user:pass@host:port/vhost (or amqps://) with
// the defaults amqp091-go applies: guest/guest, port 5672 (5671 for amqps),
// vhost "/" when the path is empty or "/".
func parseAMQPURI(raw string) (amqpURI, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return amqpURI{}, fmt.Errorf("parse URI: %w", err)
	}
	a := amqpURI{user: "guest", password: "guest", vhost: "/"}
	port := "5672"
	switch u.Scheme {
	case "amqp":
	case "amqps":
		a.tls, port = true, "5671"
	default:
		return amqpURI{}, fmt.Errorf("URI scheme %q: want amqp or amqps", u.Scheme)
	}
	a.host = u.Hostname()
	if a.host == "" {
		a.host = "localhost"
	}
	if p := u.Port(); p != "" {
		port = p
	}
	a.addr = net.JoinHostPort(a.host, port)
	if u.User != nil {
		a.user = u.User.Username()
		if p, ok := u.User.Password(); ok {
			a.password = p
		}
	}
	if len(u.Path) > 1 {
		a.vhost = u.Path[1:]
	}
	if err := checkShortStr("vhost", a.vhost); err != nil {
		return amqpURI{}, err
	}
	return a, nil
}

// fastConn is one connection of the fast client with its single channel.
//
// Reading belongs to one goroutine at a time: the dialer during the
// handshake, then the publisher's reader goroutine or the consumer's own
// goroutine. Writes from any goroutine go through write, serialised by wmu.
//
// Lock order: wmu and dlMu are leaves, never held together or with another
// lock.
type fastConn struct {
	role      string
	sock      net.Conn
	frameMax  int           // negotiated; no frame sent or accepted is larger
	heartbeat time.Duration // negotiated; 0 = none

	// rbuf[rpos:rend] holds received bytes not yet parsed.
	rbuf       []byte
	rpos, rend int

	wmu sync.Mutex
	// wrote is set by every write; the heartbeat sender clears it and
	// sends a heartbeat when it finds it still clear a period later.
	wrote atomic.Bool

	// blocked is set between connection.blocked and connection.unblocked;
	// onUnblocked, if set before the reader starts, runs after unblocked.
	blocked     atomic.Bool
	onUnblocked func()

	// serverClosed is set once the broker sent connection.close (answered)
	// or connection.close-ok: no close handshake is left to do.
	serverClosed atomic.Bool
	// aborted is set by abort: errors from the dead socket are expected.
	aborted atomic.Bool

	// dlMu guards closing, which stops interruptRead from moving the read
	// deadline once close has set its own.
	dlMu    sync.Mutex
	closing bool

	hbStop chan struct{} // closed (once, by stopHeartbeat) to stop the heartbeat sender
	hbOnce sync.Once
	hbWG   sync.WaitGroup
}

// dialFast connects to rawURL, runs the AMQP handshake and opens channel 1.
// role names the connection in the broker's connection list. On failure
// nothing stays open.
func dialFast(rawURL, role string) (*fastConn, error) {
	u, err := parseAMQPURI(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w at %s (%s): %w", ErrConnect, redactURL(rawURL), role, err)
	}
	d := net.Dialer{Timeout: dialTimeout}
	var sock net.Conn
	if u.tls {
		sock, err = tls.DialWithDialer(&d, "tcp", u.addr, &tls.Config{ServerName: u.host})
	} else {
		sock, err = d.Dial("tcp", u.addr)
	}
	if err != nil {
		return nil, fmt.Errorf("%w at %s (%s): %w", ErrConnect, redactURL(rawURL), role, err)
	}
	if tc, ok := sock.(*net.TCPConn); ok {
		// Writes are already batched; Nagle would only delay the last one.
		if err := tc.SetNoDelay(true); err != nil {
			return nil, errors.Join(fmt.Errorf("%w (%s): set TCP_NODELAY: %w", ErrConnect, role, err), sock.Close())
		}
	}
	fc := &fastConn{role: role, sock: sock, frameMax: minFrameMax, rbuf: make([]byte, fastReadBuf), hbStop: make(chan struct{})}
	if err := fc.handshake(u); err != nil {
		fc.stopHeartbeat()
		return nil, errors.Join(fmt.Errorf("%w at %s (%s): %w", ErrConnect, redactURL(rawURL), role, err), ignoreClosed(sock.Close()))
	}
	return fc, nil
}

// ignoreClosed drops net.ErrClosed: closing what is already closed is fine.
func ignoreClosed(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// handshake runs connection.start to channel.open-ok, bounded by
// dialTimeout.
func (c *fastConn) handshake(u amqpURI) error {
	if err := c.sock.SetDeadline(time.Now().Add(dialTimeout)); err != nil {
		return fmt.Errorf("set handshake deadline: %w", err)
	}
	if err := c.write(amqpProtocolHeader); err != nil {
		return err
	}
	if _, err := c.expect(0, mConnectionStart); err != nil {
		return err
	}
	if err := c.write(appendMethodFrame(nil, 0, mConnectionStartOk, func(b []byte) []byte {
		return appendStartOk(b, c.role, u.user, u.password)
	})); err != nil {
		return err
	}
	r, err := c.expect(0, mConnectionTune)
	if err != nil {
		return err
	}
	channelMax, frameMax, heartbeat := r.u16(), r.u32(), r.u16()
	if !r.ok() {
		return fmt.Errorf("%w: short connection.tune", errMalformed)
	}
	if frameMax != 0 && frameMax < minFrameMax {
		return fmt.Errorf("%w: broker's frame_max %d is below the protocol minimum %d", errMalformed, frameMax, minFrameMax)
	}
	c.frameMax = negotiateFrameMax(frameMax)
	c.heartbeat = time.Duration(heartbeat) * time.Second
	out := appendMethodFrame(nil, 0, mConnectionTuneOk, func(b []byte) []byte {
		b = binary.BigEndian.AppendUint16(b, channelMax)
		b = binary.BigEndian.AppendUint32(b, uint32(c.frameMax))
		return binary.BigEndian.AppendUint16(b, heartbeat)
	})
	out = appendMethodFrame(out, 0, mConnectionOpen, func(b []byte) []byte {
		b = appendShortStr(b, u.vhost)
		return append(b, 0, 0) // reserved-1 (capabilities) "", reserved-2 (insist) false
	})
	if err := c.write(out); err != nil {
		return err
	}
	if _, err := c.expect(0, mConnectionOpenOk); err != nil {
		return err
	}
	c.startHeartbeat()
	// call bounds channel.open with a deadline of its own and clears it.
	return c.call(mChannelOpen, func(b []byte) []byte { return append(b, 0) }, mChannelOpenOk)
}

// negotiateFrameMax takes the server's frame_max (at least minFrameMax,
// which handshake checks), lowered to clientFrameMax; 0 means the server
// sets no limit.
func negotiateFrameMax(server uint32) int {
	if server == 0 || server > clientFrameMax {
		return clientFrameMax
	}
	return int(server)
}

// appendStartOk appends connection.start-ok's arguments: client properties
// with the capabilities the client handles, PLAIN credentials.
func appendStartOk(b []byte, role, user, password string) []byte {
	b = appendTable(b, func(b []byte) []byte {
		b = appendTableString(b, "product", clientProduct)
		b = appendTableString(b, "platform", "Go")
		b = appendTableString(b, "connection_name", "warren-perf "+role)
		b = append(appendShortStr(b, "capabilities"), 'F')
		return appendTable(b, func(b []byte) []byte {
			b = appendTableBool(b, "publisher_confirms", true)
			b = appendTableBool(b, "consumer_cancel_notify", true)
			b = appendTableBool(b, "basic.nack", true)
			b = appendTableBool(b, "connection.blocked", true)
			// A broker that refuses the login says so with
			// connection.close instead of dropping the socket.
			return appendTableBool(b, "authentication_failure_close", true)
		})
	})
	b = appendShortStr(b, "PLAIN")
	b = appendLongStr(b, "\x00"+user+"\x00"+password)
	return appendShortStr(b, "en_US")
}

// call sends method m on the channel with the arguments args appends and
// waits for the reply want, for at most dialTimeout. Only the goroutine
// that owns reading calls it, before the connection's reader starts.
func (c *fastConn) call(m methodKey, args func([]byte) []byte, want methodKey) error {
	if err := c.sock.SetDeadline(time.Now().Add(dialTimeout)); err != nil {
		return fmt.Errorf("set deadline: %w", err)
	}
	if err := c.write(appendMethodFrame(nil, fastChannel, m, args)); err != nil {
		return err
	}
	if _, err := c.expect(fastChannel, want); err != nil {
		return err
	}
	if err := c.sock.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("clear deadline: %w", err)
	}
	return nil
}

// expect reads frames until method want arrives on channel and returns its
// arguments, which alias the read buffer. Heartbeats, blocked/unblocked and
// closes from the broker are handled on the way; anything else is a
// protocol error.
func (c *fastConn) expect(channel uint16, want methodKey) (argReader, error) {
	for {
		f, err := c.readFrame()
		if err != nil {
			return argReader{}, err
		}
		if f.typ == frameMethod && f.channel == channel {
			if k, r, err := f.method(); err == nil && k == want {
				return r, nil
			}
		}
		handled, err := c.control(f)
		if err != nil {
			return argReader{}, err
		}
		if !handled {
			return argReader{}, unexpected(f, "waiting for "+methodName(want))
		}
	}
}

// unexpected describes a frame that makes no sense where it arrived.
func unexpected(f frame, context string) error {
	if k, _, err := f.method(); err == nil {
		return fmt.Errorf("%w: unexpected %s on channel %d %s", errMalformed, methodName(k), f.channel, context)
	}
	return fmt.Errorf("%w: unexpected frame of type %d on channel %d %s", errMalformed, f.typ, f.channel, context)
}

// methodName is "class.method" by numbers, e.g. 60.80 for basic.ack.
func methodName(k methodKey) string {
	return "method " + strconv.Itoa(int(k>>16)) + "." + strconv.Itoa(int(k&0xffff))
}

// next returns the next complete frame already in the read buffer; ok is
// false when there is none. The frame aliases the buffer until fill.
func (c *fastConn) next() (f frame, ok bool, err error) {
	f, n, err := parseFrame(c.rbuf[c.rpos:c.rend], c.frameMax-frameOverhead)
	if err != nil || n == 0 {
		return frame{}, false, err
	}
	c.rpos += n
	return f, true, nil
}

// fill reads more bytes from the socket into the read buffer, keeping the
// unparsed ones (moved to the front when the buffer's tail is short).
func (c *fastConn) fill() error {
	if c.rpos == c.rend {
		c.rpos, c.rend = 0, 0
	} else if len(c.rbuf)-c.rend < c.frameMax {
		c.rend = copy(c.rbuf, c.rbuf[c.rpos:c.rend])
		c.rpos = 0
	}
	if c.rend == len(c.rbuf) {
		// Unreachable while callers parse every complete frame before
		// filling: an incomplete frame is shorter than frame_max, which
		// is at most half the buffer.
		return fmt.Errorf("%w: read buffer full without a complete frame", errMalformed)
	}
	n, err := c.sock.Read(c.rbuf[c.rend:])
	c.rend += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// readFrame returns the next frame, reading from the socket as needed.
func (c *fastConn) readFrame() (frame, error) {
	for {
		f, ok, err := c.next()
		if err != nil || ok {
			return f, err
		}
		if err := c.fill(); err != nil {
			return frame{}, fmt.Errorf("read: %w", err)
		}
	}
}

// control handles the frames every role handles alike: heartbeats,
// connection.blocked/unblocked, and closes from the broker (answered with
// close-ok and returned as a *ServerCloseError; errCloseOK for the
// close-ok to the client's own close). handled is false for any other
// frame.
func (c *fastConn) control(f frame) (handled bool, err error) {
	if f.typ == frameHeartbeat {
		return true, nil
	}
	if f.typ != frameMethod {
		return false, nil
	}
	k, r, err := f.method()
	if err != nil {
		return true, err
	}
	switch {
	case f.channel == 0 && k == mConnectionClose:
		ca, err := parseClose(r)
		if err != nil {
			return true, err
		}
		c.serverClosed.Store(true)
		// The broker closes the socket after this; a failed close-ok
		// changes nothing for the caller, who gets the broker's reason.
		_ = c.write(appendMethodFrame(nil, 0, mConnectionCloseOk, nil))
		return true, &ServerCloseError{Code: ca.code, Text: ca.text, ClassID: ca.classID, MethodID: ca.methodID, Connection: true}
	case f.channel == 0 && k == mConnectionCloseOk:
		c.serverClosed.Store(true)
		return true, errCloseOK
	case f.channel == 0 && k == mConnectionBlocked:
		c.blocked.Store(true)
		return true, nil
	case f.channel == 0 && k == mConnectionUnblocked:
		c.blocked.Store(false)
		if c.onUnblocked != nil {
			c.onUnblocked()
		}
		return true, nil
	case f.channel == fastChannel && k == mChannelClose:
		ca, err := parseClose(r)
		if err != nil {
			return true, err
		}
		if err := c.write(appendMethodFrame(nil, fastChannel, mChannelCloseOk, nil)); err != nil {
			return true, fmt.Errorf("channel closed by the broker (%w), and close-ok failed: %w",
				&ServerCloseError{Code: ca.code, Text: ca.text, ClassID: ca.classID, MethodID: ca.methodID}, err)
		}
		return true, &ServerCloseError{Code: ca.code, Text: ca.text, ClassID: ca.classID, MethodID: ca.methodID}
	}
	return false, nil
}

// write writes b whole. Safe for concurrent use.
func (c *fastConn) write(b []byte) error {
	c.wmu.Lock()
	_, err := c.sock.Write(b)
	c.wmu.Unlock()
	c.wrote.Store(true)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// startHeartbeat starts the heartbeat sender if heartbeats were
// negotiated. It is owned by the connection and stopped by stopHeartbeat.
func (c *fastConn) startHeartbeat() {
	if c.heartbeat <= 0 {
		return
	}
	c.hbWG.Add(1)
	go func() {
		defer c.hbWG.Done()
		c.sendHeartbeats()
	}()
}

// sendHeartbeats writes a heartbeat frame every half interval in which the
// connection wrote nothing else, until hbStop closes. It ends at the first
// failed write: the connection is dead and its owner will find out.
func (c *fastConn) sendHeartbeats() {
	t := time.NewTicker(c.heartbeat / 2)
	defer t.Stop()
	hb := appendHeartbeat(nil)
	for {
		select {
		case <-c.hbStop:
			return
		case <-t.C:
		}
		if c.wrote.Swap(false) {
			continue
		}
		if err := c.write(hb); err != nil {
			return
		}
	}
}

// stopHeartbeat stops the heartbeat sender and waits for it.
func (c *fastConn) stopHeartbeat() {
	c.hbOnce.Do(func() { close(c.hbStop) })
	c.hbWG.Wait()
}

// interruptRead makes a blocked read return at once, unless close has
// taken over the read deadline.
func (c *fastConn) interruptRead() {
	c.dlMu.Lock()
	defer c.dlMu.Unlock()
	if !c.closing {
		// A failed deadline change means the socket is closed, which
		// interrupts the read as well.
		_ = c.sock.SetReadDeadline(time.Now())
	}
}

// beginClose sends connection.close (unless the broker already closed the
// connection) and sets deadlines so that the close handshake ends within
// closeTimeout. It reports whether a close-ok is to be awaited.
func (c *fastConn) beginClose() (bool, error) {
	c.dlMu.Lock()
	c.closing = true
	c.dlMu.Unlock()
	if c.serverClosed.Load() || c.aborted.Load() {
		return false, nil
	}
	if err := c.sock.SetDeadline(time.Now().Add(closeTimeout)); err != nil {
		return false, c.closeErr(fmt.Errorf("set close deadline: %w", err))
	}
	if err := c.write(appendClose(nil, 0, replySuccess, "warren-perf done")); err != nil {
		return false, c.closeErr(err)
	}
	return true, nil
}

// finishClose stops the heartbeat sender and closes the socket.
func (c *fastConn) finishClose() error {
	c.stopHeartbeat()
	return c.closeErr(ignoreClosed(c.sock.Close()))
}

// closeErr wraps a close error, or drops it if the connection was aborted
// (its errors are expected then).
func (c *fastConn) closeErr(err error) error {
	if err == nil || c.aborted.Load() {
		return nil
	}
	return fmt.Errorf("close connection: %w", err)
}

// closeAsReader closes the connection from the goroutine that owns
// reading: it sends connection.close and reads until close-ok, dropping
// whatever else arrives (deliveries in flight), for at most closeTimeout.
func (c *fastConn) closeAsReader() error {
	wait, err := c.beginClose()
	for wait && err == nil {
		var f frame
		if f, err = c.readFrame(); err != nil {
			err = c.closeErr(err)
			break
		}
		if f.typ != frameMethod || f.channel != 0 {
			continue
		}
		if _, cerr := c.control(f); cerr != nil {
			if !errors.Is(cerr, errCloseOK) {
				// The broker closed the connection first; the run's
				// own error, if any, is reported by the caller.
				var sce *ServerCloseError
				if !errors.As(cerr, &sce) {
					err = c.closeErr(cerr)
				}
			}
			break
		}
	}
	return errors.Join(err, c.finishClose())
}

// abort closes the socket under the connection, which fails any read or
// write in progress. A socket that is already closed is not an error.
func (c *fastConn) abort() error {
	c.aborted.Store(true)
	err := c.sock.Close()
	// The sender's next write fails on the closed socket; stop it now
	// rather than at its next tick.
	c.stopHeartbeat()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("abort connection: %w", err)
	}
	return nil
}
