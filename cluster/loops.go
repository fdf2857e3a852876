package cluster

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/hashicorp/raft"
)

// joinRetry is how often a node without Raft state tries to bootstrap or to
// be added by the leader.
const joinRetry = 250 * time.Millisecond

// followLeadership turns Raft's ordered NotifyCh into the LeaderCh of the
// controller (latest value wins) and resets the leader's promotion clock.
func (n *Node) followLeadership() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case isLeader := <-n.notifyCh:
			n.log.Info("raft leadership changed", "leader", isLeader)
			n.mu.Lock()
			clear(n.stableFor)
			n.mu.Unlock()
			select { // keep only the latest value for a slow reader
			case <-n.leaderCh:
			default:
			}
			n.leaderCh <- isLeader
		}
	}
}

// joinLoop runs until the node is in the Raft configuration: it joins the
// seeds' gossip, asks a node that has Raft state to add it, or, when no
// node has any and BootstrapExpect nodes are alive, lets the node with the
// lowest server id bootstrap them all, so exactly one node does.
func (n *Node) joinLoop() {
	defer n.wg.Done()
	defer close(n.joinDone)
	t := time.NewTicker(joinRetry)
	defer t.Stop()
	for {
		if n.refreshMeta() || n.leaving.Load() {
			return
		}
		n.tryJoinOrBootstrap()
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
	}
}

// refreshMeta gossips this node's Raft flags and reports whether it is in
// the Raft configuration.
func (n *Node) refreshMeta() bool {
	servers, err := n.servers()
	if err != nil {
		return false
	}
	inRaft, voter := false, false
	for _, s := range servers {
		if s.ID == n.sid {
			inRaft, voter = true, s.Suffrage == raft.Voter
		}
	}
	err = n.mem.update(func(m *localMeta) { m.inRaft, m.voter = inRaft || m.inRaft, voter }, n.cfg.RPCTimeout)
	if err != nil {
		n.log.Debug("gossip meta update", "error", err)
	}
	return inRaft
}

func (n *Node) tryJoinOrBootstrap() {
	var others, inRaft []Member
	for _, m := range n.mem.list() {
		if m.State != StateAlive || m.Name == n.cfg.NodeName {
			continue
		}
		others = append(others, m)
		if m.InRaft {
			inRaft = append(inRaft, m)
		}
	}
	if len(others) == 0 {
		n.joinSeeds()
	}
	switch {
	case len(inRaft) > 0:
		n.askToJoin(inRaft)
	case n.cfg.BootstrapExpect > 0 && len(others)+1 >= n.cfg.BootstrapExpect:
		self, _ := n.mem.get(n.cfg.NodeName)
		self.Addr, self.ID = n.Addr(), n.id
		all := append(others, self)
		servers := bootstrapServers(all)
		if servers[0].ID != n.sid {
			return // the lowest id bootstraps
		}
		n.log.Info("bootstrapping the metadata raft group", "servers", len(servers))
		err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
		switch {
		case err == nil:
			n.bootstrapped.Store(true)
		case !errors.Is(err, raft.ErrCantBootstrap):
			n.log.Error("raft bootstrap failed", "error", err)
		}
	}
}

func (n *Node) joinSeeds() {
	var seeds []string
	for _, s := range n.cfg.Seeds {
		if s != n.Addr() {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return
	}
	if _, err := n.ml.Join(seeds); err != nil {
		n.log.Debug("joining seeds", "error", err)
	}
}

// askToJoin asks nodes that are in Raft (any of them forwards to the
// leader) to add this node.
func (n *Node) askToJoin(peers []Member) {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RPCTimeout)
	defer cancel()
	payload := encodeJoin(n.cfg.NodeName, n.id, n.Addr())
	var err error
	for _, p := range peers {
		if _, err = n.rpc.call(ctx, p.Addr, methodJoin, payload); err == nil {
			break
		}
	}
	n.mu.Lock()
	changed := (err == nil) != (n.joinErr == nil) || (err != nil && err.Error() != n.joinErr.Error())
	n.joinErr = err
	n.mu.Unlock()
	if changed && err != nil {
		n.log.Warn("raft join refused", "error", err)
	}
}

// reconnectLoop joins, at start and then every ReconnectInterval, the
// seeds and the Raft servers gossip does not see alive, since memberlist
// does not heal a long partition by itself (Serf's reconnect). The pass at
// start is the only join of a restarted node: it is in the Raft
// configuration already, so joinLoop returns at once, and peers that
// declared it dead gossip nothing to it; without it the node counted its
// peers dead for up to an interval.
func (n *Node) reconnectLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.ReconnectInterval)
	defer t.Stop()
	for {
		n.reconnect()
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
	}
}

// reconnect joins the seeds and Raft servers gossip does not see alive.
func (n *Node) reconnect() {
	alive := make(map[string]bool)
	for _, m := range n.mem.list() {
		if m.State == StateAlive {
			alive[m.Addr] = true
		}
	}
	targets := map[string]bool{}
	for _, s := range n.cfg.Seeds {
		targets[s] = true
	}
	if servers, err := n.servers(); err == nil {
		for _, s := range servers {
			targets[string(s.Address)] = true
		}
	}
	var addrs []string
	for a := range targets {
		if a != n.Addr() && !alive[a] {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) > 0 {
		if _, err := n.ml.Join(addrs); err != nil {
			n.log.Debug("reconnect", "addrs", addrs, "error", err)
		}
	}
}

// reconcileLoop keeps this node's gossiped flags current and, on the
// leader, promotes stable non-voters and follows moved addresses.
func (n *Node) reconcileLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		n.refreshMeta()
		if n.raft.State() == raft.Leader {
			n.reconcile()
		}
	}
}

// reconcile promotes non-voters that have been alive for PromoteAfter
// while voters are fewer than voterTarget. Failed voters are never removed
// automatically (Forget does it), so a suspicion never shrinks the quorum.
func (n *Node) reconcile() {
	servers, err := n.servers()
	if err != nil {
		return
	}
	alive := make(map[string]Member)
	for _, m := range n.mem.list() {
		if m.State == StateAlive {
			alive[m.Name] = m
		}
	}
	voters, now := 0, time.Now()
	var ready, moved []raft.Server
	n.mu.Lock()
	for _, s := range servers {
		name, id := splitServerID(s.ID)
		m, ok := alive[name]
		switch {
		case s.Suffrage == raft.Voter:
			voters++
		case !ok || m.ID != id:
			delete(n.stableFor, s.ID)
		case n.stableFor[s.ID].IsZero():
			n.stableFor[s.ID] = now
		case now.Sub(n.stableFor[s.ID]) >= n.cfg.PromoteAfter:
			ready = append(ready, s)
		}
		if ok && m.ID == id && m.Addr != "" && m.Addr != string(s.Address) {
			moved = append(moved, s)
		}
	}
	n.mu.Unlock()
	for _, s := range moved {
		name, _ := splitServerID(s.ID)
		if err := n.setAddress(s, alive[name].Addr); err != nil {
			n.log.Warn("updating a moved server's address", "server", s.ID, "error", err)
		}
	}
	sort.Slice(ready, func(i, j int) bool { return ready[i].ID < ready[j].ID })
	for _, s := range ready {
		if voters >= voterTarget(len(servers)) {
			break
		}
		n.log.Info("promoting non-voter", "server", s.ID)
		if err := n.raft.AddVoter(s.ID, s.Address, 0, n.cfg.RPCTimeout).Error(); err != nil {
			n.log.Warn("promotion failed", "server", s.ID, "error", err)
			return
		}
		voters++
	}
}
