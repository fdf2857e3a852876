package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Transport is the node's one cluster port: a TCP listener whose every
// connection is authenticated and then handed to the plane its class byte
// names, and the UDP socket on the same port number for gossip packets.
type Transport struct {
	ln      net.Listener
	udp     *net.UDPConn
	key     []byte
	cluster string
	self    peerInfo
	faults  *Faults
	timeout time.Duration
	log     *slog.Logger

	mu       sync.Mutex
	handlers map[byte]func(net.Conn, peerInfo)
	conns    map[net.Conn]struct{} // inbound connections still in handshake or a handler of ours
	refused  map[string]time.Time  // cluster address → its latest refused dial (refused.go)

	authFailures atomic.Uint64

	shutdown chan struct{}
	wg       sync.WaitGroup
}

// listenTCPAndUDP binds TCP and UDP on the same port. With port 0 the
// kernel's TCP choice may be taken for UDP, so it retries a few times.
func listenTCPAndUDP(bind string) (net.Listener, *net.UDPConn, error) {
	var lastErr error
	for range 10 {
		ln, err := net.Listen("tcp", bind)
		if err != nil {
			return nil, nil, err
		}
		tcpAddr := ln.Addr().(*net.TCPAddr)
		udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: tcpAddr.IP, Port: tcpAddr.Port})
		if err == nil {
			return ln, udp, nil
		}
		ln.Close()
		lastErr = err
		if _, port, _ := net.SplitHostPort(bind); port != "0" {
			break
		}
	}
	return nil, nil, fmt.Errorf("cluster: bind UDP on the cluster port: %w", lastErr)
}

func newTransport(cfg *Config, k keys, log *slog.Logger) (*Transport, error) {
	ln, udp, err := listenTCPAndUDP(cfg.BindAddr)
	if err != nil {
		return nil, err
	}
	adv := cfg.AdvertiseAddr
	if adv == "" {
		adv = ln.Addr().String()
	}
	t := &Transport{
		ln: ln, udp: udp, key: k.auth, cluster: cfg.ClusterName,
		self:     peerInfo{name: cfg.NodeName, addr: adv},
		faults:   cfg.Faults,
		timeout:  cfg.HandshakeTimeout,
		log:      log,
		handlers: make(map[byte]func(net.Conn, peerInfo)),
		conns:    make(map[net.Conn]struct{}),
		refused:  make(map[string]time.Time),
		shutdown: make(chan struct{}),
	}
	return t, nil
}

// start begins accepting; handlers must be registered before.
func (t *Transport) start() {
	t.wg.Add(1)
	go t.acceptLoop()
}

// Addr is the advertised cluster address.
func (t *Transport) Addr() string { return t.self.addr }

// AuthFailures counts connections, inbound or outbound, refused by
// authentication.
func (t *Transport) AuthFailures() uint64 { return t.authFailures.Load() }

// Handle registers the handler for a connection class. The handler owns the
// connection; it runs on a goroutine the Transport waits for at close, and
// it must return when the connection is closed.
func (t *Transport) Handle(class byte, h func(conn net.Conn, from peerInfo)) {
	t.mu.Lock()
	t.handlers[class] = h
	t.mu.Unlock()
}

func (t *Transport) acceptLoop() {
	defer t.wg.Done()
	for {
		conn, err := t.ln.Accept()
		if err != nil {
			select {
			case <-t.shutdown:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			t.log.Error("cluster listener failed", "error", err)
			return
		}
		if !t.track(conn) {
			conn.Close()
			return
		}
		t.wg.Add(1)
		go t.serveConn(conn)
	}
}

// track records an inbound connection so close can interrupt it; false
// after shutdown.
func (t *Transport) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.shutdown:
		return false
	default:
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *Transport) untrack(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}

// serveConn authenticates conn and hands it to its class's handler. The
// connection stays tracked until its owner closes it, so close can end
// even the readers of connections handed to Raft and memberlist (Raft's
// NetworkTransport does not close its inbound connections itself).
func (t *Transport) serveConn(conn net.Conn) {
	defer t.wg.Done()
	peer, class, br, err := handshakeAccept(conn, t.key, t.cluster, t.self, t.timeout)
	if err != nil {
		t.untrack(conn)
		if errors.Is(err, ErrAuthFailed) {
			t.authFailures.Add(1)
			t.log.Warn("cluster connection refused", "remote", conn.RemoteAddr().String(), "error", err)
		} else {
			t.log.Debug("cluster handshake failed", "remote", conn.RemoteAddr().String(), "error", err)
		}
		conn.Close()
		return
	}
	t.noteContact(peer.addr)
	t.mu.Lock()
	h := t.handlers[class]
	t.mu.Unlock()
	if h == nil {
		t.log.Warn("cluster connection of unknown class", "remote", peer.name, "class", class)
		t.untrack(conn)
		conn.Close()
		return
	}
	h(t.faults.wrap(&bufConn{Conn: conn, r: br, t: t}, t.self.addr, peer.addr), peer)
}

// Dial opens an authenticated connection of class to addr.
func (t *Transport) Dial(ctx context.Context, addr string, class byte) (net.Conn, error) {
	select {
	case <-t.shutdown:
		return nil, ErrShutdown
	default:
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	t.noteDial(addr, err)
	if err != nil {
		return nil, err
	}
	timeout := t.timeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
	}
	// The handshake itself is subject to faults too: a cut pair cannot
	// even authenticate.
	fc := t.faults.wrap(conn, t.self.addr, addr)
	if _, err := handshakeDial(fc, t.key, t.cluster, t.self, class, timeout); err != nil {
		conn.Close()
		if errors.Is(err, ErrAuthFailed) {
			t.authFailures.Add(1)
			t.log.Warn("cluster connection refused", "remote", addr, "error", err)
		}
		return nil, err
	}
	return fc, nil
}

// close stops accepting, closes inbound connections and waits for every
// goroutine of the transport and its handlers.
func (t *Transport) close() {
	t.mu.Lock()
	select {
	case <-t.shutdown:
		t.mu.Unlock()
		return
	default:
	}
	close(t.shutdown)
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.ln.Close()
	t.udp.Close()
	t.wg.Wait()
}

// bufConn is an inbound connection after its handshake: it reads first
// what the handshake's reader buffered, and closing it untracks it.
type bufConn struct {
	net.Conn
	r *bufio.Reader
	t *Transport
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *bufConn) Close() error {
	c.t.untrack(c.Conn)
	return c.Conn.Close()
}
