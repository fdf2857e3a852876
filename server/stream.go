package server

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/msgstore"
)

// A stream is the storage of a queue declared with x-queue-type=stream: an
// append-only msgstore.Log in <data>/vhosts/<vhost>/streams/<queue>/ that
// consumers read without removing anything. Publishing appends; every
// consumer has its own reader goroutine with its own Iterator, so a consumer
// replaying old data never blocks the tail. Retention removes whole old
// segments (never the active one) by max-length-bytes and max-age, from the
// x-arguments or a policy (the policy wins where both set one, as in RabbitMQ).
//
// Tracked offsets (x-stream-offset-tracking-name) live in the log itself, as
// tracking snapshot records (stream_tracking.go): records flagged
// streamFlagTracking whose body holds every tracking name's last acked offset.
// They take log offsets like messages but are never delivered.
//
// Goroutines: one maintenance goroutine per stream (retention, writing
// tracking snapshots, closing the log), counted in the server's WaitGroup so
// Server.Close waits for it; one reader goroutine per consumer, counted in
// stream.wg. Both stop when the stream is deleted or the server quits.
//
// Lock order: vhost.mu → streamTable.mu → stream.mu → stream.tmu;
// stream.amu → msgstore's append lock → stream.tmu (the prologue hook); a
// reader goroutine holds no stream lock while it delivers through its
// consumer's sink (channel.cmu to check the subscription, released, then
// channel.umu → outbox.mu). tmu is a leaf.
// Publishes hold amu shared around their Append; a snapshot writer holds it
// exclusively, which orders snapshots in the log as they were encoded. No lock
// is held across log I/O except amu (one write) and, by queue deletion,
// vhost.mu while the log closes.
//
// Invariants: offsets are the log's, so they are never reused while the
// stream exists; a consumer's deliveries carry increasing offsets; an ack never
// removes data, only retention does, one whole sealed segment at a time; every
// segment started while some offset is tracked begins with a tracking
// snapshot, so the newest snapshot is in the newest non-empty segment.
//
// Caveats:
//   - A tracking snapshot is written at most every streamTrackEvery after an
//     ack changed a tracked offset, at once when a tracking consumer is
//     cancelled (or its channel closes), and on a clean shutdown; it is as
//     durable as the stream's flush policy makes any record. After a crash a
//     tracking consumer resumes after the offset of the newest snapshot that
//     survived, so it may see up to streamTrackEvery of acked messages again.
//   - At most maxStreamTrackingNames tracking names per stream, counting
//     names whose consumers have not acked yet; there is no way to forget
//     one short of deleting the stream (a reserved name without an ack is
//     forgotten at restart).
//   - Tracking records take offsets and bytes: the first, last and next
//     offsets, segment count and bytes in StreamInfo are the log's and include
//     them; published, delivered and acked counters count messages only.
//   - Opening a stream after a clean shutdown reads one index interval (the
//     final snapshot); after a crash it reads the newest non-empty segment.
//   - A reader notices its channel closed within streamPollEvery; a
//     basic.cancel or queue deletion stops it at once.
//   - "last" is the newest message (RabbitMQ: the newest chunk); seeking by
//     timestamp reads at most one index interval (msgstore's time index);
//     AMQP timestamps have one-second resolution.
//   - A policy's stream-max-segment-size-bytes applies from the next segment;
//     the index interval stays the one chosen when the stream was opened.
//     Other policy keys (message-ttl, max-length, ...) do not apply to streams.
//   - Global (channel-wide) prefetch is counted but not enforced for stream
//     consumers; per-consumer prefetch is required and enforced.
//   - x-single-active-consumer is not supported on streams. A definitions
//     import can declare a stream only in a vhost whose stream table was bound
//     to the server (by a management declare or a stream opened at start).
type stream struct {
	q      *Queue
	dir    string
	log    *msgstore.Log
	logger *slog.Logger
	quit   <-chan struct{} // the server's quit channel

	// ret is the effective retention (arguments and policy); replaced whole
	// by setRetention, read without locks.
	ret atomic.Pointer[streamRetention]

	mu        sync.Mutex
	consumers map[*consumer]*streamConsumer
	closing   bool // no new consumers

	// amu orders appends against tracking snapshots: shared around a
	// publish's Append, exclusive around a snapshot's encoding and Append.
	amu sync.RWMutex
	// snapAppending is set (under amu held exclusively) while a snapshot is
	// appended, so the prologue hook does not add a second one before it.
	snapAppending bool

	tmu        sync.Mutex
	tracking   map[string]uint64   // tracking name → last acked offset
	reserved   map[string]struct{} // names of consumers that have not acked yet
	trackDirty bool                // tracking changed since the last snapshot was encoded

	// lastMsg is the newest message's offset + 1 (0: none); lastKnown says
	// whether it is known (after a crash it may be resolved on first use).
	lastMsg   atomic.Uint64
	lastKnown atomic.Bool
	lastMu    sync.Mutex // serialises resolveLast

	kick      chan struct{} // an append: size retention (cap 1)
	reconf    chan struct{} // retention changed, or a deferred retention run is due (cap 1)
	trackKick chan struct{} // tracking changed (cap 1)
	stop      chan struct{} // closed to delete or close the stream
	halt      chan struct{} // closed by the maintenance goroutine: readers stop
	done      chan struct{} // closed when the log is closed
	remove    atomic.Bool   // delete the files on stop
	// retryArmed: a WhenDurable callback will re-run retention (retryWhenDurable).
	retryArmed atomic.Bool
	once       sync.Once
	wg         sync.WaitGroup // reader goroutines
}

