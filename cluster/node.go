package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// Node is one member of a Warren cluster: gossip membership, the metadata
// Raft group over the broker's FSM, and the authenticated transport.
type Node struct {
	cfg    Config
	log    *slog.Logger
	id     string // storage identity
	sid    raft.ServerID
	bootID string

	trans  *Transport
	rpc    *rpc
	gossip *gossipTransport
	mem    *membership
	ml     *memberlist.Memberlist

	fsm      *fsmAdapter
	raft     *raft.Raft
	store    *raftboltdb.BoltStore
	notifyCh chan bool
	leaderCh chan bool

	bootstrapped atomic.Bool   // this node ran BootstrapCluster
	leaving      atomic.Bool   // Leave has begun: never ask to join again
	joinDone     chan struct{} // closed when joinLoop returns

	mu        sync.Mutex
	joinErr   error                       // last refusal of our join, for Status
	stableFor map[raft.ServerID]time.Time // leader: when each non-voter was first seen alive

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// New starts a node: it binds the cluster port, starts gossip (joining the
// seeds in the background), opens the Raft state in DataDir/raft and starts
// the loops that bootstrap or join, reconnect and reconcile.
func New(cfg *Config, fsm FSM) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if fsm == nil {
		return nil, errors.New("cluster: an FSM is required")
	}
	n := &Node{
		cfg: *cfg, log: cfg.Logger, bootID: randomID(),
		notifyCh: make(chan bool, 16), leaderCh: make(chan bool, 1),
		stableFor: make(map[raft.ServerID]time.Time),
		stop:      make(chan struct{}),
		joinDone:  make(chan struct{}),
	}
	if n.log == nil {
		n.log = slog.Default()
	}
	n.log = n.log.With("node", cfg.NodeName)
	if err := n.open(fsm); err != nil {
		n.closeAll()
		return nil, err
	}
	n.wg.Add(4)
	go n.followLeadership()
	go n.joinLoop()
	go n.reconnectLoop()
	go n.reconcileLoop()
	return n, nil
}

// open starts the planes in dependency order; closeAll undoes what is set.
func (n *Node) open(fsm FSM) error {
	id, err := loadNodeID(n.cfg.DataDir, n.cfg.NodeID)
	if err != nil {
		return err
	}
	n.id, n.sid = id, serverID(n.cfg.NodeName, id)
	k, err := deriveKeys(n.cfg.Secret, n.cfg.ClusterName)
	if err != nil {
		return err
	}
	if n.trans, err = newTransport(&n.cfg, k, n.log); err != nil {
		return err
	}
	n.rpc = newRPC(n.trans, n.cfg.RPCTimeout)
	n.gossip = newGossipTransport(n.trans)
	n.registerHandlers()
	n.fsm = newFSMAdapter(fsm)
	hasState, err := n.openRaft()
	if err != nil {
		return err
	}
	n.mem = newMembership(localMeta{id: n.id, bootID: n.bootID, addr: n.trans.Addr(), version: n.cfg.Version, inRaft: hasState})
	if err := n.openMemberlist(k); err != nil {
		return err
	}
	n.trans.start()
	return nil
}

func (n *Node) openMemberlist(k keys) error {
	mc := n.cfg.Gossip
	if mc == nil {
		mc = memberlist.DefaultLANConfig()
	} else {
		c := *mc
		mc = &c
	}
	mc.Name = n.cfg.NodeName
	mc.Transport = n.gossip
	mc.Delegate = n.mem
	mc.Events = n.mem
	mc.LogOutput = nil
	mc.Logger = log.New(logWriter{log: n.log, component: "memberlist"}, "", 0)
	keyring, err := memberlist.NewKeyring(nil, k.gossip)
	if err != nil {
		return err
	}
	mc.Keyring, mc.SecretKey = keyring, k.gossip
	mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("cluster: start gossip: %w", err)
	}
	n.ml, n.mem.ml = ml, ml
	return nil
}

