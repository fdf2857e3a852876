package server

import (
	"math"
	"net"
	"sync/atomic"
	"syscall"
)

// The descriptor budget. Sockets and files share the process's descriptor
// limit; a socket flood that reaches it makes every open fail with EMFILE,
// files (queue indexes, segments, meta.db) as much as sockets. As RabbitMQ's
// file handle cache does, the broker reads the limit at start and gives
// sockets a share of it: sockets past the share are closed right after
// accept, so sockets alone never use up the descriptors. Every socket the
// broker accepts counts: AMQP and AMQPS connections from the first byte of
// their handshake, and the management and metrics HTTP connections through
// SocketListener.
//
// RLIMIT_NOFILE's soft limit is already raised to the hard limit by the Go
// runtime at start (since Go 1.19); the broker only reads it.

// socketShare returns the sockets a descriptor limit allows, by RabbitMQ
// 3.10's file_handle_cache: its limit is the descriptor limit less 97, and
// sockets get trunc(limit × 0.9 − 2) of it (a limit of 20,000 gives 17,910
// sockets, 1,024 gives 832). The rest stays for files and the runtime.
func socketShare(fdLimit uint64) int64 {
	if fdLimit == 0 || fdLimit > math.MaxInt32 {
		return 0 // unknown or unbounded: no budget
	}
	limit := max(2, int64(fdLimit)-97)
	return max(0, int64(float64(limit)*0.9-2))
}

// descriptorLimit returns the process's soft RLIMIT_NOFILE, or 0 when it
// cannot be read.
func descriptorLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}

// fdBudget counts the sockets open against the socket share.
type fdBudget struct {
	fdLimit uint64 // RLIMIT_NOFILE at start; 0 when unknown
	sockets int64  // the share; 0 = no budget
	used    atomic.Int64
}

func newFDBudget(fdLimit uint64) *fdBudget {
	return &fdBudget{fdLimit: fdLimit, sockets: socketShare(fdLimit)}
}

// take counts one socket and reports whether it fits the share. Every
// successful take must be released.
func (b *fdBudget) take() bool {
	n := b.used.Add(1)
	if b.sockets > 0 && n > b.sockets {
		b.used.Add(-1)
		return false
	}
	return true
}

func (b *fdBudget) release() { b.used.Add(-1) }

// Descriptors is the node's descriptor budget, as /api/nodes shows it.
type Descriptors struct {
	Limit        uint64 // RLIMIT_NOFILE read at start (fd_total); 0 when unknown
	SocketsLimit int64  // sockets allowed at once (sockets_total); 0 = no budget
	SocketsUsed  int64  // sockets open now, AMQP and HTTP (sockets_used)
}

// Descriptors returns the descriptor budget and the sockets counted in it.
func (s *Server) Descriptors() Descriptors {
	return Descriptors{Limit: s.fds.fdLimit, SocketsLimit: s.fds.sockets, SocketsUsed: s.fds.used.Load()}
}

// SocketListener wraps an HTTP server's listener so its connections count
// against the node's socket share: a connection past it is closed at once
// (logged at most once a second) and Accept waits for the next one.
func (s *Server) SocketListener(ln net.Listener) net.Listener {
	return &budgetListener{Listener: ln, srv: s}
}

type budgetListener struct {
	net.Listener
	srv *Server
}

func (l *budgetListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.srv.fds.take() {
			return &budgetConn{Conn: nc, fds: l.srv.fds}, nil
		}
		l.srv.refuseSocket(nc, refusedSocketShare)
	}
}

// budgetConn gives its socket's place in the share back on its first Close.
type budgetConn struct {
	net.Conn
	fds    *fdBudget
	closed atomic.Bool
}

func (c *budgetConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.fds.release()
	}
	return c.Conn.Close()
}