// streamRetention is a stream's effective retention.
type streamRetention struct {
	maxBytes    int64         // 0 = unlimited
	maxAge      time.Duration // 0 = unlimited
	segmentSize int64
}

// streamTable maps a vhost's stream queues to their streams.
type streamTable struct {
	mu  sync.Mutex
	m   map[*Queue]*stream
	srv *Server // set by bind: declarations without a connection (management) open streams with it
}

// bind records the server that owns the vhost, so a stream can be opened by a
// declaration that has no connection (the management API).
func (t *streamTable) bind(srv *Server) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.srv = srv
}

func (t *streamTable) server() *Server {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.srv
}

func (t *streamTable) get(q *Queue) *stream {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[q]
}

func (t *streamTable) put(q *Queue, s *stream) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[*Queue]*stream)
	}
	t.m[q] = s
}

func (t *streamTable) take(q *Queue) *stream {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.m[q]
	delete(t.m, q)
	return s
}

// checkStreamDeclare refuses stream properties RabbitMQ refuses: a stream is
// durable, not exclusive and not auto-delete; then a segment size above
// RabbitMQ's bound (rabbit_stream_queue:declare checks it after the
// properties, so Warren does too).
func checkStreamDeclare(vh *Vhost, name string, m *amqp.QueueDeclare, sa *streamArgs) *amqp.Error {
	prop := ""
	switch {
	case !m.Durable:
		prop = "non-durable"
	case m.Exclusive:
		prop = "exclusive-owner"
	case m.AutoDelete:
		prop = "auto-delete"
	case vh.storage == nil:
		return amqp.NewError(amqp.PreconditionFailed, methodQueueDeclare, "%s: streams need a data directory", describeQueue(name, vh.name))
	}
	if prop != "" {
		return amqp.NewError(amqp.PreconditionFailed, methodQueueDeclare, "invalid property '%s' for %s", prop, describeQueue(name, vh.name))
	}
	if sa.segmentSize > maxDeclaredSegmentSize {
		return amqp.NewError(amqp.PreconditionFailed, methodQueueDeclare, "Exceeded max value for x-stream-max-segment-size-bytes")
	}
	return nil
}

