package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Booting a cluster node. The configuration's definitions (the default
// user and vhost, configured users and vhosts) are never applied locally:
// the leader of the new Raft group proposes them as the seed entry, and
// every other node gets them from the log. Whether the seed was applied is
// replicated state (the seeded mark beside applied_index), so a
// bootstrapper killed between bootstrap and seed proposes it after its
// restart, and a seed proposed twice applies once (seedLoop). A standalone node with data that becomes the first node of a
// cluster (cluster-bootstrap-expect 1) puts all its definitions in the seed
// too; applying them on itself changes nothing (every command is an
// equivalent redeclare or a replace by the same value), and its queues keep
// their messages. A node with definitions of its own and no Raft state that
// could join another cluster is refused at start: RabbitMQ requires a
// reset before join_cluster, since the joiner's definitions would be lost
// or would diverge.

// ErrOwnDefinitions refuses to start a node that has definitions of its
// own and could only join an existing cluster.
var ErrOwnDefinitions = errors.New("server: this node has definitions of its own and cannot join a cluster")

// seedRetry is how often the leader retries the seed entry while the new
// cluster has no majority yet.
const seedRetry = 200 * time.Millisecond

// prepareClusterBoot decides, before the cluster node starts, what this
// start does with the node's own definitions.
func (s *Server) prepareClusterBoot(firstBoot bool) error {
	cm := s.cluster
	if hasRaftState(cm.cfg.DataDir) || firstBoot {
		return nil // a member resuming its place, or an empty node
	}
	what := s.ownDefinition()
	if what == "" {
		return nil // only what a first boot creates: the cluster's log replaces it
	}
	if cm.cfg.BootstrapExpect != 1 {
		return fmt.Errorf("%w (%s) and no cluster state: to make it the first node of a new cluster, "+
			"start it with cluster-bootstrap-expect 1; to join it to an existing cluster, stop it and empty its "+
			"data directory %s first (RabbitMQ: rabbitmqctl reset)", ErrOwnDefinitions, what, s.cfg.DataDir)
	}
	// It may only become the first node of a cluster: its seed carries its
	// definitions (seedCommands).
	s.log.Info("standalone node with definitions becomes the first node of a cluster", "example", what)
	return nil
}

// hasRaftState reports whether the cluster data directory holds a Raft
// log (package cluster keeps it in raft/raft.db).
func hasRaftState(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "raft", "raft.db"))
	return err == nil
}

// ownDefinition names one definition of the node beyond those a first
// boot creates (the configured vhosts and users, built-in exchanges), or
// returns "" when there is none.
func (s *Server) ownDefinition() string {
	configured := map[string]bool{s.cfg.DefaultVhost: true}
	for _, v := range s.cfg.Vhosts {
		configured[v] = true
	}
	users := map[string]bool{s.cfg.DefaultUser: true}
	for _, u := range s.cfg.Users {
		users[u.Name] = true
	}
	for _, vh := range s.Vhosts() {
		if !configured[vh.name] {
			return fmt.Sprintf("vhost '%s'", vh.name)
		}
		if qs := vh.Queues(); len(qs) > 0 {
			return describeQueue(qs[0].name, vh.name)
		}
		for _, ex := range vh.Exchanges() {
			if ex.name != "" && !strings.HasPrefix(ex.name, "amq.") {
				return fmt.Sprintf("exchange '%s' in vhost '%s'", ex.name, vh.name)
			}
		}
		if ps := s.Policies(vh.name, false); len(ps) > 0 {
			return fmt.Sprintf("policy '%s' in vhost '%s'", ps[0].Name, vh.name)
		}
	}
	for _, u := range s.userHashes() {
		if !users[u.Name] {
			return fmt.Sprintf("user '%s'", u.Name)
		}
	}
	if ps := s.Parameters(); len(ps) > 0 {
		return fmt.Sprintf("parameter '%s' of '%s' in vhost '%s'", ps[0].Name, ps[0].Component, ps[0].Vhost)
	}
	return ""
}