// openRaft opens the log and stable store and the snapshots, restores a
// snapshot the FSM is behind of, and starts Raft. It reports whether the
// node has Raft state already (bootstrapped or joined before).
func (n *Node) openRaft() (bool, error) {
	dir := filepath.Join(n.cfg.DataDir, "raft")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return false, err
	}
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	if err != nil {
		return false, fmt.Errorf("cluster: open raft log: %w", err)
	}
	n.store = store
	logs, err := raft.NewLogCache(512, store)
	if err != nil {
		return false, err
	}
	lw := logWriter{log: n.log, component: "raft"}
	snaps, err := raft.NewFileSnapshotStore(dir, n.cfg.SnapshotRetain, lw)
	if err != nil {
		return false, err
	}
	if err := n.restoreIfBehind(snaps); err != nil {
		return false, err
	}
	hasState, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return false, err
	}
	netTrans := raft.NewNetworkTransport(newRaftLayer(n.trans), 3, n.cfg.RPCTimeout, lw)
	n.raft, err = raft.NewRaft(n.raftConfig(lw), n.fsm, logs, store, snaps, netTrans)
	if err != nil {
		netTrans.Close()
		return false, fmt.Errorf("cluster: start raft: %w", err)
	}
	return hasState, nil
}

func (n *Node) raftConfig(lw logWriter) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = n.sid
	rc.HeartbeatTimeout = n.cfg.HeartbeatTimeout
	rc.ElectionTimeout = n.cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = n.cfg.LeaderLeaseTimeout
	rc.CommitTimeout = n.cfg.CommitTimeout
	rc.MaxAppendEntries = n.cfg.MaxAppendEntries
	rc.SnapshotThreshold = n.cfg.SnapshotThreshold
	rc.SnapshotInterval = n.cfg.SnapshotInterval
	rc.TrailingLogs = n.cfg.TrailingLogs
	rc.BatchApplyCh = true
	rc.NoSnapshotRestoreOnStart = true
	rc.NotifyCh = n.notifyCh
	rc.LogOutput = lw
	rc.LogLevel = hclogLevel(n.log)
	return rc
}

// restoreIfBehind restores the newest snapshot when the FSM's applied index
// is below it (its state was lost or copied from an older backup): with
// NoSnapshotRestoreOnStart Raft would otherwise replay only the log after
// the snapshot onto a state that lacks what came before.
func (n *Node) restoreIfBehind(snaps *raft.FileSnapshotStore) error {
	list, err := snaps.List()
	if err != nil || len(list) == 0 || list[0].Index <= n.fsm.user.AppliedIndex() {
		return err
	}
	_, rc, err := snaps.Open(list[0].ID)
	if err != nil {
		return err
	}
	n.log.Warn("FSM is behind the newest raft snapshot; restoring it",
		"applied", n.fsm.user.AppliedIndex(), "snapshot", list[0].Index)
	return n.fsm.Restore(rc)
}

// Shutdown stops the node without leaving: the others see it fail. It is
// safe to call more than once.
func (n *Node) Shutdown() error {
	var err error
	n.stopOnce.Do(func() {
		close(n.stop)
		n.wg.Wait()
		err = n.closeAll()
	})
	return err
}

func (n *Node) closeAll() error {
	var errs []error
	if n.raft != nil {
		errs = append(errs, n.raft.Shutdown().Error()) // closes the raft transport too
	}
	if n.ml != nil {
		errs = append(errs, n.ml.Shutdown())
	}
	if n.rpc != nil {
		n.rpc.close()
	}
	if n.trans != nil {
		n.trans.close()
		n.gossip.wait()
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}

// stopped reports whether Shutdown has begun.
func (n *Node) stopped() bool {
	select {
	case <-n.stop:
		return true
	default:
		return false
	}
}

// Name is the node name; ID its storage identity; Addr its cluster address.
func (n *Node) Name() string { return n.cfg.NodeName }
func (n *Node) ID() string   { return n.id }
func (n *Node) Addr() string { return n.trans.Addr() }

// Raft server IDs are "name/storage-id": the name for operators and Forget,
// the storage id so that a wiped node reusing a name is not taken for the
// old one.
func serverID(name, id string) raft.ServerID { return raft.ServerID(name + "/" + id) }

func splitServerID(sid raft.ServerID) (name, id string) {
	s := string(sid)
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i+1:]
}

func randomID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// loadNodeID reads DataDir/node-id, creating it on first start.
func loadNodeID(dir, want string) (string, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "node-id")
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if want != "" && want != id {
			return "", fmt.Errorf("cluster: NodeID %q does not match %q stored in %s", want, id, path)
		}
		return id, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", err
	}
	id := want
	if id == "" {
		id = randomID()
	}
	if strings.ContainsAny(id, "/ \n") {
		return "", fmt.Errorf("cluster: NodeID %q must not contain '/' or spaces", id)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(id + "\n"); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return id, os.Rename(tmp, path)
}
