package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// RPCHandler answers one request of a method. from is the calling node's
// name. An error whose sentinel is one of this package's is delivered to the
// caller as that sentinel; any other error as its message.
type RPCHandler func(ctx context.Context, from string, payload []byte) ([]byte, error)

// MaxRPCFrame bounds one rpc request or response: a message body of up
// to 512 MiB (the broker's max-message-size ceiling, as RabbitMQ's) with
// 1 MiB for everything around it, so the broker forwards any message it
// accepts in one frame. A peer is authenticated before it may send one;
// the reader allocates a frame's length only once its header is read.
const MaxRPCFrame = 513 << 20

const (
	maxRPCFrame       = MaxRPCFrame
	maxRPCConcurrency = 64  // requests served at once per connection
	rpcWriteQueue     = 256 // frames waiting for a connection's writer
	frameRequest      = 1
	frameResponse     = 2
)

// errNotSent marks an RPC failure before the request left this node (dial,
// handshake, or a connection already known dead), so the caller may send
// it again without risking a duplicate.
var errNotSent = errors.New("cluster: rpc request not sent")

func notSent(err error) error {
	if errors.Is(err, ErrShutdown) {
		return err
	}
	return fmt.Errorf("%w: %w", errNotSent, err)
}

// RemoteError is a refusal from the remote handler that is not one of the
// package's sentinels.
type RemoteError struct {
	Node, Method, Msg string
}

func (e *RemoteError) Error() string { return fmt.Sprintf("%s on %s: %s", e.Method, e.Node, e.Msg) }

// rpc is the request/response facility of the rpc connection class:
// requests carry an id, a method, a deadline and a payload; responses come
// back on the same connection in any order. One connection per peer.
type rpc struct {
	t        *Transport
	timeout  time.Duration
	mu       sync.Mutex
	handlers map[string]RPCHandler
	clients  map[string]*rpcClientConn
	closed   bool
	wg       sync.WaitGroup // client reader goroutines
}

func newRPC(t *Transport, timeout time.Duration) *rpc {
	r := &rpc{t: t, timeout: timeout, handlers: make(map[string]RPCHandler), clients: make(map[string]*rpcClientConn)}
	t.Handle(ClassRPC, r.serve)
	return r
}

func (r *rpc) handle(method string, h RPCHandler) {
	r.mu.Lock()
	r.handlers[method] = h
	r.mu.Unlock()
}

type rpcResponse struct {
	code    uint8
	msg     string
	payload []byte
	err     error // transport failure
}

// rpcClientConn is one connection to a peer: callers queue frames to its
// writer goroutine (no socket I/O under a lock) and its reader goroutine
// hands each response to the caller waiting for that id.
type rpcClientConn struct {
	conn    net.Conn
	out     chan []byte
	closed  chan struct{} // closed by drop
	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan rpcResponse
	dead    error
}

