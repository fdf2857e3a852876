package replica

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"time"
)

// FailureHandler is optionally implemented by a Handler that wants to know
// when its replica stopped because its log failed (a full or broken disk):
// records appended since the last Committed will never be committed by
// this replica.
type FailureHandler interface {
	Failed(err error)
}

// ResignHandler is optionally implemented by a Handler that wants to know
// when its leader replica should hand leadership over: its own fsync or
// sends are stuck (ErrLeaderStalled) or its disk is full (ErrDiskFull;
// offsets Append returned above last will never be committed). The owner
// asks the controller to elect another in-sync member. It is called once
// per episode, from the replica's goroutine or the manager's watchdog, and
// must not block.
type ResignHandler interface {
	ShouldResign(reason error, last uint64)
}

// event is an input for the replica's goroutine from another one.
type event struct {
	msg        *Msg
	disconnect string // the connection to this node was lost
	propDone   bool   // a controller call returned
	propErr    error
}

// replica is one queue's replica on this node. Its goroutine alone runs
// the protocol state machine (Leader or Mirror) and uses the Log; other
// goroutines hand it appends, placements, messages and compaction under mu.
type replica struct {
	m     *manager
	queue string
	log   Log
	h     Handler

	// Owned by the goroutine.
	leader   *Leader
	mirror   *Mirror
	reported uint64   // last hw given to Handler.Committed
	calling  bool     // a controller call is in flight
	hbPub    *hbEntry // the line this leader put in its pairs' heartbeat frames, nil when none
	hbNodes  []string // the nodes it is in

	mu        sync.Mutex // guards the fields below; never held across Log calls
	p         Placement  // newest placement given
	applied   uint64     // Version of the placement the goroutine applied
	leading   bool       // Append accepted: the goroutine leads p's epoch
	next      uint64     // offset the next Append gets while leading
	pending   [][]byte   // appended data not yet given to the Leader
	pendFirst uint64     // offset of pending[0]
	events    []event
	compact   uint64
	closed    bool
	failErr   error
	blocked   error
	diskFull  error     // the leader's log hit ENOSPC: no more appends this leadership
	stalled   error     // ErrLeaderStalled while this leader's own backlog is too old
	syncStart time.Time // when the running Sync started; zero when none runs
	st        Status

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// newReplica sets up the role p gives this node before the goroutine
// starts, so a leader's Append works as soon as Open returns.
func newReplica(m *manager, queue string, p Placement, log Log, h Handler) *replica {
	r := &replica{m: m, queue: queue, log: log, h: h, p: p, applied: p.Version,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	r.apply(p, time.Now())
	return r
}

func (r *replica) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *replica) post(e event) {
	r.mu.Lock()
	if !r.closed {
		r.events = append(r.events, e)
	}
	r.mu.Unlock()
	r.wake()
}

func (r *replica) Append(data ...[]byte) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return 0, ErrClosed
	case r.failErr != nil:
		return 0, r.failErr
	case r.diskFull != nil:
		return 0, r.diskFull
	case !r.leading:
		return 0, ErrNotLeader
	case len(data) == 0:
		return r.next - 1, nil
	}
	if len(r.pending) == 0 {
		r.pendFirst = r.next
	}
	for _, d := range data {
		r.pending = append(r.pending, append([]byte(nil), d...))
	}
	r.next += uint64(len(data))
	r.wake()
	return r.next - 1, nil
}

// SetPlacement records a committed placement for the goroutine to apply.
// An older one (lower Version) is ignored: placements may be re-delivered.
func (r *replica) SetPlacement(p Placement) {
	r.mu.Lock()
	if p.Version < r.p.Version || checkPlacement(p) != nil || !slices.Contains(p.Replicas, r.m.cfg.Node) {
		r.mu.Unlock()
		return
	}
	if p.Epoch > r.p.Epoch {
		r.leading = false // no appends until the new role is set up
	}
	r.p = p
	r.wake()
	r.mu.Unlock()
	// A replica added to the placement needs its connection as Open gives
	// one: the leader sends it nothing before its FOLLOW, which cannot
	// come when the leader's node is the pair's dialler.
	r.m.mu.Lock()
	if !r.m.closed {
		for _, n := range p.Replicas {
			if n != r.m.cfg.Node {
				r.m.peerLocked(n)
			}
		}
	}
	r.m.mu.Unlock()
}

func (r *replica) Compact(off uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if off > r.compact {
		r.compact = off
		r.wake()
	}
}

