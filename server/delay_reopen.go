package server

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/warrenmq/warren/queueindex"
)

// A delaying exchange's index that fails a write (a full disk) refuses every
// later call, as a queue's does (queue_reopen.go), and is reopened the same
// way, by its store's committer with back-off. While it is down:
//
//   - delayed publishes to the exchange are nacked at once;
//   - nothing fires from it, so no fired message is in flight when it is
//     reopened (fired messages wait for their queues' commit round, which
//     fails while the disk is full, and the messages fire late, not twice);
//   - fired messages settled in that round skip the index (their stored
//     copies are released as usual).
//
// The reopened index holds what reached the disk. It is reconciled with the
// store's memory: an entry of a message in head or on disk only (not before
// the horizon) is kept; one of neither was settled while the index was down
// and is acked; a live entry the failed index had not written (Unflushed) is
// appended again, and a message in head gets its new sequence. Head stays
// ordered by due time, then sequence: an appended-again message may fire
// after others due in the same millisecond.

// reopener is an index owner whose failed index its store's committer
// reopens: a durable queue or a delaying exchange.
type reopener interface {
	// tryReopen reopens the index if its back-off allows; it reports
	// whether no more attempts are needed, or else how long until the next.
	tryReopen(now time.Time) (done bool, wait time.Duration)
}

// errDelayIndexDown refuses delayed publishes while the index is down, and
// errDelayStoreRefused those the message store refused: both are logged
// once when they start (noteWrite, indexFailedLocked), not per publish.
var (
	errDelayIndexDown    = errors.New("the delayed messages index failed and is not reopened yet")
	errDelayStoreRefused = errors.New("the message store refused the delayed message")
)

// delayReopen is a down delay store's progress towards a usable index;
// under delayStore.mu.
type delayReopen struct {
	down     bool
	at       time.Time // next attempt
	backoff  time.Duration
	up       time.Time // last reopen, with the back-off then
	prev     time.Duration
	carry    map[uint64]queueindex.Entry // live entries the failed index had not written
	inflight int                         // fired messages not yet settled (popDue to settle or retry)
}

// indexFailedLocked marks the store down after its index returned err; the
// first failure is logged.
func (d *delayStore) indexFailedLocked(err error) {
	if d.reopen.down || d.dropped {
		return
	}
	r := &d.reopen
	r.down = true
	r.backoff = reopenFirst
	if time.Since(r.up) < reopenMax {
		r.backoff = min(2*r.prev, reopenMax)
	}
	r.at = time.Now().Add(r.backoff)
	d.ex.vhost.log.Error("delayed messages index write failed; delayed publishes to the exchange are nacked and nothing fires until it is reopened",
		"exchange", d.ex.name, "err", err)
	d.st.scheduleReopen(d)
}

// noteIndexErr marks the store down when err means its index failed.
func (d *delayStore) noteIndexErr(err error) {
	if isIndexFailure(err) {
		d.indexFailedLocked(err)
	}
}

// tryReopen reopens the index (reopener), on the committer of d.st.
func (d *delayStore) tryReopen(now time.Time) (bool, time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := &d.reopen
	if d.dropped || !r.down {
		return true, 0
	}
	if r.inflight > 0 || d.scanning {
		// Fired messages settle after the next round; a refill's scan ends
		// on its own. Either way the wait is short.
		return false, reopenFirst
	}
	if now.Before(r.at) {
		return false, r.at.Sub(now)
	}
	n, err := d.reopenIndexLocked()
	if err != nil {
		r.backoff = min(2*r.backoff, reopenMax)
		r.at = now.Add(r.backoff)
		d.ex.vhost.log.Debug("reopening a delayed messages index failed; will retry", "exchange", d.ex.name,
			"err", err, "retry_in", r.backoff)
		return false, r.backoff
	}
	r.down, r.carry = false, nil
	r.up, r.prev = now, r.backoff
	d.shrunk = true // a refill chosen from the old index is stale
	d.ex.vhost.log.Info("delayed messages index reopened; delayed publishes are confirmed again",
		"exchange", d.ex.name, "kept", n.kept, "appended_again", n.appended, "settled_while_down", n.acked)
	d.st.markDirty(d)
	d.ex.vhost.delays.wake()
	return true, 0
}

// reopenIndexLocked closes the failed index (keeping what it had not
// written), opens it again and reconciles it with head and the horizon.
func (d *delayStore) reopenIndexLocked() (reopenCounts, error) {
	old := d.index
	if d.reopen.carry == nil {
		carry := make(map[uint64]queueindex.Entry)
		if err := old.Unflushed(func(seq uint64, e queueindex.Entry) { carry[seq] = e }); err != nil &&
			!errors.Is(err, queueindex.ErrClosed) {
			return reopenCounts{}, err
		}
		d.reopen.carry = carry
	}
	if err := old.Close(); err != nil && !errors.Is(err, queueindex.ErrClosed) {
		d.ex.vhost.log.Warn("closing a failed delayed messages index", "exchange", d.ex.name, "err", err)
	}
	ix, _, err := d.st.openIndexAt(d.dir, d.ex.name)
	if err != nil {
		return reopenCounts{}, err
	}
	n, err := d.adoptIndexLocked(ix)
	if err != nil {
		return reopenCounts{}, errors.Join(err, ix.Abandon())
	}
	return n, nil
}

// adoptIndexLocked reconciles ix with the store's memory and makes it the
// store's index; it changes nothing in memory unless it succeeds.
func (d *delayStore) adoptIndexLocked(ix *queueindex.Index) (reopenCounts, error) {
	var n reopenCounts
	inHead := make(map[uint64]int, len(d.head)) // sequence → position in head
	for i := range d.head {
		inHead[d.head[i].seq] = i
	}
	diskOnly := func(seq uint64, e queueindex.Entry) bool {
		it := delayItem{due: e.Expiry, seq: seq}
		return d.spilled > 0 && !it.before(&d.horizon)
	}
	carry := d.reopen.carry
	var acks []uint64
	err := ix.ForEach(func(seq uint64, e queueindex.Entry) bool {
		delete(carry, seq)
		if _, ok := inHead[seq]; ok || diskOnly(seq, e) {
			n.kept++
			return true
		}
		acks = append(acks, seq) // fired and settled while the index was down
		return true
	})
	if err != nil {
		return n, fmt.Errorf("reading the reopened index: %w", err)
	}
	type again struct {
		old uint64
		e   queueindex.Entry
	}
	var agains []again
	for seq, e := range carry {
		if _, ok := inHead[seq]; ok || diskOnly(seq, e) {
			agains = append(agains, again{seq, e})
		}
	}
	slices.SortFunc(agains, func(a, b again) int { return cmp.Compare(a.old, b.old) })
	newSeq := make([]uint64, len(agains))
	for i, a := range agains {
		var err error
		if newSeq[i], err = ix.Append(a.e); err != nil {
			return n, fmt.Errorf("appending to the reopened index: %w", err)
		}
	}
	// From here on nothing fails: apply.
	for _, seq := range acks {
		if err := ix.Ack(seq); err != nil {
			d.ex.vhost.log.Error("delayed message index ack failed", "exchange", d.ex.name, "err", err)
		}
	}
	for i, a := range agains {
		if pos, ok := inHead[a.old]; ok {
			d.head[pos].seq = newSeq[i]
		}
	}
	if len(agains) > 0 {
		slices.SortFunc(d.head, compareDelayItems) // a sorted slice is a heap
	}
	n.acked, n.appended = len(acks), len(agains)
	d.index = ix
	return n, nil
}
