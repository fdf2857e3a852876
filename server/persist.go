package server

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/msgstore"
	"github.com/warrenmq/warren/queueindex"
)

// vhostStorage is one vhost's message persistence: the shared message store
// and the group committer that makes publishes durable before their confirms.
//
// Order of durability in each commit round: the store's data is synced, then
// every queue index with changes is flushed (synced under the fsync policy),
// then the confirms waiting on the round are released. So data is durable
// before the index entries that point at it, and those before the confirm.
type vhostStorage struct {
	vhost string
	dir   string
	cfg   *Config
	log   *slog.Logger
	store *msgstore.Store
	// policy is the vhost's flush policy: Config.VhostFlush, else Config.Flush.
	policy msgstore.FlushPolicy
	// files is the node's index file cache, shared by every queue index.
	files *queueindex.FileCache

	mu sync.Mutex
	// dirty are the index owners with changes for the next round, each
	// once: its dirtyMark says it is here. The round swaps it with
	// dirtySpare, so the two slices are reused.
	dirty, dirtySpare []indexOwner
	// waiters are the publishes whose confirms wait for the next round; the
	// round swaps them with spare, so the two slices are reused.
	waiters []completion
	spare   []completion
	synced  map[indexOwner]struct{} // flushed since the last timed sync (interval/messages policies)
	// rounds are the tx.commits waiting for the next round (waitRound);
	// stopped is set before the last round, after which none may wait.
	rounds  []chan<- error
	stopped bool
	// after are called with the outcome of the next round (afterRound).
	after []func(error)
	// reopen are the queues and delaying exchanges whose index failed a
	// write; the committer reopens them (queue_reopen.go, delay_reopen.go).
	reopen map[reopener]struct{}

	kick chan struct{}
	quit chan struct{}
	wg   sync.WaitGroup

	// failing is set while writes to the store fail (a full disk), so the
	// failure is logged once when it starts and once when it ends.
	failing atomic.Bool
}

func openVhostStorage(dataDir, vhost string, cfg *Config, log *slog.Logger) (*vhostStorage, error) {
	dir := vhostDir(dataDir, vhost)
	if err := makeNamedDir(dir, vhost); err != nil {
		return nil, fmt.Errorf("creating the directory of vhost %q: %w", vhost, err)
	}
	policy := cfg.Flush
	if p, ok := cfg.VhostFlush[vhost]; ok {
		policy = p
	}
	return openStorageAt(dir, vhost, policy, cfg, log)
}

// openTransientStorage opens the vhost's store for transient queues that page
// to disk. Nothing in it outlives the broker: it is wiped at start and at a
// clean stop, and never fsynced. It lives inside the vhost's own directory,
// which no other vhost's name can address (layout.go).
func openTransientStorage(dataDir, vhost string, cfg *Config, log *slog.Logger) (*vhostStorage, error) {
	dir := filepath.Join(vhostDir(dataDir, vhost), "transient")
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("wiping the transient store of vhost %q: %w", vhost, err)
	}
	return openStorageAt(dir, vhost, msgstore.FlushOS, cfg, log.With("store", "transient"))
}

func openStorageAt(dir, vhost string, policy msgstore.FlushPolicy, cfg *Config, log *slog.Logger) (*vhostStorage, error) {
	scfg := msgstore.DefaultConfig(filepath.Join(dir, "msgstore"))
	scfg.Flush = policy
	scfg.FlushInterval = cfg.FlushInterval
	scfg.FlushMessages = cfg.FlushMessages
	if cfg.SegmentSize > 0 {
		scfg.SegmentSize = cfg.SegmentSize
	}
	scfg.Logger = log
	store, err := msgstore.Open(scfg)
	if err != nil {
		return nil, fmt.Errorf("opening message store of vhost %q: %w", vhost, err)
	}
	v := &vhostStorage{
		vhost: vhost, dir: dir, cfg: cfg, policy: policy, log: log, store: store,
		synced: make(map[indexOwner]struct{}),
		kick:   make(chan struct{}, 1), quit: make(chan struct{}),
	}
	v.wg.Add(1)
	go v.commitLoop()
	return v, nil
}

// queueDir is where a queue's index lives.
func (v *vhostStorage) queueDir(queue string) string {
	return filepath.Join(v.dir, "queues", nameDir(queue))
}

// streamDir is where a stream's log lives.
func (v *vhostStorage) streamDir(queue string) string {
	return filepath.Join(v.dir, "streams", nameDir(queue))
}

