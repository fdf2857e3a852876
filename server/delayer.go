package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/msgstore"
	"github.com/warrenmq/warren/queueindex"
)

// delayer is a vhost's one goroutine that fires delayed messages when they
// are due (routing them from their exchange as its x-delayed-type), refills
// the exchanges' in-memory heads from disk and removes deleted exchanges'
// delayed messages. It starts with the vhost's first delayed message and
// stops with the vhost (stop).
type delayer struct {
	vh *Vhost

	mu       sync.Mutex
	started  bool
	stopped  bool
	cleanups []delayCleanup
	// stores are the vhost's delaying exchanges that have held a message,
	// so a round visits only those.
	stores map[*delayStore]struct{}
	// recovering holds the start until the store's reference counts are
	// rebuilt (recoverStorage): a message fired before would be refused.
	recovering bool

	kick chan struct{}
	quit chan struct{}
	wg   sync.WaitGroup
}

// delayCleanup is a deleted exchange's index whose stored copies are to be
// released before the index is removed.
type delayCleanup struct {
	ix *queueindex.Index
	st *vhostStorage
}

// wake tells the delayer that an exchange's earliest delayed message
// changed, starting the delayer if it is not running.
func (d *delayer) wake() {
	d.mu.Lock()
	if !d.started && !d.stopped && !d.recovering {
		d.started = true
		d.kick, d.quit = make(chan struct{}, 1), make(chan struct{})
		d.wg.Add(1)
		go d.run()
	}
	kick := d.kick
	d.mu.Unlock()
	if kick != nil {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
}

// recovered lets the delayer start once the vhost's storage is recovered.
func (d *delayer) recovered() {
	d.mu.Lock()
	d.recovering = false
	d.mu.Unlock()
	d.wake()
}

// register adds a delaying exchange that holds messages to those a round
// visits; unregister removes a deleted one.
func (d *delayer) register(ds *delayStore) {
	d.mu.Lock()
	if d.stores == nil {
		d.stores = make(map[*delayStore]struct{})
	}
	d.stores[ds] = struct{}{}
	d.mu.Unlock()
}

func (d *delayer) unregister(ds *delayStore) {
	d.mu.Lock()
	delete(d.stores, ds)
	d.mu.Unlock()
}

// registered copies the registered stores into buf.
func (d *delayer) registered(buf []*delayStore) []*delayStore {
	d.mu.Lock()
	defer d.mu.Unlock()
	for ds := range d.stores {
		buf = append(buf, ds)
	}
	return buf
}

// cleanup queues a deleted exchange's index for the delayer.
func (d *delayer) cleanup(ix *queueindex.Index, st *vhostStorage) {
	d.mu.Lock()
	d.cleanups = append(d.cleanups, delayCleanup{ix: ix, st: st})
	d.mu.Unlock()
	d.wake()
}

// stop stops the goroutine and waits for it; cleanups not done yet are
// closed, and the next start removes them (recoverDelayed). A second stop
// does nothing more.
func (d *delayer) stop() {
	d.mu.Lock()
	first := !d.stopped
	d.stopped = true
	started := d.started
	d.mu.Unlock()
	if started && first {
		close(d.quit)
	}
	d.wg.Wait()
	d.mu.Lock()
	cs := d.cleanups
	d.cleanups = nil
	d.mu.Unlock()
	for _, c := range cs {
		if err := c.ix.Close(); err != nil && !errors.Is(err, queueindex.ErrClosed) {
			d.vh.log.Error("closing a deleted exchange's delayed messages", "err", err)
		}
	}
}

func (d *delayer) run() {
	defer d.wg.Done()
	r := newRouter()
	r.noDelay = true
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var fired []delayItem
	var stores []*delayStore
	for {
		d.runCleanups()
		var next int64
		var more bool
		stores = d.registered(stores[:0])
		fired, next, more = d.fireDue(r, stores, fired)
		clear(stores)
		if more {
			select {
			case <-d.quit:
				return
			default:
				continue
			}
		}
		wait := time.Hour
		if next > 0 {
			wait = time.Duration(next-nowMillis()) * time.Millisecond
		}
		timer.Reset(max(wait, 0))
		select {
		case <-d.quit:
			return
		case <-d.kick:
		case <-timer.C:
		}
	}
}

// delayStores returns the vhost's exchanges that delay messages.
func (vh *Vhost) delayStores() []*delayStore {
	vh.mu.RLock()
	defer vh.mu.RUnlock()
	var out []*delayStore
	for _, ex := range vh.exchanges {
		if ex.delay != nil {
			out = append(out, ex.delay)
		}
	}
	return out
}

// fireDue fires the due messages of stores, up to delayFireBatch each,
// and refills heads that ran low. It returns the earliest due time left (0
// for none) and whether a batch was full, so there may be more due now.
func (d *delayer) fireDue(r *router, stores []*delayStore, buf []delayItem) ([]delayItem, int64, bool) {
	var next int64
	more := false
	durable := false
	type firedBatch struct {
		ds    *delayStore
		items []delayItem
	}
	var batches []firedBatch
	now := nowMillis()
	for _, ds := range stores {
		start := len(buf)
		buf = ds.popDue(now, delayFireBatch, buf)
		items := buf[start:]
		if len(items) == delayFireBatch {
			more = true
		}
		d.maybeRefill(ds)
		if len(items) > 0 {
			items = d.fire(r, ds, items, now)
			batches = append(batches, firedBatch{ds, items})
			durable = durable || (ds.st != nil && ds.st == d.vh.storage)
		}
		if due, ok := ds.next(); ok && (next == 0 || due < next) {
			next = due
		}
	}
	if !durable {
		for _, b := range batches {
			b.ds.settle(b.items)
		}
		clear(buf)
		return buf[:0], next, more
	}
	// The fired copies in durable queues are on disk before the delayed ones
	// are settled, so a crash between the two delivers twice, never not at
	// all. The settling waits for the commit round, the firing does not.
	d.vh.storage.afterRound(func(err error) {
		if err != nil {
			d.vh.log.Error("delayed messages fired but their queues' commit round failed", "err", err)
		}
		for _, b := range batches {
			b.ds.settle(b.items)
		}
	})
	return nil, next, more // buf belongs to the batches now
}

// maybeRefill starts a refill of ds's head from disk in a goroutine of its
// own when the head runs low, so the firing goes on during the index pass.
func (d *delayer) maybeRefill(ds *delayStore) {
	from, ix, ok := ds.beginRefill()
	if !ok {
		return
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		sel, err := scanRefill(from, ix)
		if err := ds.finishRefill(sel, err); err != nil {
			d.vh.log.Error("reading delayed messages from disk", "exchange", ds.ex.name, "err", err)
		}
		d.wake()
	}()
}

// delayRetry is how long a fired message whose durable copy the store
// refused (a full disk) waits before it is fired again.
const delayRetry = time.Second

// testHookDelayFired, when set by a benchmark, is told each fired message's
// due time and the time it was routed (unix milliseconds).
var testHookDelayFired atomic.Pointer[func(due, routed int64)]

// fire routes due messages from their exchange as its x-delayed-type does
// and returns those to settle: all but the ones the store refused, which
// stay delayed and are fired again after delayRetry.
func (d *delayer) fire(r *router, ds *delayStore, items []delayItem, now int64) []delayItem {
	done := items[:0]
	for _, it := range items {
		m, err := ds.load(&it)
		if err != nil {
			d.vh.log.Error("a delayed message cannot be read; it is dropped", "exchange", ds.ex.name, "err", err)
			done = append(done, it)
			continue
		}
		res := d.vh.publish(&publishing{r: r, ex: ds.ex, m: m, ttl: m.ttl})
		clear(r.queues)
		if res.routed {
			ds.ex.stats.publishOut.inc() // as the plugin's bump_routed_stats
		}
		if h := testHookDelayFired.Load(); h != nil {
			(*h)(it.due, nowMillis())
		}
		if res.storeFailed {
			it.due = now + delayRetry.Milliseconds()
			ds.retry(it)
			continue
		}
		done = append(done, it)
	}
	return done
}

// load returns a fired message: from memory, or read back from the store
// with its expiration applied again.
func (ds *delayStore) load(it *delayItem) (*Message, error) {
	if it.msg != nil {
		m := *it.msg // the publisher's copy may be in queues: not changed here
		m.props = nil
		bccForFiring(&m)
		return &m, nil
	}
	rec, err := ds.st.store.Get(it.loc)
	if err != nil {
		return nil, err
	}
	m := messageFromRecord(rec)
	bccForFiring(m)
	if p, err := m.Properties(); err == nil && p.Expiration != "" {
		if ttl, perr := parseExpiration(p.Expiration); perr == "" {
			m.ttl = ttl
		}
	}
	return m, nil
}

// runCleanups releases deleted exchanges' stored copies and removes their
// indexes.
func (d *delayer) runCleanups() {
	d.mu.Lock()
	cs := d.cleanups
	d.cleanups = nil
	d.mu.Unlock()
	for _, c := range cs {
		if err := releaseDelayIndex(c.ix, c.st); err != nil {
			d.vh.log.Error("removing a deleted exchange's delayed messages", "err", err)
		}
	}
}

// releaseDelayIndex releases every stored copy ix still refers to and
// removes ix.
func releaseDelayIndex(ix *queueindex.Index, st *vhostStorage) error {
	err := ix.ForEach(func(_ uint64, e queueindex.Entry) bool {
		st.release(msgstore.Loc{Offset: e.Offset, Pos: e.Pos, Size: e.Size})
		return true
	})
	return errors.Join(err, ix.Delete())
}

// afterRound calls fn with the outcome of the next commit round, on the
// committer's goroutine, once the round is done.
func (v *vhostStorage) afterRound(fn func(error)) {
	v.mu.Lock()
	v.after = append(v.after, fn)
	v.mu.Unlock()
	v.signal()
}

// recoverDelayed opens the indexes of the vhost's durable delaying exchanges
// at start, each in the newest of its directories, and removes the others:
// those of exchanges deleted before their cleanup finished. It runs before
// the store's reference counts are rebuilt (after a crash), which then count
// the delayed copies; without a rebuild the leftovers' copies are released.
func (vh *Vhost) recoverDelayed() error {
	st := vh.storage
	if st == nil {
		return nil
	}
	vh.delays.mu.Lock()
	vh.delays.recovering = true // until recoverStorage calls recovered
	vh.delays.mu.Unlock()
	entries, err := os.ReadDir(delayedDir(st))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	newest := make(map[string]string) // name hash -> directory
	var dirs []string
	for _, e := range entries {
		hash, _, ok := strings.Cut(e.Name(), ".")
		if !ok || !e.IsDir() {
			continue
		}
		dirs = append(dirs, e.Name())
		if e.Name() > newest[hash] {
			newest[hash] = e.Name()
		}
	}
	claimed := make(map[string]bool)
	for _, ds := range vh.delayStores() {
		if !ds.ex.durable {
			continue
		}
		name := newest[nameDir(ds.ex.name)]
		if name == "" {
			continue
		}
		claimed[name] = true
		if err := vh.recoverDelayStore(ds, filepath.Join(delayedDir(st), name)); err != nil {
			return err
		}
	}
	for _, name := range dirs {
		if !claimed[name] {
			if err := vh.removeDelayDir(filepath.Join(delayedDir(st), name)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (vh *Vhost) recoverDelayStore(ds *delayStore, dir string) error {
	ix, _, err := vh.storage.openIndexAt(dir, ds.ex.name)
	if err != nil {
		return fmt.Errorf("delayed messages of %s: %w", describeExchange(ds.ex.name, vh.name), err)
	}
	ds.mu.Lock()
	err = ds.recoverLocked(vh.storage, ix, dir)
	ds.mu.Unlock()
	if err != nil {
		return fmt.Errorf("delayed messages of %s: %w", describeExchange(ds.ex.name, vh.name), err)
	}
	return nil
}

// removeDelayDir removes a leftover index directory, releasing its stored
// copies unless the store's counts are about to be rebuilt without them.
func (vh *Vhost) removeDelayDir(dir string) error {
	if vh.storage.store.NeedsRefRebuild() {
		return os.RemoveAll(dir)
	}
	ix, _, err := vh.storage.openIndexAt(dir, "")
	if err != nil {
		return fmt.Errorf("opening leftover delayed messages %s: %w", dir, err)
	}
	return releaseDelayIndex(ix, vh.storage)
}

// closeDelayIndexes closes the durable delaying exchanges' indexes at
// shutdown, after the last commit round, writing their checkpoints.
func (vh *Vhost) closeDelayIndexes() {
	for _, ds := range vh.delayStores() {
		ds.mu.Lock()
		ix := ds.index
		ds.index, ds.dropped = nil, true
		ds.mu.Unlock()
		if ix == nil {
			continue
		}
		if err := ix.Close(); err != nil && !errors.Is(err, queueindex.ErrClosed) {
			vh.log.Error("closing delayed messages", "exchange", ds.ex.name, "err", err)
		}
	}
}

// delayIndexes returns the open indexes of the vhost's delaying exchanges,
// for the store's reference count rebuild.
func (vh *Vhost) delayIndexes() []*queueindex.Index {
	var out []*queueindex.Index
	for _, ds := range vh.delayStores() {
		ds.mu.Lock()
		if ds.index != nil && ds.st == vh.storage {
			out = append(out, ds.index)
		}
		ds.mu.Unlock()
	}
	return out
}

// Heaps of delay items: a min-heap for the head, a max-heap for a selection.

func heapPush(h []delayItem, it delayItem) []delayItem {
	h = append(h, it)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].before(&h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func heapPop(h []delayItem) ([]delayItem, delayItem) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = delayItem{}
	h = h[:last]
	for i := 0; ; {
		l, s := 2*i+1, i
		if l < len(h) && h[l].before(&h[s]) {
			s = l
		}
		if r := l + 1; r < len(h) && h[r].before(&h[s]) {
			s = r
		}
		if s == i {
			break
		}
		h[i], h[s] = h[s], h[i]
		i = s
	}
	return h, top
}

func maxHeapPush(h []delayItem, it delayItem) []delayItem {
	h = append(h, it)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[p].before(&h[i]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func maxHeapDown(h []delayItem, i int) {
	for {
		l, s := 2*i+1, i
		if l < len(h) && h[s].before(&h[l]) {
			s = l
		}
		if r := l + 1; r < len(h) && h[s].before(&h[r]) {
			s = r
		}
		if s == i {
			return
		}
		h[i], h[s] = h[s], h[i]
		i = s
	}
}
