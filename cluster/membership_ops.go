package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/raft"
)

const (
	methodJoin   = "cluster.join"
	methodRemove = "cluster.remove"
	methodForget = "cluster.forget"
)

func (n *Node) registerHandlers() {
	n.rpc.handle(methodPropose, n.handlePropose)
	n.rpc.handle(methodJoin, n.handleJoin)
	n.rpc.handle(methodRemove, n.handleRemove)
	n.rpc.handle(methodForget, n.handleForget)
}

// HandleRPC registers handler for method on the rpc plane (for the broker:
// "forward-publish" and the like). Methods starting "cluster." are the
// package's own.
func (n *Node) HandleRPC(method string, handler RPCHandler) { n.rpc.handle(method, handler) }

// CallRPC sends one request to the node at addr and waits for its answer.
func (n *Node) CallRPC(ctx context.Context, addr, method string, payload []byte) ([]byte, error) {
	return n.rpc.call(ctx, addr, method, payload)
}

// callLeader runs method on the Raft leader: locally when this node leads,
// else over RPC, following leader changes until ctx ends.
func (n *Node) callLeader(ctx context.Context, method string, payload []byte, local RPCHandler) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.cfg.RPCTimeout)
		defer cancel()
	}
	for {
		addr, _ := n.raft.LeaderWithID()
		var (
			out []byte
			err = ErrNotLeader
		)
		switch {
		case n.raft.State() == raft.Leader:
			out, err = local(ctx, n.cfg.NodeName, payload)
		case addr != "":
			out, err = n.rpc.call(ctx, string(addr), method, payload)
		}
		if !errors.Is(err, ErrNotLeader) {
			return out, err
		}
		if err := n.waitLeaderChange(ctx, addr); err != nil {
			return nil, err
		}
	}
}

// joinRequest is name, storage id and cluster address, as fields.
func encodeJoin(name, id, addr string) []byte {
	return appendField(appendField(appendField(nil, name), id), addr)
}

func decodeFields(b []byte, count int) ([]string, error) {
	out := make([]string, 0, count)
	for range count {
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return nil, errors.New("cluster: truncated request")
		}
		out = append(out, string(b[1:1+int(b[0])]))
		b = b[1+int(b[0]):]
	}
	return out, nil
}

// handleJoin, on the leader, adds a node as a non-voter. A node already in
// the configuration with the same identity is answered at once (a restart;
// its address is updated if it moved); the same name with another storage
// identity is refused until that one is forgotten.
func (n *Node) handleJoin(ctx context.Context, from string, payload []byte) ([]byte, error) {
	f, err := decodeFields(payload, 3)
	if err != nil {
		return nil, err
	}
	name, id, addr := f[0], f[1], f[2]
	if n.raft.State() != raft.Leader {
		// Any node in Raft may be asked: it forwards to the leader.
		return n.callLeader(ctx, methodJoin, payload, n.handleJoin)
	}
	servers, err := n.servers()
	if err != nil {
		return nil, err
	}
	sid := serverID(name, id)
	for _, s := range servers {
		sname, _ := splitServerID(s.ID)
		switch {
		case s.ID == sid && string(s.Address) == addr:
			return nil, nil
		case s.ID == sid:
			return nil, n.setAddress(s, addr)
		case sname == name:
			return nil, fmt.Errorf("%w: %q is %s", ErrIdentityConflict, name, s.ID)
		}
	}
	dl, _ := ctx.Deadline()
	n.log.Info("adding node to raft as non-voter", "joining", name, "addr", addr)
	return nil, translateRaftErr(n.raft.AddNonvoter(sid, raft.ServerAddress(addr), 0, time.Until(dl)).Error())
}

func (n *Node) setAddress(s raft.Server, addr string) error {
	n.log.Info("raft server moved", "server", s.ID, "from", s.Address, "to", addr)
	if s.Suffrage == raft.Voter {
		return translateRaftErr(n.raft.AddVoter(s.ID, raft.ServerAddress(addr), 0, n.cfg.RPCTimeout).Error())
	}
	return translateRaftErr(n.raft.AddNonvoter(s.ID, raft.ServerAddress(addr), 0, n.cfg.RPCTimeout).Error())
}

func translateRaftErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrShutdown
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %v", ErrNoQuorum, err)
	}
	return err
}

// handleRemove, on the leader, removes a server (a node leaving).
func (n *Node) handleRemove(ctx context.Context, from string, payload []byte) ([]byte, error) {
	f, err := decodeFields(payload, 1)
	if err != nil {
		return nil, err
	}
	if n.raft.State() != raft.Leader {
		return nil, ErrNotLeader
	}
	dl, _ := ctx.Deadline()
	return nil, translateRaftErr(n.raft.RemoveServer(raft.ServerID(f[0]), 0, time.Until(dl)).Error())
}