// call sends one request to addr and waits for its response or ctx.
func (r *rpc) call(ctx context.Context, addr, method string, payload []byte) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	c, err := r.client(ctx, addr)
	if err != nil {
		return nil, notSent(err)
	}
	id, ch, err := c.register()
	if err != nil {
		return nil, notSent(err)
	}
	defer c.unregister(id)
	dl, _ := ctx.Deadline()
	frame := binary.BigEndian.AppendUint64([]byte{frameRequest}, id)
	frame = binary.BigEndian.AppendUint64(frame, uint64(dl.UnixMilli()))
	frame = append(appendField(frame, method), payload...)
	select {
	case c.out <- frame:
	case <-c.closed:
		return nil, notSent(c.deadErr())
	case <-ctx.Done():
		return nil, notSent(ctx.Err())
	}
	select {
	case resp := <-ch:
		if resp.err != nil {
			return nil, resp.err
		}
		return resp.payload, decodeRemoteError(addr, method, resp.code, resp.msg)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func decodeRemoteError(addr, method string, code uint8, msg string) error {
	switch {
	case code == 0 && msg == "":
		return nil
	case int(code) < len(rpcErrorCodes) && rpcErrorCodes[code] != nil:
		sentinel := rpcErrorCodes[code]
		if msg == sentinel.Error() {
			return sentinel
		}
		if rest, ok := strings.CutPrefix(msg, sentinel.Error()+": "); ok {
			return fmt.Errorf("%w: %s", sentinel, rest)
		}
		return fmt.Errorf("%w (%s)", sentinel, msg)
	default:
		return &RemoteError{Node: addr, Method: method, Msg: msg}
	}
}

func (r *rpc) client(ctx context.Context, addr string) (*rpcClientConn, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrShutdown
	}
	if c := r.clients[addr]; c != nil {
		r.mu.Unlock()
		return c, nil
	}
	r.mu.Unlock()
	conn, err := r.t.Dial(ctx, addr, ClassRPC)
	if err != nil {
		return nil, err
	}
	c := &rpcClientConn{conn: conn, out: make(chan []byte, rpcWriteQueue), closed: make(chan struct{}), pending: make(map[uint64]chan rpcResponse)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		conn.Close()
		return nil, ErrShutdown
	}
	if old := r.clients[addr]; old != nil { // lost a dial race: keep the first
		conn.Close()
		return old, nil
	}
	r.clients[addr] = c
	r.wg.Add(2)
	go r.readResponses(addr, c)
	go r.writeRequests(addr, c)
	return c, nil
}

func (c *rpcClientConn) register() (uint64, chan rpcResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead != nil {
		return 0, nil, c.dead
	}
	c.nextID++
	ch := make(chan rpcResponse, 1)
	c.pending[c.nextID] = ch
	return c.nextID, ch, nil
}

func (c *rpcClientConn) unregister(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *rpcClientConn) deadErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// writeRequests writes queued frames until the connection is dropped.
func (r *rpc) writeRequests(addr string, c *rpcClientConn) {
	defer r.wg.Done()
	for {
		select {
		case <-c.closed:
			return
		case frame := <-c.out:
			c.conn.SetWriteDeadline(time.Now().Add(r.timeout))
			if err := writeFrame(c.conn, frame); err != nil {
				r.drop(addr, c, fmt.Errorf("cluster: rpc connection to %s: %w", addr, err))
				return
			}
		}
	}
}

func (r *rpc) readResponses(addr string, c *rpcClientConn) {
	defer r.wg.Done()
	br := bufio.NewReader(c.conn)
	for {
		body, err := readFrame(br)
		if err != nil {
			r.drop(addr, c, fmt.Errorf("cluster: rpc connection to %s: %w", addr, err))
			return
		}
		if len(body) < 1+8+1+2 || body[0] != frameResponse {
			r.drop(addr, c, fmt.Errorf("cluster: rpc connection to %s: malformed response", addr))
			return
		}
		id := binary.BigEndian.Uint64(body[1:])
		code := body[9]
		n := int(binary.BigEndian.Uint16(body[10:]))
		if len(body) < 12+n {
			r.drop(addr, c, fmt.Errorf("cluster: rpc connection to %s: malformed response", addr))
			return
		}
		resp := rpcResponse{code: code, msg: string(body[12 : 12+n]), payload: body[12+n:]}
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch != nil {
			ch <- resp // buffered 1, one response per id
		}
	}
}

// drop forgets a failed client connection and fails its pending calls.
func (r *rpc) drop(addr string, c *rpcClientConn, err error) {
	r.mu.Lock()
	if r.clients[addr] == c {
		delete(r.clients, addr)
	}
	r.mu.Unlock()
	c.conn.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead == nil {
		c.dead = err
		close(c.closed)
	}
	for id, ch := range c.pending {
		ch <- rpcResponse{err: err}
		delete(c.pending, id)
	}
}

// close closes client connections and waits for their readers; server
// connections are closed by the Transport.
func (r *rpc) close() {
	r.mu.Lock()
	r.closed = true
	clients := r.clients
	r.clients = map[string]*rpcClientConn{}
	r.mu.Unlock()
	for addr, c := range clients {
		r.drop(addr, c, ErrShutdown)
	}
	r.wg.Wait()
}

