package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Installing a metadata Raft snapshot into a running node (metaFSM.Restore):
// a node that was down while the leader compacted its log past the node's
// applied index gets the leader's meta.db instead of the entries. A running
// server cannot swap meta.db under its vhosts, queues, channels and
// consumers, so the restore turns the difference between the node's
// definitions and the snapshot's into commands and applies them as one
// batch at the snapshot's applied index, through the same apply as every
// log entry: what the snapshot no longer has is deleted (a queue homed here
// with its files and messages, its consumers cancelled), what it has is
// declared or set (an equivalent queue is a no-op and keeps its messages),
// and a queue or exchange whose definition differs is deleted and declared
// again, since the cluster's history deleted it. Memory and meta.db change
// together, so both match the snapshot when the batch is stored.
//
// The snapshot stream is a header line naming the node that wrote it, then
// that node's meta.db (a bbolt read transaction): a queue record without a
// home node is a queue homed on the node holding the file, which the
// restoring node must read as homed on the writer.
//
// Departures: only durable definitions are in meta.db, so transient
// exchanges and queues the node missed stay missing (and those deleted
// meanwhile stay), as after a restart of the node.

// snapshotMagic begins a definitions snapshot stream.
const snapshotMagic = "warren-definitions-snapshot 1\n"

type snapshotHeader struct {
	Node string `json:"node"` // the node whose meta.db follows
}

// writeSnapshot writes the header and this node's meta.db.
func (s *Server) writeSnapshot(w io.Writer) error {
	hdr, err := json.Marshal(snapshotHeader{Node: s.cfg.NodeName})
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, snapshotMagic+string(hdr)+"\n"); err != nil {
		return err
	}
	return s.SnapshotMeta(w)
}

// restoreSnapshot installs a snapshot from writeSnapshot into the running
// node (see above). A snapshot at or below the applied index changes
// nothing. A failure to store the batch is fatal, as for a log entry.
func (s *Server) restoreSnapshot(r io.Reader) error {
	if s.meta == nil {
		return errors.New("server: restoring a definitions snapshot: the node has no data directory")
	}
	br := bufio.NewReader(r)
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != snapshotMagic {
		return fmt.Errorf("server: restoring a definitions snapshot: not a Warren definitions snapshot (%v)", err)
	}
	line, err := br.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("server: restoring a definitions snapshot: reading its header: %w", err)
	}
	var hdr snapshotHeader
	if err := json.Unmarshal(line, &hdr); err != nil || hdr.Node == "" {
		return fmt.Errorf("server: restoring a definitions snapshot: bad header %q (%v)", line, err)
	}
	target, tmp, err := openSnapshotFile(s.cfg.DataDir, br)
	if err != nil {
		return err
	}
	defer func() {
		if err := errors.Join(target.close(), os.Remove(tmp)); err != nil {
			s.log.Warn("removing the restored definitions snapshot's file", "file", tmp, "err", err)
		}
	}()
	st, err := target.loadAppliedState()
	if err != nil {
		return fmt.Errorf("server: restoring a definitions snapshot: %w", err)
	}
	index := st.index
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if index <= s.appliedIndex {
		s.log.Info("definitions snapshot not newer than this node's; nothing to restore", "snapshot_index", index, "applied_index", s.appliedIndex)
		return nil
	}
	cmds, err := s.restoreCommands(target, hdr.Node)
	if err != nil {
		return fmt.Errorf("server: restoring a definitions snapshot from %s: %w", hdr.Node, err)
	}
	start := time.Now()
	// The seed entry is behind the snapshot: stored with its index.
	s.seeded = s.seeded || st.seeded
	_, errs, fatal := s.applyLocked(index, cmds)
	if fatal != nil {
		// Memory changed command by command: it is ahead of meta.db.
		s.log.Error("cannot store a restored definitions snapshot; stopping the node", "index", index, "err", fatal)
		panic(fmt.Sprintf("server: restoring definitions snapshot %d: %v", index, fatal))
	}
	if s.cluster != nil {
		s.cluster.restores.Add(1)
	}
	refused := 0
	for i, e := range errs {
		if e != nil {
			refused++
			s.log.Error("a definition of the restored snapshot could not be applied", "command", describeCommand(cmds[i]), "err", e)
		}
	}
	s.log.Info("installed a definitions snapshot", "from", hdr.Node, "index", index, "commands", len(cmds),
		"refused", refused, "took", time.Since(start))
	return nil
}