// openIndex opens the index of a durable queue.
func (v *vhostStorage) openIndex(queue string) (*queueindex.Index, queueindex.Recovered, error) {
	return v.openIndexAt(v.queueDir(queue), queue)
}

// openIndexAt opens a queue index in dir, which belongs to name; an empty
// name opens an existing directory whatever it belongs to.
func (v *vhostStorage) openIndexAt(dir, name string) (*queueindex.Index, queueindex.Recovered, error) {
	cfg := queueindex.DefaultConfig()
	cfg.Dir = dir
	cfg.Sync = v.policy == msgstore.FlushFsync
	cfg.Logger = v.log
	cfg.Files = v.files // the data directory is locked (meta.db, msgstore): no per-queue lock needed
	if name != "" {
		if err := makeNamedDir(cfg.Dir, name); err != nil {
			return nil, queueindex.Recovered{}, err
		}
	}
	return queueindex.Open(cfg)
}

// indexOwner is what keeps a queue index whose changes a commit round
// flushes: a durable queue, or a delaying exchange (delay_store.go).
type indexOwner interface {
	// flushIndex writes the index's pending changes.
	flushIndex() error
	// syncIndex fsyncs what flushIndex wrote (interval and messages policies).
	syncIndex() error
	// indexName names the owner in logs.
	indexName() string
	// dirtyMark is the owner's mark in the dirty list of its store.
	dirtyMark() *dirtyMark
}

// dirtyMark tells whether an index owner is in a store's dirty list. A
// queue's every append, delivery and ack marks it, several times per
// fanout publish; with the mark, all but the first of a round are one
// atomic load, with no map insert (hashing an interface) nor the store's
// lock, which the committer also takes.
type dirtyMark struct {
	in atomic.Pointer[vhostStorage] // the store whose dirty list holds the owner
}

// markDirty puts q in the next round's dirty list unless it is there. A
// change made before the call is flushed by that round: the round clears
// the mark, under mu, before it flushes, so a change whose markDirty still
// saw the mark set is already in the index that round flushes.
func (v *vhostStorage) markDirty(q indexOwner) {
	mk := q.dirtyMark()
	if mk.in.Load() == v {
		return
	}
	v.mu.Lock()
	if mk.in.Load() != v {
		mk.in.Store(v)
		v.dirty = append(v.dirty, q)
	}
	v.mu.Unlock()
	v.signal()
}

// await completes c after the next commit round: one destination of a
// publish, its stored copy, is durable then.
func (v *vhostStorage) await(c completion) {
	v.mu.Lock()
	v.waiters = append(v.waiters, c)
	v.mu.Unlock()
	v.signal()
}

// waitRound blocks until a commit round that starts after the call is done,
// so everything written before it is durable under the policy, and returns
// the round's error. tx.commit-ok waits for it: without it a crash right
// after the commit-ok loses the transaction's acks and publishes, whose
// index changes are written by the round.
func (v *vhostStorage) waitRound() error {
	done := make(chan error, 1)
	v.mu.Lock()
	if v.stopped {
		v.mu.Unlock()
		return errors.New("the message store is stopping")
	}
	v.rounds = append(v.rounds, done)
	v.mu.Unlock()
	v.signal()
	return <-done
}

func (v *vhostStorage) signal() {
	select {
	case v.kick <- struct{}{}:
	default:
	}
}

// commitLoop runs commit rounds while there is work: group commit, so many
// publishers share each fsync. Under the interval and messages policies it
// also syncs the indexes on a timer.
func (v *vhostStorage) commitLoop() {
	defer v.wg.Done()
	var tick <-chan time.Time
	if v.policy == msgstore.FlushInterval || v.policy == msgstore.FlushMessages {
		t := time.NewTicker(v.cfg.FlushInterval)
		defer t.Stop()
		tick = t.C
	}
	// retry fires when a failed queue index is due for another reopen.
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-v.kick:
			v.retryReopens(retry)
			v.round()
		case <-retry.C:
			v.retryReopens(retry)
			v.round()
		case <-tick:
			v.syncIndexes()
		case <-v.quit:
			v.mu.Lock()
			v.stopped = true
			v.mu.Unlock()
			v.round()
			return
		}
	}
}