// openStream opens (or creates) the log of stream queue q, restores its
// tracked offsets and starts its maintenance goroutine, which srv.Close waits for.
func openStream(srv *Server, q *Queue) error {
	vh := q.vhost
	if vh.storage == nil {
		return fmt.Errorf("stream %q: %w", q.name, ErrStreamNoDataDir)
	}
	dir := vh.storage.streamDir(q.name)
	sa := *q.qa.stream
	cfg := msgstore.DefaultConfig(dir)
	cfg.SegmentSize = storeSegmentSize(sa.segmentSize)
	cfg.IndexInterval = int(min(int64(cfg.IndexInterval), cfg.SegmentSize/4))
	cfg.Flush = vh.storage.policy // the vhost's, unless the stream sets its own
	cfg.FlushInterval = srv.cfg.FlushInterval
	cfg.FlushMessages = srv.cfg.FlushMessages
	if sa.hasFlush {
		cfg.Flush = sa.flush
	}
	if sa.flushInterval > 0 {
		cfg.FlushInterval = sa.flushInterval
	}
	if sa.flushMessages > 0 {
		cfg.FlushMessages = sa.flushMessages
	}
	cfg.CompactDeadRatio = 1
	cfg.Logger = vh.log
	if err := makeNamedDir(dir, q.name); err != nil {
		return fmt.Errorf("stream %q: %w", q.name, err)
	}
	l, err := msgstore.OpenLog(cfg)
	if err != nil {
		return fmt.Errorf("stream %q: %w", q.name, err)
	}
	s := &stream{
		q: q, dir: dir, log: l, logger: vh.log.With("stream", q.name), quit: srv.quit,
		consumers: make(map[*consumer]*streamConsumer), reserved: make(map[string]struct{}),
		kick: make(chan struct{}, 1), reconf: make(chan struct{}, 1), trackKick: make(chan struct{}, 1),
		stop: make(chan struct{}), halt: make(chan struct{}), done: make(chan struct{}),
	}
	s.ret.Store(&streamRetention{maxBytes: sa.maxBytes, maxAge: sa.maxAge, segmentSize: sa.segmentSize})
	if err := s.openTracking(); err != nil {
		return errors.Join(fmt.Errorf("stream %q: %w", q.name, err), l.Close())
	}
	vh.streams.bind(srv)
	vh.streams.put(q, s)
	srv.wg.Add(1)
	go s.maintain(&srv.wg)
	return nil
}

