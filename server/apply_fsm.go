package server

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// The meta Raft FSM's entry points: committed log entries are applied here,
// meta.db is snapshotted and restored here. A standalone node never calls
// them (its applied index stays 0).
//
// They map onto cluster.FSM (server/cluster_node.go's metaFSM) as follows:
// ApplyBatch(entries) is ApplyCommitted per entry — the cluster's adapter
// has already dropped the entries at or below AppliedIndex, and a
// StorageError is its panic; Snapshot is SnapshotMeta behind a header
// naming the node; Restore installs the snapshot into the running node
// (apply_restore.go). RestoreMeta is for a stopped node (a backup put back
// before New).

// bucketState holds the node's apply state: applied_index, the last Raft
// log index whose commands meta.db holds.
var (
	bucketState     = []byte("state")
	keyAppliedIndex = []byte("applied_index")
)

type appliedIndexRecord struct {
	Index uint64 `json:"index"`
	// Seeded says the log's seed entry (the cluster's first definitions,
	// cluster_boot.go) was applied; absent in files from before it was
	// recorded, whose first command entry was always the seed.
	Seeded *bool `json:"seeded,omitempty"`
}

// appliedState is what the state bucket records.
type appliedState struct {
	index  uint64
	seeded bool
}

// ApplyCommitted applies committed commands — those of the log entry at
// index, or of consecutive entries of which index is the last: each is
// decoded (DecodeCommand) and prepared, their records and applied_index are
// written to meta.db in one transaction, and memory changes, in order. It returns one result per command: nil, a
// *CommandRefused (the reply to give the client that proposed it), or a
// decoding error. An entry at or below AppliedIndex was applied before (a
// replay after a restart) and is skipped: its results are all nil. The
// second result is a storage failure: fatal for the node, which must stop
// rather than serve state meta.db does not hold.
func (s *Server) ApplyCommitted(index uint64, cmds [][]byte) ([]error, error) {
	if index == 0 {
		return nil, errors.New("server: ApplyCommitted: log index 0")
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	results := make([]error, len(cmds))
	if index <= s.appliedIndex {
		return results, nil
	}
	decoded := make([]Command, 0, len(cmds))
	at := make([]int, 0, len(cmds))
	for i, raw := range cmds {
		c, err := DecodeCommand(raw)
		if err != nil {
			results[i] = err
			continue
		}
		decoded = append(decoded, c)
		at = append(at, i)
	}
	_, errs, fatal := s.applyLocked(index, decoded)
	if fatal != nil {
		return nil, fatal
	}
	for j, i := range at {
		results[i] = errs[j]
	}
	return results, nil
}

// AppliedIndex returns the index of the last log entry applied (0 on a
// standalone node), as read from meta.db at start and advanced by
// ApplyCommitted.
func (s *Server) AppliedIndex() uint64 {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	return s.appliedIndex
}

// loadAppliedIndex reads applied_index from meta.db at start.
func (m *metaStore) loadAppliedIndex() (uint64, error) {
	st, err := m.loadAppliedState()
	return st.index, err
}

// loadAppliedState reads the applied index and the seeded mark.
func (m *metaStore) loadAppliedState() (appliedState, error) {
	var st appliedState
	err := m.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketState)
		if bk == nil {
			return nil // a meta.db from before applied indexes
		}
		v := bk.Get(keyAppliedIndex)
		if v == nil {
			return nil
		}
		var r appliedIndexRecord
		if err := decodeRecord(keyAppliedIndex, v, &r); err != nil {
			return fmt.Errorf("%s %q: %w", bucketState, keyAppliedIndex, err)
		}
		st.index = r.Index
		st.seeded = r.Index > 0
		if r.Seeded != nil {
			st.seeded = *r.Seeded
		}
		return nil
	})
	return st, err
}

// SnapshotMeta writes a consistent copy of meta.db to w (a bbolt read
// transaction's WriteTo): every definition and the applied_index they
// correspond to, as one batch boundary, since every batch is one
// transaction.
func (s *Server) SnapshotMeta(w io.Writer) error {
	if s.meta == nil {
		return errors.New("server: SnapshotMeta: the node has no data directory")
	}
	return s.meta.db.View(func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(w)
		return err
	})
}

// RestoreMeta replaces the meta.db of the data directory dir with a
// snapshot that SnapshotMeta wrote. The node must be stopped: the
// snapshot is written next to meta.db, fsynced, checked (it must be a
// sound bbolt file with Warren's records), then renamed over meta.db; the
// next New loads the definitions from it and AppliedIndex reports the
// snapshot's index. Queue and stream files of the data directory are left
// alone; queues the snapshot no longer has keep their files until the
// directory is cleaned.
func RestoreMeta(dir string, r io.Reader) error {
	path := filepath.Join(dir, "meta.db")
	tmp := path + ".restore"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("server: restoring meta.db: %w", err)
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close())
	if err == nil {
		err = checkRestoredMeta(dir, tmp)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("server: restoring meta.db: %w", err), removeIfExists(tmp))
	}
	return nil
}

// checkRestoredMeta opens the snapshot as meta.db would be opened.
func checkRestoredMeta(dir, tmp string) error {
	if err := checkBoltFile(tmp); err != nil {
		return err
	}
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	m := &metaStore{db: db}
	_, err = m.loadAppliedIndex()
	return errors.Join(err, db.Close())
}