func (r *replica) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	st.Mirrors = cloneMirrors(r.st.Mirrors)
	st.Blocked = r.blocked
	for _, err := range []error{r.stalled, r.diskFull, r.failErr} {
		if err != nil {
			st.Blocked = err
		}
	}
	return st
}

func cloneMirrors(m map[string]MirrorStatus) map[string]MirrorStatus {
	if m == nil {
		return nil
	}
	out := make(map[string]MirrorStatus, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Close stops the replica's goroutine and waits for it. Records appended but
// not yet written are dropped (never committed); the log stays open.
func (r *replica) Close() error {
	r.mu.Lock()
	already := r.closed
	r.closed = true
	r.mu.Unlock()
	if !already {
		close(r.stop)
	}
	<-r.done
	return nil
}

// run is the replica's goroutine (owner: the manager; stop: r.stop; waited
// by manager.wg and Close). It steps on every input and every half
// heartbeat, so lag checks, FOLLOW retries and heartbeats need no timers
// of their own.
func (r *replica) run() {
	defer r.m.wg.Done()
	defer close(r.done)
	defer r.m.remove(r.queue, r)
	defer r.publishHeartbeat(nil, nil)
	t := time.NewTicker(max(r.m.cfg.Heartbeat/2, time.Millisecond))
	defer t.Stop()
	for {
		if err := r.step(time.Now()); err != nil {
			r.fail(err)
		}
		select {
		case <-r.stop:
			return
		case <-r.kick:
		case <-t.C:
		}
	}
}

// step applies what arrived, appends and ships, group-commits (one Sync per
// step, while the connection writers send), and reports commits.
func (r *replica) step(now time.Time) error {
	r.mu.Lock()
	if r.failErr != nil {
		r.mu.Unlock()
		return nil
	}
	p, evs, data, first, compact := r.p, r.events, r.pending, r.pendFirst, r.compact
	r.events, r.pending = nil, nil
	newPlacement := p.Version != r.applied
	r.applied = p.Version
	r.mu.Unlock()

	var out []Msg
	if newPlacement {
		out = append(out, r.apply(p, now)...)
	}
	for _, e := range evs {
		out = append(out, r.handle(e, now)...)
	}
	if r.leader != nil && r.leader.Fenced() {
		// A mirror knows a newer epoch: this leadership is over. What was
		// appended and not committed never will be; the new placement that
		// makes this node follow is on its way through the controller.
		r.setLeading(false, 0)
		r.setBlocked(ErrFenced)
		data = nil
	}
	if r.leader != nil && len(data) > 0 && !r.isDiskFull() {
		last, err := r.leader.Append(data...)
		if err != nil && !r.leaderDiskFull(err) {
			return fmt.Errorf("replica: queue %s: append: %w", r.queue, err)
		}
		if want := first + uint64(len(data)) - 1; err == nil && last != want {
			return fmt.Errorf("replica: queue %s: appended up to %d, offsets promised up to %d", r.queue, last, want)
		}
	}
	if r.leader != nil {
		r.leader.SetCompact(compact)
		out = append(out, r.leader.Pump(now)...)
	}
	r.send(out)
	out = out[:0]
	if err := r.sync(); err != nil {
		return err
	}
	if r.mirror != nil {
		out = append(out, r.mirror.Synced()...)
		out = append(out, r.mirror.Tick(now)...)
	}
	if r.leader != nil {
		r.leader.Advance(r.m.lease())
		r.leader.SetSelfLag(r.m.sendBacklog(r.leader.Placement().Replicas, time.Now()))
		r.propose(now)
	}
	r.send(out)
	return r.finish(now, compact)
}

// sync is the step's group commit. The time it runs is visible to the
// watchdog (a stuck fsync makes a leader resign). Its mirrors are not
// blamed for it: this step's Tick measures lag at the step's start, and
// the next step applies the ACKs that arrived meanwhile before its Tick.
func (r *replica) sync() error {
	if r.log.DurableOffset() >= r.log.LastOffset() || (r.leader != nil && r.isDiskFull()) {
		return nil
	}
	start := time.Now()
	r.mu.Lock()
	r.syncStart = start
	r.mu.Unlock()
	err := r.log.Sync()
	r.mu.Lock()
	r.syncStart = time.Time{}
	r.mu.Unlock()
	if err == nil || (r.leader != nil && r.leaderDiskFull(err)) {
		return nil
	}
	if r.mirror != nil {
		r.send(r.mirror.reject(r.mirror.Placement().Leader, RejectDiskFull))
	}
	return fmt.Errorf("replica: queue %s: sync: %w", r.queue, err)
}

func (r *replica) isDiskFull() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.diskFull != nil
}

// leaderDiskFull handles a leader's log error: ENOSPC stops appends for
// this leadership (what the log holds is still shipped and may commit)
// and reports that the leader should resign; any other error is the
// caller's (the replica fails).
func (r *replica) leaderDiskFull(err error) bool {
	if !errors.Is(err, syscall.ENOSPC) {
		return false
	}
	last := r.log.LastOffset()
	r.mu.Lock()
	first := r.diskFull == nil
	if first {
		r.diskFull = fmt.Errorf("%w: queue %s, log holds up to %d: %w", ErrDiskFull, r.queue, last, err)
	}
	reason := r.diskFull
	r.pending = nil
	r.mu.Unlock()
	if rh, ok := r.h.(ResignHandler); ok && first {
		rh.ShouldResign(reason, last)
	}
	return true
}

// checkStalled is the watchdog's look at a leader (manager.watch): a Sync
// running, or sends to every mirror queued, for longer than the lag
// timeout make it report ErrLeaderStalled once, until the backlog clears.
func (r *replica) checkStalled(now time.Time) {
	r.mu.Lock()
	leading, syncStart, replicas, last := r.leading, r.syncStart, r.p.Replicas, r.st.LastOffset
	r.mu.Unlock()
	if !leading || len(replicas) < 2 {
		return
	}
	age := r.m.sendBacklog(replicas, now)
	if !syncStart.IsZero() {
		age = max(age, now.Sub(syncStart))
	}
	r.mu.Lock()
	var reason error
	switch {
	case age <= r.m.cfg.LagTimeout:
		r.stalled = nil
	case r.stalled == nil:
		r.stalled = fmt.Errorf("%w: queue %s, backlog %v over %v", ErrLeaderStalled, r.queue, age.Round(time.Millisecond), r.m.cfg.LagTimeout)
		reason = r.stalled
	}
	r.mu.Unlock()
	if rh, ok := r.h.(ResignHandler); ok && reason != nil {
		rh.ShouldResign(reason, last)
	}
}

// send stamps msgs with the queue and routes them.
func (r *replica) send(msgs []Msg) {
	for i := range msgs {
		msgs[i].Queue = r.queue
	}
	r.m.send(msgs)
}

// apply sets up the role p gives this node.
func (r *replica) apply(p Placement, now time.Time) []Msg {
	switch {
	case r.leader != nil && r.leader.SetPlacement(p, now):
		return nil
	case r.mirror != nil && r.mirror.SetPlacement(p):
		return nil
	}
	r.leader, r.mirror = nil, nil
	r.mu.Lock()
	r.diskFull, r.stalled = nil, nil // a new role meets its own disk errors
	r.mu.Unlock()
	if p.Leader != r.m.cfg.Node {
		r.mirror = NewMirror(r.m.cfg.Node, p, r.log, r.m.cfg.timing())
		r.setLeading(false, 0)
		r.setBlocked(nil)
		return nil
	}
	l, err := NewLeader(r.m.cfg.Node, p, r.log, r.m.cfg.timing(), now)
	r.setBlocked(err)
	if err != nil {
		// ErrRestartedLeader or ErrFenced: wait for the controller's next
		// placement; a log error stops the replica.
		if !errors.Is(err, ErrRestartedLeader) && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrStorageMismatch) {
			r.fail(fmt.Errorf("replica: queue %s: lead epoch %d: %w", r.queue, p.Epoch, err))
		}
		r.setLeading(false, 0)
		return nil
	}
	r.leader = l
	r.setLeading(true, r.log.LastOffset()+1)
	return nil
}

