package cluster

import (
	"context"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// raftLayer is the raft.StreamLayer of the raft connection class: Accept
// returns inbound connections the Transport authenticated, Dial opens
// authenticated ones (Consul's RaftLayer, with the class byte after the
// proof instead of first).
type raftLayer struct {
	t      *Transport
	accept chan net.Conn
	addr   net.Addr
}

func newRaftLayer(t *Transport) *raftLayer {
	l := &raftLayer{t: t, accept: make(chan net.Conn), addr: stringAddr(t.Addr())}
	t.Handle(ClassRaft, func(conn net.Conn, _ peerInfo) {
		select {
		case l.accept <- conn:
		case <-t.shutdown:
			conn.Close()
		}
	})
	return l
}

func (l *raftLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.accept:
		return c, nil
	case <-l.t.shutdown:
		return nil, ErrShutdown
	}
}

// Close is a no-op: the node closes the Transport after Raft has stopped.
func (l *raftLayer) Close() error { return nil }

func (l *raftLayer) Addr() net.Addr { return l.addr }

func (l *raftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return l.t.Dial(ctx, string(address), ClassRaft)
}

// stringAddr is a net.Addr of an advertised host:port.
type stringAddr string

func (a stringAddr) Network() string { return "tcp" }
func (a stringAddr) String() string  { return string(a) }