// openSnapshotFile writes the meta.db image of r next to meta.db, fsyncs
// and checks it, and opens it read-only.
func openSnapshotFile(dir string, r io.Reader) (*metaStore, string, error) {
	tmp := filepath.Join(dir, "meta.db.snapshot")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("server: restoring a definitions snapshot: %w", err)
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close())
	if err == nil {
		err = checkRestoredMeta(dir, tmp)
	}
	var db *bolt.DB
	if err == nil {
		db, err = bolt.Open(tmp, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	}
	if err != nil {
		return nil, "", errors.Join(fmt.Errorf("server: restoring a definitions snapshot: %w", err), removeIfExists(tmp))
	}
	return &metaStore{db: db}, tmp, nil
}

// restoreBuckets are the definition buckets in the order their records'
// commands apply: a vhost before what is in it, users before their
// permissions, exchanges and queues before bindings.
var restoreBuckets = [][]byte{bucketVhosts, bucketUsers, bucketPermissions, bucketTopicPermissions,
	bucketGlobals, bucketParameters, bucketPolicies, bucketExchanges, bucketQueues, bucketBindings}

// restoreCommands are the commands that turn this node's definitions into
// target's: deletes in the reverse order of restoreBuckets, then a put of
// every target record (an equal one is a no-op or rewrites the same
// record). writer is the node that wrote target.
func (s *Server) restoreCommands(target *metaStore, writer string) ([]Command, error) {
	self := s.cfg.NodeName
	var dels, puts [][]Command
	for _, bucket := range restoreBuckets {
		cur, err := bucketRecords(s.meta, bucket)
		if err != nil {
			return nil, err
		}
		want, err := bucketRecords(target, bucket)
		if err != nil {
			return nil, err
		}
		var del, put []Command
		for k, v := range cur {
			w, kept := want[k]
			if kept && (bytes.Equal(v, w) || !recreates(bucket)) {
				continue
			}
			_, d, err := recordCommands(bucket, []byte(k), v, self)
			if err != nil {
				return nil, err
			}
			if kept {
				// An exchange or queue whose record differs: equal once the
				// home is read for each side, or deleted and declared again.
				p, _, err := recordCommands(bucket, []byte(k), w, writer)
				c, _, err2 := recordCommands(bucket, []byte(k), v, self)
				if err = errors.Join(err, err2); err != nil {
					return nil, err
				}
				if reflect.DeepEqual(p, c) {
					continue
				}
			}
			del = append(del, d)
		}
		for k, w := range want {
			p, _, err := recordCommands(bucket, []byte(k), w, writer)
			if err != nil {
				return nil, err
			}
			if _, stored := cur[k]; !stored && recreates(bucket) {
				// A transient exchange or queue of the same name would make
				// the durable declare inequivalent: the history replaced it.
				if d := s.memoryOnly(p); d != nil {
					del = append(del, d)
				}
			}
			put = append(put, p)
		}
		dels, puts = append(dels, del), append(puts, put)
	}
	var cmds []Command
	for i := len(dels) - 1; i >= 0; i-- {
		cmds = append(cmds, dels[i]...)
	}
	for _, p := range puts {
		cmds = append(cmds, p...)
	}
	return cmds, nil
}

// recreates reports whether a changed record of bucket is a delete and a
// declare (exchanges and queues: a declare of an existing one must be
// equivalent) rather than a put that replaces it.
func recreates(bucket []byte) bool {
	return bytes.Equal(bucket, bucketExchanges) || bytes.Equal(bucket, bucketQueues)
}

// memoryOnly returns the delete of the transient exchange or queue in
// memory that the declare p would collide with, or nil.
func (s *Server) memoryOnly(p Command) Command {
	switch c := p.(type) {
	case DeclareExchange:
		if vh := s.Vhost(c.Vhost); vh != nil && vh.exchange(c.Name) != nil {
			return DeleteExchange{Vhost: c.Vhost, Name: c.Name}
		}
	case DeclareQueue:
		if vh := s.Vhost(c.Vhost); vh != nil && vh.queue(c.Name) != nil {
			return DeleteQueue{Vhost: c.Vhost, Name: c.Name}
		}
	}
	return nil
}

// bucketRecords reads every record of bucket, checked, by key.
func bucketRecords(m *metaStore, bucket []byte) (map[string][]byte, error) {
	out := make(map[string][]byte)
	err := m.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucket)
		if bk == nil {
			return nil
		}
		return bk.ForEach(func(k, v []byte) error {
			out[string(k)] = bytes.Clone(v)
			return nil
		})
	})
	return out, err
}