// retryReopens reopens the failed queue indexes that are due and arms retry
// for the next attempt.
func (v *vhostStorage) retryReopens(retry *time.Timer) {
	if wait := v.reopenIndexes(); wait > 0 {
		retry.Reset(wait)
	}
}

// testHookRound, when set by a test, runs before each commit round that
// has publishes or tx.commits waiting (n of them), on the committer goroutine, before the
// store is synced; testHookRoundDone runs after their completions.
var (
	testHookRound     atomic.Pointer[func(n int)]
	testHookRoundDone atomic.Pointer[func(n int)]
)

// round makes everything written so far durable under the policy and then
// completes the publishes waiting on it: ok unless a sync or flush failed.
func (v *vhostStorage) round() {
	v.mu.Lock()
	dirty, waiters, rounds, after := v.dirty, v.waiters, v.rounds, v.after
	for _, q := range dirty {
		q.dirtyMark().in.CompareAndSwap(v, nil)
	}
	v.dirty, v.dirtySpare = v.dirtySpare[:0], nil
	v.waiters, v.spare, v.rounds, v.after = v.spare[:0], nil, nil, nil
	v.mu.Unlock()
	if len(dirty) == 0 && len(waiters) == 0 && len(rounds) == 0 && len(after) == 0 {
		v.putSpare(waiters, dirty)
		return
	}
	if h := testHookRound.Load(); h != nil && len(waiters)+len(rounds) > 0 {
		(*h)(len(waiters) + len(rounds))
	}
	err := v.commit(dirty)
	completeAll(waiters, err == nil)
	for _, done := range rounds {
		done <- err
	}
	for _, fn := range after {
		fn(err)
	}
	if h := testHookRoundDone.Load(); h != nil && len(waiters) > 0 {
		(*h)(len(waiters))
	}
	clear(waiters)
	clear(dirty)
	v.putSpare(waiters, dirty)
}

// commit syncs the store (fsync policy) and flushes the dirty indexes.
func (v *vhostStorage) commit(dirty []indexOwner) error {
	var err error
	if v.policy == msgstore.FlushFsync {
		err = v.store.Sync()
	}
	for _, q := range dirty {
		if ferr := q.flushIndex(); ferr != nil {
			err = errors.Join(err, ferr)
		}
	}
	if err != nil {
		v.log.Error("commit round failed: confirms are nacked", "err", err)
	}
	if v.policy != msgstore.FlushFsync {
		v.mu.Lock()
		for _, q := range dirty {
			v.synced[q] = struct{}{}
		}
		v.mu.Unlock()
	}
	return err
}

// putSpare hands the drained waiters and dirty slices back for the round
// after next.
func (v *vhostStorage) putSpare(s []completion, dirty []indexOwner) {
	v.mu.Lock()
	v.spare, v.dirtySpare = s[:0], dirty[:0]
	v.mu.Unlock()
}

// syncIndexes fsyncs the store and the indexes written since the last timed
// sync (interval and messages policies).
func (v *vhostStorage) syncIndexes() {
	v.mu.Lock()
	qs := v.synced
	v.synced = make(map[indexOwner]struct{})
	v.mu.Unlock()
	for q := range qs {
		if err := q.syncIndex(); err != nil && !errors.Is(err, queueindex.ErrClosed) {
			v.log.Error("syncing queue index", "queue", q.indexName(), "err", err)
		}
	}
}

// stop runs a last commit round and stops the committer.
func (v *vhostStorage) stop() {
	close(v.quit)
	v.wg.Wait()
}

// noteWrite logs the start and the end of a run of failed store writes;
// publishes refused meanwhile are nacked, not logged one by one.
func (v *vhostStorage) noteWrite(err error) {
	switch {
	case err != nil && v.failing.CompareAndSwap(false, true):
		v.log.Error("writing to the message store failed; persistent publishes are refused until it works again", "err", err)
	case err == nil && v.failing.Load() && v.failing.CompareAndSwap(true, false):
		v.log.Info("writing to the message store works again")
	}
}

// release drops one queue's reference to a stored message.
func (v *vhostStorage) release(loc msgstore.Loc) {
	if err := v.store.Release(loc); err != nil {
		v.log.Error("releasing a message in the store", "offset", loc.Offset, "err", err)
	}
}

// put stores a message once for refs durable queues.
func (v *vhostStorage) put(m *Message, refs int) (msgstore.Loc, error) {
	if h := testHookStoreWrite.Load(); h != nil {
		(*h)(v, 1)
	}
	return v.store.Put(storeRecord(m), refs)
}