// handleForget, on the leader, removes a node that gossip does not see
// alive from the Raft configuration.
func (n *Node) handleForget(ctx context.Context, from string, payload []byte) ([]byte, error) {
	f, err := decodeFields(payload, 1)
	if err != nil {
		return nil, err
	}
	name := f[0]
	if n.raft.State() != raft.Leader {
		return nil, ErrNotLeader
	}
	if m, ok := n.mem.get(name); ok && m.State == StateAlive {
		return nil, fmt.Errorf("%w: %s", ErrMemberAlive, name)
	}
	servers, err := n.servers()
	if err != nil {
		return nil, err
	}
	for _, s := range servers {
		if sname, _ := splitServerID(s.ID); sname == name {
			dl, _ := ctx.Deadline()
			n.log.Warn("forgetting node", "forgotten", s.ID)
			if err := translateRaftErr(n.raft.RemoveServer(s.ID, 0, time.Until(dl)).Error()); err != nil {
				return nil, err
			}
			n.mem.forget(name)
			return nil, nil
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrUnknownMember, name)
}

// Forget removes a node that is not alive from the cluster, so a wiped
// node may come back under its name. It refuses a live member.
func (n *Node) Forget(ctx context.Context, name string) error {
	if name == n.cfg.NodeName {
		return fmt.Errorf("%w: %s is this node", ErrMemberAlive, name)
	}
	_, err := n.callLeader(ctx, methodForget, appendField(nil, name), n.handleForget)
	if err == nil {
		n.mem.forget(name)
	}
	return err
}

// Join joins gossip through the given cluster addresses (host:port); the
// node then asks the Raft leader to add it, in the background.
func (n *Node) Join(addrs ...string) (int, error) {
	return n.ml.Join(addrs)
}

// Leave leaves gracefully: a leader hands leadership over first, then the
// node removes itself from the Raft configuration, announces its leave to
// gossip and shuts down.
func (n *Node) Leave(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.cfg.ProposeTimeout)
		defer cancel()
	}
	// Stop asking to be added first, or a join in flight could add the
	// node back after it removed itself.
	n.leaving.Store(true)
	select {
	case <-n.joinDone:
	case <-ctx.Done():
		return fmt.Errorf("cluster: leave: %w", ctx.Err())
	}
	if err := n.leaveRaft(ctx); err != nil {
		return err
	}
	dl, _ := ctx.Deadline()
	n.announceLeaving(time.Until(dl))
	if err := n.ml.Leave(time.Until(dl)); err != nil {
		n.log.Warn("gossip leave", "error", err)
	}
	return n.Shutdown()
}

// announceLeaving gossips the leaving flag and pushes it to every live
// member by a push/pull exchange: the leave message that follows
// supersedes a gossiped update still in flight, and a member that got the
// leave first would take the node for dead.
func (n *Node) announceLeaving(timeout time.Duration) {
	if err := n.mem.update(func(m *localMeta) { m.leaving = true }, timeout); err != nil {
		n.log.Warn("gossip leaving flag", "error", err)
	}
	var addrs []string
	for _, m := range n.mem.list() {
		if m.State == StateAlive && m.Name != n.cfg.NodeName {
			addrs = append(addrs, m.Addr)
		}
	}
	if len(addrs) > 0 {
		if _, err := n.ml.Join(addrs); err != nil {
			n.log.Warn("pushing the leaving flag", "error", err)
		}
	}
}

func (n *Node) leaveRaft(ctx context.Context) error {
	servers, err := n.servers()
	if err != nil {
		return err
	}
	if len(servers) <= 1 {
		return nil // the last node: nobody to tell
	}
	for attempt := 0; n.raft.State() == raft.Leader && attempt < 3; attempt++ {
		// Consul retries transfers: they fail while writes are in flight.
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			n.log.Warn("leadership transfer failed", "attempt", attempt+1, "error", err)
		}
	}
	if n.raft.State() == raft.Leader {
		return fmt.Errorf("cluster: leave: could not transfer leadership")
	}
	_, err = n.callLeader(ctx, methodRemove, appendField(nil, string(n.sid)), n.handleRemove)
	return err
}

func (n *Node) servers() ([]raft.Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, translateRaftErr(err)
	}
	return f.Configuration().Servers, nil
}

// voterTarget is the number of voters for a cluster of size nodes: 3 up to
// four nodes, 5 from five (design §6.1), never more than the nodes and
// always odd, since an even count tolerates no more failures than one less.
func voterTarget(size int) int {
	t := 3
	if size >= 5 {
		t = 5
	}
	t = min(t, size)
	if t > 1 && t%2 == 0 {
		t--
	}
	return t
}

// bootstrapServers picks the first configuration from the alive members:
// sorted by server id, the first voterTarget are voters, the rest
// non-voters.
func bootstrapServers(alive []Member) []raft.Server {
	sort.Slice(alive, func(i, j int) bool {
		return serverID(alive[i].Name, alive[i].ID) < serverID(alive[j].Name, alive[j].ID)
	})
	voters := voterTarget(len(alive))
	out := make([]raft.Server, len(alive))
	for i, m := range alive {
		out[i] = raft.Server{ID: serverID(m.Name, m.ID), Address: raft.ServerAddress(m.Addr), Suffrage: raft.Nonvoter}
		if i < voters {
			out[i].Suffrage = raft.Voter
		}
	}
	return out
}
