package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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
// segments (never the active one) by x-max-length-bytes and x-max-age.
//
// Goroutines: one maintenance goroutine per stream (retention, persisting
// tracked offsets, closing the log), counted in the server's WaitGroup so
// Server.Close waits for it; one reader goroutine per consumer, counted in
// stream.wg. Both stop when the stream is deleted or the server quits.
//
// Lock order: vhost.mu → streamTable.mu → stream.mu; a reader goroutine takes
// channel.umu → channel.cmu → outbox.mu. No lock is held across log I/O
// except by queue deletion, which closes the log under vhost.mu.
//
// Invariants: offsets are the log's, so they are never reused while the
// stream exists; a consumer's deliveries carry increasing offsets; an ack never
// removes data, only retention does, one whole sealed segment at a time.
//
// Caveats:
//   - Tracked offsets live in offsets.json, written by the maintenance
//     goroutine at most once a second and on a clean shutdown: after a crash
//     a tracking consumer may see up to a second of acked messages again.
//   - A reader notices its channel closed within streamPollEvery; a
//     basic.cancel or queue deletion stops it at once.
//   - "last" is the newest message (RabbitMQ: the newest chunk); seeking by
//     timestamp reads at most one index interval (msgstore's time index);
//     AMQP timestamps have one-second resolution.
//   - Global (channel-wide) prefetch is counted but not enforced for stream
//     consumers; per-consumer prefetch is required and enforced.
//   - x-single-active-consumer is not supported on streams. A definitions
//     import can declare a stream only in a vhost whose stream table was bound
//     to the server (by a management declare or a stream opened at start).
type stream struct {
	q      *Queue
	dir    string
	log    *msgstore.Log
	args   streamArgs
	logger *slog.Logger
	quit   <-chan struct{} // the server's quit channel

	mu        sync.Mutex
	consumers map[*consumer]*streamConsumer
	tracking  map[string]uint64 // tracking name → last acked offset
	dirty     bool              // tracking changed since it was written
	closing   bool              // no new consumers

	kick   chan struct{} // wakes the maintenance goroutine (cap 1)
	stop   chan struct{} // closed to delete or close the stream
	halt   chan struct{} // closed by the maintenance goroutine: readers stop
	done   chan struct{} // closed when the log is closed
	remove atomic.Bool   // delete the files on stop
	once   sync.Once
	wg     sync.WaitGroup // reader goroutines
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

// trackingFile holds a stream's tracked consumer offsets (JSON).
const trackingFile = "offsets.json"

// checkStreamDeclare refuses stream properties RabbitMQ refuses: a stream is
// durable, not exclusive and not auto-delete.
func checkStreamDeclare(vh *Vhost, name string, m *amqp.QueueDeclare) *amqp.Error {
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
	return nil
}

// openStream opens (or creates) the log of stream queue q and starts its
// maintenance goroutine, which srv.Close waits for.
func openStream(srv *Server, q *Queue) error {
	vh := q.vhost
	if vh.storage == nil {
		return fmt.Errorf("stream %q: %w", q.name, ErrStreamNoDataDir)
	}
	dir := filepath.Join(vh.storage.dir, "streams", dirName(q.name))
	cfg := msgstore.DefaultConfig(dir)
	cfg.SegmentSize = q.qa.stream.segmentSize
	cfg.IndexInterval = int(min(int64(cfg.IndexInterval), cfg.SegmentSize/4))
	cfg.Flush = srv.cfg.Flush
	cfg.FlushInterval = srv.cfg.FlushInterval
	cfg.FlushMessages = srv.cfg.FlushMessages
	if sa := q.qa.stream; sa.hasFlush {
		cfg.Flush = sa.flush
	}
	if sa := q.qa.stream; sa.flushInterval > 0 {
		cfg.FlushInterval = sa.flushInterval
	}
	if sa := q.qa.stream; sa.flushMessages > 0 {
		cfg.FlushMessages = sa.flushMessages
	}
	cfg.CompactDeadRatio = 1
	cfg.Logger = vh.log
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("stream %q: %w", q.name, err)
	}
	l, err := msgstore.OpenLog(cfg)
	if err != nil {
		return fmt.Errorf("stream %q: %w", q.name, err)
	}
	s := &stream{
		q: q, dir: dir, log: l, args: *q.qa.stream, logger: vh.log.With("stream", q.name), quit: srv.quit,
		consumers: make(map[*consumer]*streamConsumer),
		kick:      make(chan struct{}, 1), stop: make(chan struct{}), halt: make(chan struct{}), done: make(chan struct{}),
	}
	if s.tracking, err = readTracking(dir); err != nil {
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
	loc, err := s.log.Append(msgstore.Record{
		Exchange: []byte(m.Exchange), RoutingKey: []byte(m.RoutingKey), Properties: m.RawProps, Body: m.Body,
	})
	if err != nil {
		return 0, err
	}
	s.q.stats.published.inc()
	s.mu.Lock()
	for _, sc := range s.consumers {
		sc.signal()
	}
	s.mu.Unlock()
	if s.args.maxBytes > 0 {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return loc.Offset, nil
}

// tracked returns the last acked offset of tracking name.
func (s *stream) tracked(name string) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off, ok := s.tracking[name]
	return off, ok
}

// maintainEvery is how often a stream applies retention and writes tracked offsets.
func (s *stream) maintainEvery() time.Duration {
	d := time.Second
	if a := s.args.maxAge / 4; a > 0 && a < d {
		d = max(a, 10*time.Millisecond)
	}
	return d
}

// maintain is the stream's maintenance goroutine. On exit it stops the
// readers, writes the tracked offsets and closes (or deletes) the log.
func (s *stream) maintain(srvWG *sync.WaitGroup) {
	defer srvWG.Done()
	defer close(s.done)
	t := time.NewTicker(s.maintainEvery())
	defer t.Stop()
loop:
	for {
		select {
		case <-s.kick:
			s.applyRetention(false)
		case <-t.C:
			s.applyRetention(true)
			s.saveTracking()
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
		c.ch.serverCancel(c)
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
	s.saveTracking()
	if err := s.log.Close(); err != nil {
		s.logger.Error("closing stream", "err", err)
	}
}

// applyRetention removes the oldest sealed segments while the stream is over
// x-max-length-bytes or (when byAge) while a whole segment is older than x-max-age.
func (s *stream) applyRetention(byAge bool) {
	overSize := s.args.maxBytes > 0 && s.log.Stats().Bytes > s.args.maxBytes
	checkAge := byAge && s.args.maxAge > 0
	if !overSize && !checkAge {
		return
	}
	infos, err := s.log.Segments()
	if err != nil {
		s.logger.Error("stream retention", "err", err)
		return
	}
	var total int64
	for _, si := range infos {
		total += si.Size
	}
	cutoff := time.Now().Add(-s.args.maxAge).UnixNano()
	for i := 0; i+1 < len(infos) && !infos[i].Active; i++ {
		// Every record of segment i is older than the next segment's first.
		old := checkAge && infos[i+1].FirstTimestamp != 0 && infos[i+1].FirstTimestamp < cutoff
		big := s.args.maxBytes > 0 && total > s.args.maxBytes
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

// readTracking loads the tracked offsets written by saveTracking.
func readTracking(dir string) (map[string]uint64, error) {
	m := make(map[string]uint64)
	b, err := os.ReadFile(filepath.Join(dir, trackingFile))
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read tracked offsets: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: tracked offsets: %v", ErrStreamCorrupt, err)
	}
	return m, nil
}

// saveTracking writes the tracked offsets if they changed: to a temporary
// file, fsynced, then renamed over the old one.
func (s *stream) saveTracking() {
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return
	}
	b, err := json.Marshal(s.tracking)
	s.dirty = false
	s.mu.Unlock()
	if err == nil {
		err = writeFileSync(filepath.Join(s.dir, trackingFile), b)
	}
	if err != nil {
		s.logger.Error("writing tracked offsets", "err", err)
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
	}
}

// writeFileSync replaces path with data durably.
func writeFileSync(path string, data []byte) error {
	tmp := path + ".new"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Sentinel errors of stream queues (kept here, not in errors.go, which another
// engineer owns while streams are added).
var (
	// ErrStreamNoDataDir means a stream queue was declared on a server without
	// a data directory: streams exist only on disk.
	ErrStreamNoDataDir = errors.New("server: streams need a data directory")
	// ErrStreamCorrupt means a stream's tracked-offsets file could not be decoded.
	ErrStreamCorrupt = errors.New("server: stream tracking file corrupt")
	// ErrStreamNeedsAMQP means a stream queue was declared through the
	// management API, which does not create streams yet.
	ErrStreamNeedsAMQP = errors.New("server: stream queues are declared over AMQP")
)

// openDurableStorage opens a newly declared queue's storage: the log of a
// stream queue, the index of any other. c is nil for a declaration through the
// management API; the stream then needs the server bound to the vhost's
// stream table (Server.DeclareQueue binds it).
func openDurableStorage(c *conn, q *Queue) error {
	if q.qa.stream == nil {
		return q.openStorage()
	}
	srv := q.vhost.streams.server()
	if c != nil {
		srv = c.srv
	}
	if srv == nil {
		return ErrStreamNeedsAMQP
	}
	return openStream(srv, q)
}