// recordCommands decodes a record of bucket into the command that puts it
// and the one that deletes it; holder is the node whose meta.db holds it
// (a queue without a home node is homed there).
func recordCommands(bucket, k, v []byte, holder string) (put, del Command, err error) {
	dec := func(t any) error {
		if err := decodeRecord(k, v, t); err != nil {
			return err
		}
		if kr, ok := t.(keyedRecord); ok {
			return checkKey(k, kr)
		}
		return nil
	}
	switch string(bucket) {
	case string(bucketVhosts):
		var r metaVhost
		err = dec(&r)
		put, del = DeclareVhost{Name: r.Name, Meta: r.vhostMeta()}, DeleteVhost{Name: r.Name}
	case string(bucketUsers):
		var r metaUser
		err = dec(&r)
		put = PutUser{Name: r.Name, PasswordHash: r.PasswordHash, Tags: r.Tags, LoopbackOnly: r.LoopbackOnly, Limits: r.Limits}
		del = DeleteUser{Name: r.Name}
	case string(bucketPermissions):
		var r metaPermission
		err = dec(&r)
		put, del = SetPermission{User: r.User, Vhost: r.Vhost, Permission: r.Permission}, ClearPermission{User: r.User, Vhost: r.Vhost}
	case string(bucketTopicPermissions):
		var r TopicPermission
		err = dec(&r)
		put, del = SetTopicPermission{TopicPermission: r}, ClearTopicPermissions{User: r.User, Vhost: r.Vhost, Exchange: r.Exchange}
	case string(bucketGlobals), string(bucketParameters):
		var r metaParameter
		if err = dec(&r); err != nil {
			break
		}
		var val any
		if val, err = decodeParamValue(r.Value); err != nil {
			break
		}
		if string(bucket) == string(bucketGlobals) {
			put, del = SetGlobalParameter{Name: r.Name, Value: val}, ClearGlobalParameter{Name: r.Name}
		} else {
			put = SetParameter{Parameter: Parameter{Component: r.Component, Vhost: r.Vhost, Name: r.Name, Value: val}}
			del = ClearParameter{Component: r.Component, Vhost: r.Vhost, Name: r.Name}
		}
	case string(bucketPolicies):
		var r metaPolicy
		if err = dec(&r); err != nil {
			break
		}
		var def map[string]any
		if def, err = decodeDefinition(r.Definition); err != nil {
			break
		}
		put = SetPolicy{Operator: r.Operator, Policy: Policy{Vhost: r.Vhost, Name: r.Name, Pattern: r.Pattern,
			ApplyTo: r.ApplyTo, Priority: r.Priority, Definition: def}}
		del = ClearPolicy{Vhost: r.Vhost, Name: r.Name, Operator: r.Operator}
	case string(bucketExchanges), string(bucketQueues), string(bucketBindings):
		put, del, err = topologyCommands(bucket, dec, holder)
	default:
		err = fmt.Errorf("no commands for bucket %s", bucket)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s %q: %w", bucket, k, err)
	}
	return put, del, nil
}

// topologyCommands is recordCommands for exchanges, queues and bindings.
func topologyCommands(bucket []byte, dec func(any) error, holder string) (put, del Command, err error) {
	switch string(bucket) {
	case string(bucketExchanges):
		var r metaExchange
		err = dec(&r)
		put = DeclareExchange{Vhost: r.Vhost, Name: r.Name, Type: r.Type, Durable: true, AutoDelete: r.AutoDelete,
			Internal: r.Internal, Arguments: r.Arguments}
		del = DeleteExchange{Vhost: r.Vhost, Name: r.Name}
	case string(bucketQueues):
		var r metaQueue
		err = dec(&r)
		home := r.Node
		if home == "" {
			home = holder
		}
		put = DeclareQueue{Vhost: r.Vhost, Name: r.Name, Durable: true, AutoDelete: r.AutoDelete, Arguments: r.Arguments, Node: home}
		del = DeleteQueue{Vhost: r.Vhost, Name: r.Name}
	case string(bucketBindings):
		var r metaBinding
		err = dec(&r)
		b := Bind{Vhost: r.Vhost, Source: r.Source, Destination: r.Destination, DestinationType: r.DestinationType,
			Durable: true, RoutingKey: r.RoutingKey, Arguments: r.Arguments}
		put, del = b, Unbind(b)
	}
	return put, del, err
}