// serve answers requests on one inbound connection until it closes:
// handlers run concurrently (at most maxRPCConcurrency) and queue their
// responses to one writer goroutine.
func (r *rpc) serve(conn net.Conn, from peerInfo) {
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, maxRPCConcurrency)
		out  = make(chan []byte, rpcWriteQueue)
		done = make(chan struct{})
	)
	ctx, cancel := context.WithCancel(context.Background())
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.writeResponses(conn, out, done)
	}()
	defer func() {
		cancel()
		conn.Close()
		close(done)
		wg.Wait()
	}()
	br := bufio.NewReader(conn)
	for {
		body, err := readFrame(br)
		if err != nil {
			return
		}
		id, deadline, method, payload, err := parseRequest(body)
		if err != nil {
			r.t.log.Warn("malformed rpc request", "from", from.name, "error", err)
			return
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			frame := binary.BigEndian.AppendUint64([]byte{frameResponse}, id)
			frame = append(frame, r.dispatch(ctx, from.name, method, deadline, payload)...)
			select {
			case out <- frame:
			case <-ctx.Done():
			}
		}()
	}
}

// writeResponses writes queued responses until done; a write error closes
// the connection, which ends serve's read loop.
func (r *rpc) writeResponses(conn net.Conn, out <-chan []byte, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case frame := <-out:
			conn.SetWriteDeadline(time.Now().Add(r.timeout))
			if err := writeFrame(conn, frame); err != nil {
				conn.Close()
				return
			}
		}
	}
}

// dispatch runs the handler and encodes code, message and payload.
func (r *rpc) dispatch(ctx context.Context, from, method string, deadline time.Time, payload []byte) []byte {
	r.mu.Lock()
	h := r.handlers[method]
	r.mu.Unlock()
	var (
		out []byte
		err = fmt.Errorf("%w %q", ErrNoHandler, method)
	)
	if h != nil {
		hctx, cancel := context.WithDeadline(ctx, deadline)
		out, err = h(hctx, from, payload)
		cancel()
	}
	var code uint8
	var msg string
	if err != nil {
		code, msg = errorCode(err), err.Error()
		if len(msg) > 65535 {
			msg = msg[:65535]
		}
	}
	b := []byte{code}
	b = binary.BigEndian.AppendUint16(b, uint16(len(msg)))
	return append(append(b, msg...), out...)
}

func parseRequest(body []byte) (uint64, time.Time, string, []byte, error) {
	if len(body) < 1+8+8+1 || body[0] != frameRequest {
		return 0, time.Time{}, "", nil, errors.New("short or not a request")
	}
	id := binary.BigEndian.Uint64(body[1:])
	dl := time.UnixMilli(int64(binary.BigEndian.Uint64(body[9:])))
	n := int(body[17])
	if len(body) < 18+n {
		return 0, time.Time{}, "", nil, errors.New("truncated method")
	}
	return id, dl, string(body[18 : 18+n]), body[18+n:], nil
}

func writeFrame(w io.Writer, body []byte) error {
	if len(body) > maxRPCFrame {
		return fmt.Errorf("cluster: rpc frame of %d bytes exceeds %d", len(body), maxRPCFrame)
	}
	if len(body) > 1<<20 {
		// Not copied: a large body goes after its header in one writev.
		bufs := net.Buffers{binary.BigEndian.AppendUint32(nil, uint32(len(body))), body}
		_, err := bufs.WriteTo(w)
		return err
	}
	buf := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	_, err := w.Write(append(buf, body...))
	return err
}

func readFrame(br *bufio.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxRPCFrame {
		return nil, fmt.Errorf("rpc frame of %d bytes exceeds %d", n, maxRPCFrame)
	}
	body := make([]byte, n)
	_, err := io.ReadFull(br, body)
	return body, err
}
