package server

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/warrenmq/warren/msgstore"
)

// Offset tracking in the stream's own log, as RabbitMQ streams keep tracking
// chunks in theirs. A tracking snapshot is an ordinary msgstore record with
// Flags = streamFlagTracking whose body holds every tracking name's last
// acked offset (the whole set, never a delta, so the newest snapshot alone is
// the state). Snapshots take log offsets like messages and readers skip them.
//
// Where snapshots are written:
//   - by the maintenance goroutine, at most every streamTrackEvery after an
//     ack moved a tracked offset;
//   - synchronously when a tracking consumer is cancelled or its channel
//     closes, before basic.cancel-ok: a confirm for any later publish to the
//     stream then proves the consumer's offset is durable;
//   - as the prologue of every segment msgstore starts (Log.SetPrologue) while
//     some offset is tracked, so the active segment always holds the newest
//     snapshot and retention, which removes only sealed segments, never
//     removes it;
//   - on a clean shutdown, as the log's last record, carrying the exact
//     newest message offset (for "last") so the next open reads nothing else.
//
// Snapshot writers hold stream.amu exclusively across encoding and Append
// while publishes hold it shared, and the prologue is encoded under msgstore's
// append lock inside a publish; so snapshots appear in the log in the order
// they were encoded, and the newest by offset is the newest by content.
//
// On open (openTracking): if the log's last record is a snapshot that knows
// the newest message, it is the state (one index interval read). Otherwise
// (a crash) the newest non-empty segment is read in full: its last snapshot
// is the state, because a segment started while any offset was tracked
// begins with one, and one that does not (the log's first segment, or one
// started while nothing was tracked) follows every older snapshot's content.
// A legacy offsets.json is merged in, written as a snapshot, made durable and
// removed.

// Tracking constants.
const (
	// streamFlagTracking marks a stream record that is a tracking snapshot,
	// not a message. Messages are appended with no flag set.
	streamFlagTracking uint8 = 1 << 0
	// maxStreamTrackingNames bounds the tracking names of one stream (and so
	// a snapshot: at most 1024 × 264 bytes).
	maxStreamTrackingNames = 1024
	// maxTrackingNameLen is the longest x-stream-offset-tracking-name (a shortstr).
	maxTrackingNameLen = 255
	// streamTrackEvery is the longest a changed tracked offset waits for its
	// snapshot, and the shortest time between two such snapshots.
	streamTrackEvery = 200 * time.Millisecond
	// legacyTrackingFile is where earlier versions kept tracked offsets (JSON).
	legacyTrackingFile = "offsets.json"
)

// Tracking snapshot body layout (big-endian):
//
//	version  uint8   trackingVersion
//	flags    uint8   bit 0: lastMsg is exact
//	lastMsg  uint64  newest message offset + 1 appended before the snapshot; 0 none
//	count    uint16  number of entries, at most maxStreamTrackingNames
//	entries  count × (name length uint8 ≥ 1, name, offset uint64), names sorted
const (
	trackingVersion    = 1
	trackingExactLast  = 1 << 0
	trackingHeaderSize = 1 + 1 + 8 + 2
)

// trackingSnapshot is a decoded snapshot.
type trackingSnapshot struct {
	offsets map[string]uint64
	lastMsg uint64 // newest message offset + 1 before the snapshot; 0 none
	exact   bool   // lastMsg is exact (not set for segment prologues)
}

// encodeTracking renders a snapshot body. m has at most
// maxStreamTrackingNames names of 1 to 255 bytes (enforced at consume).
func encodeTracking(m map[string]uint64, lastMsg uint64, exact bool) []byte {
	names := make([]string, 0, len(m))
	size := trackingHeaderSize
	for name := range m {
		names = append(names, name)
		size += 1 + len(name) + 8
	}
	sort.Strings(names)
	b := make([]byte, 0, size)
	var flags byte
	if exact {
		flags |= trackingExactLast
	}
	b = append(b, trackingVersion, flags)
	b = binary.BigEndian.AppendUint64(b, lastMsg)
	b = binary.BigEndian.AppendUint16(b, uint16(len(names)))
	for _, name := range names {
		b = append(b, byte(len(name)))
		b = append(b, name...)
		b = binary.BigEndian.AppendUint64(b, m[name])
	}
	return b
}

// decodeTracking decodes and checks a snapshot body.
func decodeTracking(b []byte) (trackingSnapshot, error) {
	bad := func(format string, a ...any) (trackingSnapshot, error) {
		return trackingSnapshot{}, fmt.Errorf("%w: snapshot: %s", ErrStreamCorrupt, fmt.Sprintf(format, a...))
	}
	if len(b) < trackingHeaderSize {
		return bad("%d bytes", len(b))
	}
	if b[0] != trackingVersion {
		return bad("unknown version %d", b[0])
	}
	if b[1]&^trackingExactLast != 0 {
		return bad("unknown flags %#x", b[1])
	}
	snap := trackingSnapshot{exact: b[1]&trackingExactLast != 0, lastMsg: binary.BigEndian.Uint64(b[2:])}
	count := int(binary.BigEndian.Uint16(b[10:]))
	if count > maxStreamTrackingNames {
		return bad("%d names, limit %d", count, maxStreamTrackingNames)
	}
	snap.offsets = make(map[string]uint64, count)
	p := trackingHeaderSize
	prev := ""
	for i := range count {
		if p >= len(b) {
			return bad("entry %d missing", i)
		}
		n := int(b[p])
		p++
		if n == 0 || len(b)-p < n+8 {
			return bad("entry %d: name of %d bytes overruns the snapshot", i, n)
		}
		name := string(b[p : p+n])
		if i > 0 && name <= prev {
			return bad("entry %d: names not sorted or repeated", i)
		}
		snap.offsets[name] = binary.BigEndian.Uint64(b[p+n:])
		prev = name
		p += n + 8
	}
	if p != len(b) {
		return bad("%d trailing bytes", len(b)-p)
	}
	return snap, nil
}