// seedLoop proposes the seed — the cluster's first definitions — once this
// node leads the metadata group and has not applied a seed entry; every
// node runs it and stops when it has applied one (from the log or its
// own). Deciding by the replicated seeded mark, not by which process
// bootstrapped, closes the crash window between bootstrap and seed: a
// bootstrapper killed before its seed committed, or a leader elected after
// it died, proposes it on the next start or election. A seed entry after
// the first is skipped when applied (applyCommittedBatch), so two seeds
// racing cannot both apply.
func (s *Server) seedLoop() {
	node := s.cluster.node
	t := time.NewTicker(seedRetry / 4)
	defer t.Stop()
	// Close waits for this goroutine: a proposal in flight ends with it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.goFunc(func() {
		select {
		case <-s.quit:
			cancel()
		case <-ctx.Done():
		}
	})
	for !s.isSeeded() {
		if node.IsLeader() {
			if hook := testHookBeforeSeed; hook != nil && !hook(s) {
				return
			}
			cmds, err := s.seedCommands()
			if err != nil {
				s.log.Error("cannot build the cluster's first definitions", "err", err)
				return
			}
			_, err = s.proposeEntry(ctx, true, cmds)
			if err == nil || !errors.Is(err, ErrClusterUnavailable) {
				if err != nil {
					s.log.Warn("seed definitions partly refused", "err", err)
				}
				s.log.Info("cluster seeded with this node's definitions", "commands", len(cmds))
				return
			}
		}
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
	}
}

// testHookBeforeSeed, when set, runs before the leader proposes the seed;
// false ends the seed loop there, as a crash between bootstrap and seed.
var testHookBeforeSeed func(*Server) bool

func (s *Server) isSeeded() bool {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	return s.seeded
}

// seedCommands are the seed entry: the configuration's definitions as a
// blank node's first boot makes them, then everything the node has (a
// standalone node with data becoming the first node of a cluster; nothing
// on a node whose definitions all come from the log), which overrides the
// configuration's defaults as a restart of the standalone node would.
func (s *Server) seedCommands() ([]Command, error) {
	cmds := s.configCommands(true)
	own, err := s.definitionCommands()
	if err != nil {
		return nil, err
	}
	// The id a standalone node already has stays the cluster's (even
	// when it has no other definitions to bring); else the cluster gets
	// one now, made here by the leader that proposes the seed (a later seed
	// entry is skipped whole, so only the first id counts).
	id, _, err := s.clusterIDOrNew()
	if err != nil {
		return nil, err
	}
	cmds = append(cmds, own...)
	return append(cmds, SetGlobalParameter{Name: internalClusterIDParam, Value: id}), nil
}

// configCommands are applyConfigDefinitions as commands.
func (s *Server) configCommands(firstBoot bool) []Command {
	cfg := &s.cfg
	var cmds []Command
	vhosts := map[string]bool{}
	addVhost := func(name string) {
		if !vhosts[name] && s.Vhost(name) == nil {
			cmds = append(cmds, DeclareVhost{Name: name})
		}
		vhosts[name] = true
	}
	for _, v := range append([]string{cfg.DefaultVhost}, cfg.Vhosts...) {
		addVhost(v)
	}
	loopback := map[string]bool{}
	for _, u := range cfg.LoopbackUsers {
		loopback[u] = true
	}
	configured := map[string]bool{}
	for _, u := range cfg.Users {
		configured[u.Name] = true
		hash := u.PasswordHash
		if hash == "" {
			hash = HashPassword(u.Password)
		}
		cmds = append(cmds, PutUser{Name: u.Name, PasswordHash: hash, Tags: slices.Clone(u.Tags), LoopbackOnly: loopback[u.Name]})
		for vh, p := range u.Permissions {
			addVhost(vh)
			cmds = append(cmds, SetPermission{User: u.Name, Vhost: vh, Permission: p})
		}
	}
	if cfg.DefaultUser != "" && !configured[cfg.DefaultUser] && firstBoot {
		cmds = append(cmds,
			PutUser{Name: cfg.DefaultUser, PasswordHash: HashPassword(cfg.DefaultPassword), Tags: []string{"administrator"}, LoopbackOnly: loopback[cfg.DefaultUser]},
			SetPermission{User: cfg.DefaultUser, Vhost: cfg.DefaultVhost, Permission: Permission{".*", ".*", ".*"}})
	}
	return cmds
}