// closeStream stops q's stream, if it is one, and deletes its files when
// remove is set (queue.delete). It waits for the stream's goroutines.
func closeStream(q *Queue, remove bool) {
	s := q.vhost.streams.take(q)
	if s == nil {
		return
	}
	s.remove.Store(remove)
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// append writes m to the log and wakes the readers.
func (s *stream) append(m *Message) (uint64, error) {
	s.amu.RLock()
	loc, err := s.log.Append(msgstore.Record{
		Exchange: []byte(m.Exchange), RoutingKey: []byte(m.RoutingKey), Properties: m.RawProps, Body: m.Body,
	})
	if err == nil {
		s.noteLast(loc.Offset + 1)
	}
	s.amu.RUnlock()
	if err != nil {
		return 0, err
	}
	s.q.stats.published.inc()
	s.mu.Lock()
	for _, sc := range s.consumers {
		sc.signal()
	}
	s.mu.Unlock()
	if s.ret.Load().maxBytes > 0 {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return loc.Offset, nil
}

// setRetention applies new effective retention (a policy changed): the
// maintenance goroutine re-applies retention at once, and new segments get
// the new size.
func (s *stream) setRetention(r streamRetention) {
	if old := s.ret.Load(); *old == r {
		return
	}
	s.ret.Store(&r)
	if err := s.log.SetSegmentSize(storeSegmentSize(r.segmentSize)); err != nil {
		s.logger.Error("stream segment size from policy", "size", r.segmentSize, "err", err)
	}
	select {
	case s.reconf <- struct{}{}:
	default:
	}
}

// maintainEvery is how often a stream checks retention by age and retries
// a tracking snapshot that failed.
func (s *stream) maintainEvery() time.Duration {
	d := time.Second
	if a := s.ret.Load().maxAge / 4; a > 0 && a < d {
		d = max(a, 10*time.Millisecond)
	}
	return d
}

// maintain is the stream's maintenance goroutine. On exit it stops the
// readers, writes the final tracking snapshot and closes (or deletes) the log.
func (s *stream) maintain(srvWG *sync.WaitGroup) {
	defer srvWG.Done()
	defer close(s.done)
	t := time.NewTicker(s.maintainEvery())
	defer t.Stop()
	var track <-chan time.Time // armed while a snapshot is due
loop:
	for {
		select {
		case <-s.kick:
			s.applyRetention(false)
		case <-s.reconf:
			t.Reset(s.maintainEvery())
			s.applyRetention(true)
		case <-t.C:
			s.applyRetention(true)
			s.snapshot(false) // retries one that failed
		case <-s.trackKick:
			if track == nil {
				track = time.After(streamTrackEvery)
			}
		case <-track:
			track = nil
			s.snapshot(false)
		case <-s.stop:
			break loop
		case <-s.quit:
			break loop
		}
	}
	s.mu.Lock()
	s.closing = true
	var cancelled []*consumer // a deleted stream's consumers get basic.cancel
	if s.remove.Load() {
		for c := range s.consumers {
			cancelled = append(cancelled, c)
		}
	}
	s.mu.Unlock()
	close(s.halt)
	s.wg.Wait()
	for _, c := range cancelled {
		c.sink.cancelled(c)
	}
	if s.remove.Load() {
		if err := s.log.Close(); err != nil {
			s.logger.Warn("closing a deleted stream", "err", err)
		}
		if err := os.RemoveAll(s.dir); err != nil {
			s.logger.Error("removing a deleted stream's files", "err", err)
		}
		return
	}
	// The final snapshot is the log's last record unless a publish races the
	// shutdown: the next open then reads only it.
	s.snapshot(true)
	if err := s.log.Close(); err != nil {
		s.logger.Error("closing stream", "err", err)
	}
}

// retryWhenDurable re-runs retention once the record at off is durable (one
// waiter at a time; it runs on the log's flusher and only signals).
func (s *stream) retryWhenDurable(off uint64) {
	if !s.retryArmed.CompareAndSwap(false, true) {
		return
	}
	s.log.WhenDurable(off, func(error) {
		s.retryArmed.Store(false)
		select {
		case s.reconf <- struct{}{}:
		default:
		}
	})
}

// snapshot writes a tracking snapshot (when tracking changed, or always when
// final) and logs a failure; a failed one is retried by the next tick.
func (s *stream) snapshot(final bool) {
	if err := s.writeSnapshot(final); err != nil && !errors.Is(err, msgstore.ErrClosed) {
		s.logger.Error("writing tracking snapshot", "err", err)
	}
}

// applyRetention removes the oldest sealed segments while the stream is over
// max-length-bytes or (when byAge) while a whole segment is older than
// max-age. Under the fsync policy it waits until the active segment's first
// record (the tracking snapshot, when offsets are tracked) is on stable
// storage, so a power cut cannot leave the tracked offsets only in a
// segment it removed.
func (s *stream) applyRetention(byAge bool) {
	r := s.ret.Load()
	overSize := r.maxBytes > 0 && s.log.Stats().Bytes > r.maxBytes
	checkAge := byAge && r.maxAge > 0
	if !overSize && !checkAge {
		return
	}
	infos, err := s.log.Segments()
	if err != nil {
		s.logger.Error("stream retention", "err", err)
		return
	}
	if st := s.log.Stats(); st.FlushPolicy == msgstore.FlushFsync && len(infos) > 0 && st.SyncedOffset <= infos[len(infos)-1].Base {
		s.retryWhenDurable(infos[len(infos)-1].Base)
		return
	}
	var total int64
	for _, si := range infos {
		total += si.Size
	}
	cutoff := time.Now().Add(-r.maxAge).UnixNano()
	for i := 0; i+1 < len(infos) && !infos[i].Active; i++ {
		// Every record of segment i is older than the next segment's first.
		old := checkAge && infos[i+1].FirstTimestamp != 0 && infos[i+1].FirstTimestamp < cutoff
		big := r.maxBytes > 0 && total > r.maxBytes
		if !old && !big {
			return
		}
		if err := s.log.RemoveSegment(infos[i].Base); err != nil {
			s.logger.Error("stream retention", "segment", infos[i].Base, "err", err)
			return
		}
		total -= infos[i].Size
	}
}

// Sentinel errors of stream queues (kept here, not in errors.go, which another
// engineer owns while streams are added).
var (
	// ErrStreamNoDataDir means a stream queue was declared on a server without
	// a data directory: streams exist only on disk.
	ErrStreamNoDataDir = errors.New("server: streams need a data directory")
	// ErrStreamCorrupt means a stream's tracking snapshot or legacy
	// tracked-offsets file (offsets.json) could not be decoded.
	ErrStreamCorrupt = errors.New("server: stream tracking data corrupt")
	// ErrStreamNeedsAMQP means a stream queue was declared through the
	// management API, which does not create streams yet.
	ErrStreamNeedsAMQP = errors.New("server: stream queues are declared over AMQP")
)