// tracked returns the last acked offset of tracking name.
func (s *stream) tracked(name string) (uint64, bool) {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	off, ok := s.tracking[name]
	return off, ok
}

// reserveTracking admits a consumer's tracking name: a known name always, a
// new one while the stream tracks fewer than maxStreamTrackingNames names.
func (s *stream) reserveTracking(name string) error {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if _, ok := s.tracking[name]; ok {
		return nil
	}
	if _, ok := s.reserved[name]; ok {
		return nil
	}
	if len(s.tracking)+len(s.reserved) >= maxStreamTrackingNames {
		return fmt.Errorf("stream already tracks %d offsets, the limit", maxStreamTrackingNames)
	}
	s.reserved[name] = struct{}{}
	return nil
}

// noteAckLocked records that name acked offset off; it reports whether the
// tracked offset moved. Caller holds s.mu (tmu is taken here).
func (s *stream) noteAckLocked(name string, off uint64) bool {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if cur, ok := s.tracking[name]; ok && off <= cur {
		return false
	}
	s.tracking[name] = off
	delete(s.reserved, name)
	s.trackDirty = true
	return true
}

// kickTracking asks the maintenance goroutine for a snapshot.
func (s *stream) kickTracking() {
	select {
	case s.trackKick <- struct{}{}:
	default:
	}
}

// noteLast records that a message with offset last-1 is in the log.
func (s *stream) noteLast(last uint64) {
	for {
		cur := s.lastMsg.Load()
		if last <= cur || s.lastMsg.CompareAndSwap(cur, last) {
			break
		}
	}
	s.lastKnown.Store(true)
}

// writeSnapshot appends a tracking snapshot when tracking changed since the
// last one was encoded, or always when force is set. It holds amu
// exclusively, so lastMsg is exact and no prologue or other snapshot lands
// between encoding and appending.
func (s *stream) writeSnapshot(force bool) error {
	s.amu.Lock()
	defer s.amu.Unlock()
	s.tmu.Lock()
	if !force && !s.trackDirty {
		s.tmu.Unlock()
		return nil
	}
	body := encodeTracking(s.tracking, s.lastMsg.Load(), s.lastKnown.Load())
	s.trackDirty = false
	s.tmu.Unlock()
	s.snapAppending = true
	_, err := s.log.Append(msgstore.Record{Flags: streamFlagTracking, Body: body})
	s.snapAppending = false
	if err != nil {
		s.tmu.Lock()
		s.trackDirty = true
		s.tmu.Unlock()
		return fmt.Errorf("append tracking snapshot: %w", err)
	}
	return nil
}

// prologue is the msgstore prologue hook: a new segment starts with a
// snapshot while some offset is tracked, unless the record that starts it is
// itself a snapshot. It runs under the log's append lock, inside an Append by
// a goroutine that holds amu (so snapAppending is safe to read).
func (s *stream) prologue() (msgstore.Record, bool) {
	if s.snapAppending {
		return msgstore.Record{}, false
	}
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if len(s.tracking) == 0 {
		return msgstore.Record{}, false
	}
	// lastMsg is not exact here: a concurrent publish may have appended
	// without having recorded it yet.
	return msgstore.Record{Flags: streamFlagTracking, Body: encodeTracking(s.tracking, 0, false)}, true
}

// openTracking restores the tracked offsets and the newest message offset
// from the log, migrates a legacy offsets.json, and installs the prologue hook.
func (s *stream) openTracking() error {
	snap, found, err := s.findSnapshot()
	if err != nil {
		return err
	}
	s.tracking = snap.offsets
	if s.tracking == nil {
		s.tracking = make(map[string]uint64)
	}
	legacy, err := readLegacyTracking(s.dir)
	if err != nil {
		return err
	}
	s.log.SetPrologue(s.prologue)
	if legacy == nil {
		return nil
	}
	s.mergeLegacy(legacy)
	if err := s.writeSnapshot(true); err != nil {
		return err
	}
	// The snapshot must be on stable storage before the file goes.
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("sync migrated tracking snapshot: %w", err)
	}
	for _, name := range []string{legacyTrackingFile, legacyTrackingFile + ".new"} {
		if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove migrated %s: %w", name, err)
		}
	}
	s.logger.Info("migrated tracked offsets into the stream log", "names", len(legacy), "snapshot_in_log", found)
	return nil
}

