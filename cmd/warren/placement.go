package main

import (
	"hash/fnv"
	"slices"

	"github.com/warrenmq/warren/server"
)

// In a cluster every node has every shovel parameter and every federation
// policy; each worker must run on one node only, or each message would
// move once per node. Like RabbitMQ (a dynamic shovel on one node, a
// federation link where its downstream queue lives), each node decides
// from what every node sees alike: the queue's home node when the worker
// reads or feeds a queue of this broker and that home is alive, else the
// node a rendezvous hash of the worker's name picks among the alive nodes
// (highest random weight: when a node goes, only its workers move, and
// every node computes the same winner from the same member list).

// runsHere is the Here hook of the shovel and federation runners.
func runsHere(srv *server.Server, key, vhost, queue string) bool {
	return runner(srv.AliveNodes(), queueHome(srv, vhost, queue), key) == srv.NodeName()
}

// runner is the node that runs the worker named key: home when it is
// alive, else the alive node with the highest weight for key.
func runner(alive []string, home, key string) string {
	if home != "" && slices.Contains(alive, home) {
		return home
	}
	best, bestWeight := "", uint64(0)
	for _, node := range alive {
		if w := weight(node, key); best == "" || w > bestWeight || (w == bestWeight && node < best) {
			best, bestWeight = node, w
		}
	}
	return best
}

// weight is node's rendezvous weight for key: FNV-1a of both, finished
// with splitmix64's mixer so that names differing in one byte spread.
func weight(node, key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(node))
	h.Write([]byte{0})
	h.Write([]byte(key))
	z := h.Sum64()
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// queueHome is the node holding the data of queue in vhost, "" when there
// is no such queue (or no queue is named).
func queueHome(srv *server.Server, vhost, queue string) string {
	if queue == "" {
		return ""
	}
	vh := srv.Vhost(vhost)
	if vh == nil {
		return ""
	}
	q := vh.LookupQueue(queue)
	if q == nil {
		return ""
	}
	return q.HomeNode(srv.NodeName())
}