// definitionCommands are the node's definitions as commands, in an order
// that applies: vhosts, accounts, parameters and policies, then exchanges,
// queues (homed here) and bindings. Exclusive queues are left out, as by an
// export: they end with their connection.
func (s *Server) definitionCommands() ([]Command, error) {
	d, err := s.ExportDefinitions("")
	if err != nil {
		return nil, err
	}
	loopback := map[string]bool{}
	for _, u := range s.cfg.LoopbackUsers {
		loopback[u] = true
	}
	var cmds []Command
	for _, v := range d.Vhosts {
		cmds = append(cmds, DeclareVhost{Name: v.Name, Meta: v.VhostMeta})
	}
	for _, u := range d.Users {
		cmds = append(cmds, PutUser{Name: u.Name, PasswordHash: u.PasswordHash, Tags: u.Tags, LoopbackOnly: loopback[u.Name]})
	}
	for _, p := range d.Permissions {
		cmds = append(cmds, SetPermission{User: p.User, Vhost: p.Vhost, Permission: p.Permission})
	}
	for _, tp := range d.TopicPermissions {
		cmds = append(cmds, SetTopicPermission{TopicPermission: tp})
	}
	for _, p := range d.GlobalParameters {
		cmds = append(cmds, SetGlobalParameter{Name: p.Name, Value: p.Value})
	}
	for _, p := range d.Parameters {
		cmds = append(cmds, SetParameter{Parameter: p})
	}
	for _, p := range d.Policies {
		cmds = append(cmds, SetPolicy{Policy: p})
	}
	for _, p := range d.OperatorPolicies {
		cmds = append(cmds, SetPolicy{Policy: p, Operator: true})
	}
	for _, x := range d.Exchanges {
		cmds = append(cmds, DeclareExchange{Vhost: x.Vhost, Name: x.Name, Type: x.Type, Durable: x.Durable,
			AutoDelete: x.AutoDelete, Internal: x.Internal, Arguments: tableBytes(x.Arguments)})
	}
	for _, q := range d.Queues {
		cmds = append(cmds, DeclareQueue{Vhost: q.Vhost, Name: q.Name, Durable: q.Durable, AutoDelete: q.AutoDelete,
			Arguments: tableBytes(q.Arguments), Node: s.cfg.NodeName})
	}
	for _, b := range d.Bindings {
		cmds = append(cmds, Bind{Vhost: b.Vhost, Source: b.Source, Destination: b.Destination,
			DestinationType: b.DestinationType, RoutingKey: b.RoutingKey, Arguments: tableBytes(b.Arguments)})
	}
	return cmds, nil
}

// ImportedDefinitionHashParameter is the global runtime parameter that
// records the hash of the definitions imported at boot, as RabbitMQ's
// rabbit_definitions_hashing stores it (imported_definition_hash_value)
// when definitions.skip_if_unchanged is on.
const ImportedDefinitionHashParameter = "imported_definition_hash_value"

// ImportUnlessUnchanged runs the boot import imp unless the definitions
// whose content hash is hash were imported already: the recorded hash (a
// global parameter, so in a cluster every node shares it) is compared
// first with this node's state, then, on a cluster member whose state may
// be behind, after a barrier through the Raft log, so a node restarting
// with the file the cluster imported earlier does not import it again and
// undo the changes made since. After a successful import the hash is
// recorded. It reports whether the import was skipped.
func (s *Server) ImportUnlessUnchanged(hash string, imp func() error) (skipped bool, err error) {
	if s.importedHash() == hash {
		return true, nil
	}
	if s.cluster != nil {
		if err := s.logBarrier(); err != nil {
			return false, fmt.Errorf("reading whether the cluster imported these definitions already: %w", err)
		}
		if s.importedHash() == hash {
			return true, nil
		}
	}
	if err := imp(); err != nil {
		return false, err
	}
	s.log.Info("hash value of imported definitions has changed", "hash", hash)
	_, err = s.PutGlobalParameter(ImportedDefinitionHashParameter, hash)
	return false, err
}

func (s *Server) importedHash() string {
	p, err := s.GetGlobalParameter(ImportedDefinitionHashParameter)
	if err != nil {
		return ""
	}
	h, _ := p.Value.(string)
	return h
}

// logBarrier returns once this node has applied every metadata entry
// committed before it: an entry without commands, proposed and applied
// like any other.
func (s *Server) logBarrier() error {
	if err := s.StartCluster(); err != nil {
		return err
	}
	_, err := s.proposeCtx(context.Background())
	return err
}
