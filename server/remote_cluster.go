package server

import (
	"context"
	"fmt"

	"github.com/warrenmq/warren/cluster"
)

// clusterPeers is the remote-queue plane over a cluster node's rpc plane
// (authenticated, one connection per peer for the rpc class): calls go to
// a node by name, at the address gossip last gave for it.
type clusterPeers struct{ n *cluster.Node }

// Call sends one request to node; a node gossip does not know as alive is
// not called (its queues answer as down at once).
func (p clusterPeers) Call(ctx context.Context, node, method string, payload []byte) ([]byte, error) {
	for _, m := range p.n.Members() {
		if m.Name == node {
			if m.State != cluster.StateAlive {
				return nil, fmt.Errorf("server: node %s is %s", node, m.State)
			}
			return p.n.CallRPC(ctx, m.Addr, method, payload)
		}
	}
	return nil, fmt.Errorf("server: node %s is not a cluster member", node)
}

// Handle registers h for method on the node's rpc plane.
func (p clusterPeers) Handle(method string, h peerHandler) {
	p.n.HandleRPC(method, cluster.RPCHandler(h))
}

// ServeRemoteQueues makes s serve queues homed on other nodes of n's
// cluster, and its own queues to them, over n's rpc plane. The cluster
// wiring calls it once n runs and before clients connect.
func (s *Server) ServeRemoteQueues(n *cluster.Node) {
	p := clusterPeers{n}
	s.enableRemoteQueues(n.Name(), p, p)
}
