package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/cluster"
)

// clusterPeers is the remote-queue plane over a cluster node's rpc plane
// (authenticated, one connection per peer for the rpc class): calls go to
// a node by name, at the address gossip last gave for it. It exists before
// the node does — Raft replays definitions, making remote queues, while
// cluster.New runs — so it is bound to the node by bind; until then calls
// fail (the queue answers as its home being down) and handlers wait.
type clusterPeers struct {
	node    atomic.Pointer[cluster.Node]
	mu      sync.Mutex
	pending map[string]peerHandler // registered before bind
}

// Call sends one request to node; a node gossip does not know as alive is
// not called (its queues answer as down at once).
func (p *clusterPeers) Call(ctx context.Context, node, method string, payload []byte) ([]byte, error) {
	n := p.node.Load()
	if n == nil {
		return nil, fmt.Errorf("server: the cluster node is not started")
	}
	for _, m := range n.Members() {
		if m.Name == node {
			if m.State != cluster.StateAlive {
				return nil, fmt.Errorf("server: node %s is %s", node, m.State)
			}
			return n.CallRPC(ctx, m.Addr, method, payload)
		}
	}
	return nil, fmt.Errorf("server: node %s is not a cluster member", node)
}

// Handle registers h for method on the node's rpc plane, at once or when
// the node is bound.
func (p *clusterPeers) Handle(method string, h peerHandler) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := p.node.Load(); n != nil {
		n.HandleRPC(method, cluster.RPCHandler(h))
		return
	}
	if p.pending == nil {
		p.pending = make(map[string]peerHandler)
	}
	p.pending[method] = h
}

// bind attaches the started node and registers the waiting handlers.
func (p *clusterPeers) bind(n *cluster.Node) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for method, h := range p.pending {
		n.HandleRPC(method, cluster.RPCHandler(h))
	}
	p.pending = nil
	p.node.Store(n)
}

// ServeRemoteQueues makes s serve queues homed on other nodes of n's
// cluster, and its own queues to them, over n's rpc plane, for a server
// whose cluster node was started outside it (tests). A server configured
// with Config.Cluster does this itself.
func (s *Server) ServeRemoteQueues(n *cluster.Node) {
	p := &clusterPeers{}
	p.bind(n)
	s.enableRemoteQueues(n.Name(), p, p)
}