// mergeLegacy merges offsets from offsets.json into the tracking state
// (offsets only grow, so the larger wins), keeping at most
// maxStreamTrackingNames names.
func (s *stream) mergeLegacy(legacy map[string]uint64) {
	for _, name := range slices.Sorted(maps.Keys(legacy)) {
		off := legacy[name]
		if name == "" || len(name) > maxTrackingNameLen {
			s.logger.Error("dropping an invalid tracking name from offsets.json", "name", name)
			continue
		}
		if cur, ok := s.tracking[name]; ok {
			s.tracking[name] = max(cur, off)
			continue
		}
		if len(s.tracking) >= maxStreamTrackingNames {
			s.logger.Error("dropping a tracking name from offsets.json: over the limit", "name", name, "limit", maxStreamTrackingNames)
			continue
		}
		s.tracking[name] = off
	}
}

// readLegacyTracking reads offsets.json, or returns nil when there is none.
func readLegacyTracking(dir string) (map[string]uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, legacyTrackingFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read legacy tracked offsets: %w", err)
	}
	m := make(map[string]uint64)
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrStreamCorrupt, legacyTrackingFile, err)
	}
	return m, nil
}

// findSnapshot returns the newest tracking snapshot in the log and sets
// lastMsg (or leaves it unknown, for resolveLast). See the comment at the top
// of this file for why one segment suffices.
func (s *stream) findSnapshot() (trackingSnapshot, bool, error) {
	st := s.log.Stats()
	if st.NextOffset <= st.FirstOffset {
		s.lastKnown.Store(true) // nothing retained: no message to point "last" at
		return trackingSnapshot{}, false, nil
	}
	rec, err := s.log.ReadAt(msgstore.Loc{Offset: st.NextOffset - 1})
	if err == nil && rec.Flags&streamFlagTracking != 0 {
		if snap, derr := decodeTracking(rec.Body); derr == nil && snap.exact {
			s.noteLast(snap.lastMsg)
			return snap, true, nil
		}
	}
	infos, err := s.log.Segments()
	if err != nil {
		return trackingSnapshot{}, false, fmt.Errorf("find tracking snapshot: %w", err)
	}
	for i := len(infos) - 1; i >= 0; i-- {
		if infos[i].Size == 0 {
			continue
		}
		end := uint64(math.MaxUint64)
		if i+1 < len(infos) {
			end = infos[i+1].Base
		}
		return s.scanSegment(infos[i].Base, end)
	}
	s.lastKnown.Store(true)
	return trackingSnapshot{}, false, nil
}

// scanSegment reads the records with offsets in [from, end): it returns the
// last tracking snapshot among them and records the newest message offset
// when it can tell (a message, or a snapshot with an exact lastMsg).
func (s *stream) scanSegment(from, end uint64) (trackingSnapshot, bool, error) {
	var snap trackingSnapshot
	found := false
	var last uint64
	known := false
	it := s.log.Iterate(from)
	for it.Next() {
		off := it.Loc().Offset
		if off >= end {
			break
		}
		rec := it.Record()
		if rec.Flags&streamFlagTracking == 0 {
			last, known = off+1, true
			continue
		}
		d, err := decodeTracking(rec.Body)
		if err != nil {
			s.logger.Error("skipping a damaged tracking snapshot", "offset", off, "err", err)
			continue
		}
		snap, found = d, true
		if d.exact {
			last, known = max(last, d.lastMsg), true
		}
	}
	if err := it.Err(); err != nil {
		return trackingSnapshot{}, false, fmt.Errorf("read stream segment %d: %w", from, err)
	}
	if known {
		s.noteLast(last)
	}
	return snap, found, nil
}

// resolveLast finds the newest message when openTracking could not (after a
// crash the newest segment held only snapshots): it reads older segments,
// newest first, until one holds a message. It costs the bytes of the
// snapshot-only segments, paid by the first "last" consumer only.
func (s *stream) resolveLast() error {
	s.lastMu.Lock()
	defer s.lastMu.Unlock()
	if s.lastKnown.Load() {
		return nil
	}
	infos, err := s.log.Segments()
	if err != nil {
		return fmt.Errorf("find the newest message: %w", err)
	}
	for i := len(infos) - 1; i >= 0 && !s.lastKnown.Load(); i-- {
		end := uint64(math.MaxUint64)
		if i+1 < len(infos) {
			end = infos[i+1].Base
		}
		if _, _, err := s.scanSegment(infos[i].Base, end); err != nil {
			return err
		}
	}
	s.lastKnown.Store(true) // no message retained at all
	return nil
}

// lastOffset is where a "last" consumer starts: the newest message, or, when
// no message is retained, the first retained offset (the reader skips
// snapshots up to the next publish).
func (s *stream) lastOffset() (uint64, error) {
	if !s.lastKnown.Load() {
		if err := s.resolveLast(); err != nil {
			return 0, err
		}
	}
	last := s.lastMsg.Load()
	st := s.log.Stats()
	if last == 0 {
		return st.NextOffset, nil
	}
	return max(last-1, st.FirstOffset), nil
}
