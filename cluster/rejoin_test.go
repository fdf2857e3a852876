package cluster

import (
	"fmt"
	"testing"
	"time"
)

// A node restarted on its data is in the Raft configuration from its own
// log, so the join loop has nothing to do; it must still join the gossip
// of its peers at once, not at the next ReconnectInterval (30 s by
// default). Until it does it counts every peer not alive: warren-chaos
// crash seed 1 had a restarted node, elected metadata leader, refuse to
// elect a live in-sync replica for 17 s ("no live in-sync replica") and
// nack every forwarded publish ("not a cluster member") for 24 s. The
// interval is an hour here, so only the start can join, and the peers
// gossip nothing to a dead node (memberlist's GossipToTheDeadTime, 30 s
// in its LAN defaults: the chaos node restarted 30 s after its kill).
func TestRestartedNodeJoinsGossipAtOnce(t *testing.T) {
	nodes := startCluster(t, 3, 3, nil, func(c *Config) {
		c.ReconnectInterval = time.Hour
		c.Gossip.GossipToTheDeadTime = 0
	})
	checkFormed(t, nodes, 3, 15*time.Second)
	down := nodes[2]
	if err := down.Shutdown(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, func() string {
		for _, n := range nodes[:2] {
			for _, m := range n.Members() {
				if m.Name == down.Name() && m.State == StateAlive {
					return fmt.Sprintf("%s still sees %s alive", n.Name(), m.Name)
				}
			}
		}
		return ""
	})
	back := down.restart(t)
	eventually(t, 5*time.Second, func() string {
		alive := 0
		for _, m := range back.Members() {
			if m.State == StateAlive {
				alive++
			}
		}
		if alive != 3 {
			return fmt.Sprintf("the restarted node sees %d of 3 members alive: %v", alive, back.Members())
		}
		return ""
	})
}