// setBlocked records why the replica neither leads nor follows (nil: it does).
func (r *replica) setBlocked(err error) {
	r.mu.Lock()
	r.blocked = err
	r.mu.Unlock()
}

func (r *replica) setLeading(on bool, next uint64) {
	r.mu.Lock()
	r.leading, r.next, r.pending = on, next, nil
	r.mu.Unlock()
}

// handle passes one event to the state machine.
func (r *replica) handle(e event, now time.Time) []Msg {
	switch {
	case e.propDone:
		r.calling = false
		if r.leader != nil {
			r.leader.ProposalDone(e.propErr)
		}
	case e.disconnect != "":
		if r.leader != nil {
			r.leader.OnDisconnect(e.disconnect, now)
		}
		if r.mirror != nil && r.mirror.Placement().Leader == e.disconnect {
			r.mirror.OnDisconnect()
		}
	case r.leader != nil:
		switch e.msg.Type {
		case MsgFollow:
			return r.leader.OnFollow(*e.msg)
		case MsgAck:
			r.leader.OnAck(*e.msg, now)
		case MsgReject:
			r.leader.OnReject(*e.msg)
		}
	case r.mirror != nil:
		switch e.msg.Type {
		case MsgStart:
			return r.mirror.OnStart(*e.msg)
		case MsgAppend:
			return r.mirror.OnAppend(*e.msg)
		case MsgHeartbeat:
			return r.mirror.OnHeartbeat(*e.msg)
		}
	}
	return nil
}

