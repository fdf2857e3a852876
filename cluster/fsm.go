package cluster

import (
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// Entry is one committed command of the metadata log.
type Entry struct {
	Index, Term uint64
	Data        []byte
}

// FSM is the replicated state machine the broker implements (its
// definitions apply). The contract:
//
//   - ApplyBatch applies the entries, in order, in one durable transaction
//     that also records the last entry's Index as the applied index, and
//     returns one result per entry. A non-nil result is a deterministic
//     refusal of that entry (every node computes the same one), not a
//     failure of the node; a node that cannot apply must stop (panic), as
//     continuing would diverge.
//   - AppliedIndex returns the index of the last durably applied entry; on
//     restart the log is replayed from the last snapshot and entries at or
//     below it are skipped, so nothing is applied twice.
//   - Snapshot writes a consistent image of the state, including its
//     applied index (a bbolt read transaction streamed with Tx.WriteTo). It
//     runs concurrently with ApplyBatch; the image may be newer than the
//     Raft snapshot index, which is harmless because replay skips by
//     applied index.
//   - Restore replaces the whole state by an image from Snapshot, applied
//     index included.
type FSM interface {
	ApplyBatch(entries []Entry) []error
	AppliedIndex() uint64
	Snapshot(w io.Writer) error
	Restore(r io.Reader) error
}

// resultsKept bounds how many recent entry results a node remembers for
// Propose callers that learn their index after the entry was applied.
const resultsKept = 4096

// fsmAdapter is the raft.BatchingFSM over the broker's FSM. It tracks the
// highest Raft index this node has applied (commands, configuration
// changes and replayed entries alike) so Propose can wait for it.
type fsmAdapter struct {
	user FSM

	mu      sync.Mutex
	applied uint64
	changed chan struct{} // closed and replaced when applied advances
	results map[uint64]error
	order   []uint64 // ring of indexes in results, oldest first
}

func newFSMAdapter(user FSM) *fsmAdapter {
	return &fsmAdapter{
		user:    user,
		applied: user.AppliedIndex(),
		changed: make(chan struct{}),
		results: make(map[uint64]error),
	}
}

// ApplyBatch implements raft.BatchingFSM.
func (a *fsmAdapter) ApplyBatch(logs []*raft.Log) []interface{} {
	resp := make([]interface{}, len(logs))
	if len(logs) == 0 {
		return resp
	}
	skip := a.user.AppliedIndex()
	var entries []Entry
	var pos []int
	for i, l := range logs {
		if l.Type == raft.LogCommand && l.Index > skip {
			entries = append(entries, Entry{Index: l.Index, Term: l.Term, Data: l.Data})
			pos = append(pos, i)
		}
	}
	var results []error
	if len(entries) > 0 {
		results = a.user.ApplyBatch(entries)
		if len(results) != len(entries) {
			panic(fmt.Sprintf("cluster: FSM returned %d results for %d entries", len(results), len(entries)))
		}
		for j, p := range pos {
			if results[j] != nil {
				resp[p] = results[j]
			}
		}
	}
	a.advance(logs[len(logs)-1].Index, entries, results)
	return resp
}

// Apply implements raft.FSM for a single entry.
func (a *fsmAdapter) Apply(l *raft.Log) interface{} { return a.ApplyBatch([]*raft.Log{l})[0] }

func (a *fsmAdapter) advance(index uint64, entries []Entry, results []error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, e := range entries {
		a.results[e.Index] = results[i]
		a.order = append(a.order, e.Index)
	}
	for len(a.order) > resultsKept {
		delete(a.results, a.order[0])
		a.order = a.order[1:]
	}
	if index > a.applied {
		a.applied = index
		close(a.changed)
		a.changed = make(chan struct{})
	}
}

// appliedState returns the applied index, the result of entry index if it
// is remembered, and a channel closed at the next advance.
func (a *fsmAdapter) appliedState(index uint64) (applied uint64, result error, known bool, changed <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	result, known = a.results[index]
	return a.applied, result, known, a.changed
}

func (a *fsmAdapter) appliedIndex() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.applied
}

// Snapshot implements raft.FSM; the image is written in Persist.
func (a *fsmAdapter) Snapshot() (raft.FSMSnapshot, error) { return fsmSnapshot{a.user}, nil }

// Restore implements raft.FSM.
func (a *fsmAdapter) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if err := a.user.Restore(rc); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.applied = a.user.AppliedIndex()
	clear(a.results)
	a.order = nil
	close(a.changed)
	a.changed = make(chan struct{})
	return nil
}

type fsmSnapshot struct{ user FSM }

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.user.Snapshot(sink); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s fsmSnapshot) Release() {}