// rebuildRefs feeds the store every location the vhost's queue indexes still
// hold, after a crash left the store without its reference counts.
func (v *vhostStorage) rebuildRefs(queues []*Queue, delayed []*queueindex.Index) error {
	if !v.store.NeedsRefRebuild() {
		return nil
	}
	var iterErr error
	info, err := v.store.RebuildRefs(func(yield func(msgstore.Loc) bool) {
		for _, q := range queues {
			if q.index == nil {
				continue
			}
			err := q.index.ForEach(func(_ uint64, e queueindex.Entry) bool {
				return yield(msgstore.Loc{Offset: e.Offset, Pos: e.Pos, Size: e.Size})
			})
			if err != nil {
				iterErr = errors.Join(iterErr, fmt.Errorf("queue %q: %w", q.name, err))
			}
		}
		for _, ix := range delayed {
			err := ix.ForEach(func(_ uint64, e queueindex.Entry) bool {
				return yield(msgstore.Loc{Offset: e.Offset, Pos: e.Pos, Size: e.Size})
			})
			if err != nil {
				iterErr = errors.Join(iterErr, fmt.Errorf("delayed messages: %w", err))
			}
		}
	})
	if err != nil {
		return err
	}
	v.log.Info("message store reference counts rebuilt from queue indexes", "refs", info.Refs,
		"records", info.Records, "missing", info.Missing, "duration", info.Duration)
	return iterErr
}

// shutdownStorage stops every vhost's committer, closes the queue indexes
// (writing their checkpoints) and then the stores (writing theirs), so the
// next start reads no message bodies and scans no segments.
func (s *Server) shutdownStorage() {
	for _, vh := range s.Vhosts() {
		vh.delays.stop() // no firing may touch a store that is closing
		for _, q := range vh.Queues() {
			q.stopTimers() // no expiry may touch a store that is closing
		}
		closeQuorumQueues(vh)
		if vh.storage == nil {
			continue
		}
		vh.storage.stop()
		if vh.transient != nil {
			vh.transient.stop()
		}
		vh.closeDelayIndexes()
		for _, q := range vh.Queues() {
			q.mu.Lock()
			q.closeIndexLocked(!isDurable(q)) // transient indexes go with their store
			q.mu.Unlock()
		}
		if err := vh.storage.store.Close(); err != nil {
			vh.log.Error("closing the message store", "err", err)
		}
		if vh.transient != nil {
			if err := vh.transient.store.Close(); err != nil {
				vh.log.Error("closing the transient store", "err", err)
			}
			if err := os.RemoveAll(vh.transient.dir); err != nil {
				vh.log.Error("wiping the transient store", "err", err)
			}
		}
	}
}

// recoverStorage finishes start-up recovery of every vhost's messages and
// logs one line per vhost.
func (s *Server) recoverStorage(started time.Time) error {
	for _, vh := range s.Vhosts() {
		if vh.storage == nil {
			continue
		}
		queues := vh.Queues()
		if err := vh.recoverDelayed(); err != nil {
			return fmt.Errorf("vhost %q: %w", vh.name, err)
		}
		if err := vh.storage.rebuildRefs(queues, vh.delayIndexes()); err != nil {
			return fmt.Errorf("vhost %q: %w", vh.name, err)
		}
		// Counted before the delayer starts firing into these queues.
		var msgs, bytes int
		for _, q := range queues {
			msgs += q.paged
			bytes += q.pagedBytes
		}
		vh.delays.recovered()
		rec := vh.storage.store.Recovery()
		vh.log.Info("vhost recovered", "queues", len(queues), "messages", msgs, "bytes", bytes,
			"seconds", time.Since(started).Seconds(), "store", rec)
	}
	return nil
}

// StorageStats describes a vhost's message store for the management API.
type StorageStats struct {
	msgstore.Stats
	// FlushPolicy is the vhost's policy and Guarantee what a confirm means
	// under it.
	FlushPolicy string
	Guarantee   string
}

// StorageStats returns the vhost's message store statistics; ok is false
// when the server keeps no data on disk.
func (vh *Vhost) StorageStats() (StorageStats, bool) {
	if vh.storage == nil {
		return StorageStats{}, false
	}
	p := vh.storage.policy
	return StorageStats{Stats: vh.storage.store.Stats(), FlushPolicy: p.String(), Guarantee: p.DurableMeaning()}, true
}