// propose sends the leader's in-sync change to the controller on a
// goroutine of its own (owner: this replica; it ends when the call
// returns, bounded by the lag timeout; waited by manager.wg).
func (r *replica) propose(now time.Time) {
	if r.calling || r.m.cfg.Controller == nil {
		return
	}
	pr := r.leader.Tick(now)
	if pr == nil {
		return
	}
	r.calling = true
	r.m.wg.Add(1)
	go func() {
		defer r.m.wg.Done()
		ctx, cancel := contextWithTimeout(r.m, r.m.cfg.LagTimeout)
		defer cancel()
		var err error
		if sc, ok := r.m.cfg.Controller.(StorageController); ok {
			err = sc.AlterISRStorage(ctx, r.queue, pr.Epoch, pr.Version, pr.ISR, pr.StorageIDs)
		} else {
			err = r.m.cfg.Controller.AlterISR(ctx, r.queue, pr.Epoch, pr.Version, pr.ISR)
		}
		r.post(event{propDone: true, propErr: err})
	}()
}

// finish reports a new high watermark, compacts and publishes the status.
func (r *replica) finish(now time.Time, compact uint64) error {
	var hw uint64
	st := Status{LastOffset: r.log.LastOffset(), DurableOffset: r.log.DurableOffset()}
	var hb *hbEntry
	var hbNodes []string
	if r.leader != nil {
		if e, ok := r.leader.Heartbeat(); ok {
			hb, hbNodes = &e, r.leader.Placement().Replicas
		}
	}
	r.publishHeartbeat(hb, hbNodes)
	switch {
	case r.leader != nil:
		hw = r.leader.HW()
		st.Leader, st.Epoch = true, r.leader.Placement().Epoch
		st.Mirrors = r.leader.MirrorStatus(now)
	case r.mirror != nil:
		hw = r.mirror.Committed()
		st.Epoch = r.mirror.Placement().Epoch
		compact = max(compact, r.mirror.CompactTo())
	}
	if hw > r.reported {
		r.reported = hw
		r.h.Committed(hw)
	}
	st.HW = r.reported
	r.mu.Lock()
	r.st = st
	r.mu.Unlock()
	if drop := min(compact, r.reported+1); drop > 1 && drop > r.log.FirstOffset() {
		if err := r.log.DropBefore(drop); err != nil {
			return fmt.Errorf("replica: queue %s: compact before %d: %w", r.queue, drop, err)
		}
	}
	return nil
}

// publishHeartbeat updates this queue's line in the heartbeat frames of
// its pairs when it changed (nil: not leading, off every frame).
func (r *replica) publishHeartbeat(e *hbEntry, nodes []string) {
	same := (e == nil) == (r.hbPub == nil) && (e == nil || *e == *r.hbPub) && slices.Equal(nodes, r.hbNodes)
	if same {
		return
	}
	var drop []string
	for _, n := range r.hbNodes {
		if !slices.Contains(nodes, n) {
			drop = append(drop, n)
		}
	}
	r.m.setHeartbeat(r.queue, e, nodes, drop)
	r.hbPub, r.hbNodes = e, slices.Clone(nodes)
}

// fail stops the replica's appends after a log error and tells the handler.
func (r *replica) fail(err error) {
	r.mu.Lock()
	already := r.failErr != nil
	if !already {
		r.failErr = err
	}
	r.pending, r.leading = nil, false
	r.mu.Unlock()
	if fh, ok := r.h.(FailureHandler); ok && !already {
		fh.Failed(err)
	}
}
