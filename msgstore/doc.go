// Package msgstore is Warren's durable message storage: a journaled segment log
// (Log) and, on top of it, the shared reference-counted message store of one
// vhost (Store). It imports only the standard library and knows nothing about
// AMQP: exchange, routing key, properties and body are opaque bytes.
//
// # Log
//
// Records are appended to segment files named by the 20-digit offset of their
// first record (%020d.seg); a new segment starts when the active one would
// exceed Config.SegmentSize. Each record carries its length, a CRC32C,
// a format version, flags, a 64-bit offset that grows across segments, and a
// timestamp (see record.go for the layout). A sparse index per segment
// (%020d.idx) holds one (relative offset, position) entry per IndexInterval
// bytes, so a lookup by offset reads at most one interval. A time index per
// segment (%020d.tix, timeindex.go) holds one (timestamp, relative offset)
// entry at the same records, the timestamp being the running maximum so the
// entries are ordered even when clocks step back; OffsetAtTime uses it to read
// at most one interval too. Appends keep the active segment's time index in
// memory; Close writes the unsaved ones, and a missing, damaged or stale .tix
// is rebuilt from its segment on first use. A Loc (offset,
// position hint, size) is read with one pread; when the hint is stale (after
// compaction) the index finds the record by offset.
//
// An owner may register a prologue (Log.SetPrologue): a record Append writes
// first in every segment it starts, so state the owner keeps in its own log
// (stream offset tracking) is never only in segments that retention removes.
// Log.SetSegmentSize changes the roll size of an open log. Log.TruncateAfter
// removes the records above an offset durably (later segments deleted newest
// first, then the holding segment cut and fdatasynced, so a crash leaves a
// prefix); appends then start a new segment. It serves the replicated queue
// log (a mirror's uncommitted tail) and refuses a Store's log.
//
// Durability follows the FlushPolicy. Under FlushFsync (the default) Append
// writes to the OS at once and a single flusher goroutine fdatasyncs the files
// written since its previous round, then calls every WhenDurable callback the
// round covers: N concurrent appends share about one fsync (group commit).
//
// # Store
//
// Put writes a record once for refs queues; each queue calls Release. Liveness
// is one bit per offset per segment, plus one byte per offset only in segments
// holding multi-reference records, plus a map for counts of 256 and more: a
// million live messages cost a few hundred KiB, not a map entry each. A sealed
// segment with no live record is deleted with its index; one whose dead bytes
// exceed Config.CompactDeadRatio is compacted by a background goroutine,
// rate-limited to Config.CompactBytesPerSec: live records are copied to a new
// file with the same offsets, fsynced, and renamed over the old file.
//
// # Recovery contract
//
// Close writes checkpoint.dat (segment sizes, next offset, liveness tables;
// CRC-protected). Open deletes it after reading it, so it vouches only for a
// clean shutdown. With a checkpoint that matches the files, Open reads no
// segment data at all. Without one (a crash), Open trusts every segment whose
// index trailer matches its size (sealed segments are fsynced before their
// index is written) and scans the others, normally only the last: it stops at
// the first record with an impossible length, a bad CRC or an out-of-order
// offset, truncates there and reports the cut in RecoveryInfo. A damaged
// segment in the middle is cut the same way and the rest of the log still opens.
//
// After a crash the Store cannot know reference counts by itself; the queues
// know them. The owner must:
//
//  1. Open the Store; if NeedsRefRebuild reports true, Put and Release return
//     ErrRebuildPending (Get works).
//  2. Call RebuildRefs once with an iterator yielding, once per reference,
//     every Loc still held by a queue index (after the queue index's own
//     recovery). A record nobody names is dead from then on and its space is
//     reclaimed; Locs whose record was lost are counted in RebuildInfo.Missing,
//     and their offsets are never handed out again.
//  3. Treat ErrNotFound from Get for a Loc it holds as "message lost" (possible
//     only for data that was not durable under the flush policy, or whose
//     release was durable in the store before the queue's ack was).
//
// # Invariants
//
//   - Offsets are strictly increasing in the log and consecutive within a
//     segment until compaction removes records; an offset is never reused for
//     a different record, except that a crash can lose non-durable records
//     whose offsets then go to new records (a Loc's Size is checked on read,
//     and RebuildRefs skips offsets that queues still name).
//   - Readers never read past a segment's published size, so they see only
//     whole records; an append failure cuts its partial record off again.
//   - A segment's data is fsynced before its index file is written, and a
//     compacted file is fsynced before it is renamed into place.
//   - The active segment is never deleted or compacted.
//
// # Goroutines and locks
//
// A Log owns one flusher goroutine; a Store adds one maintenance goroutine.
// Both stop on Close, which waits for them. Lock order: Log.writeMu →
// Store.mu → Log.segMu → Log.stateMu, and segment.fileMu → segment.idxMu;
// loading the active segment's time index takes Log.writeMu → segment.fileMu
// (nothing holds fileMu while waiting for writeMu).
// Only an append holds a lock across I/O (its own write, to keep offsets in
// file order); readers, the flusher and maintenance never wait for it.
//
// # Caveats
//
//   - Loc.Pos is 32 bits, so SegmentSize is at most 2 GiB and a record at most 1 GiB.
//   - Every segment keeps a file descriptor open.
//   - After an fsync error the Log fails all waiters and refuses appends
//     (ErrLogFailed): the kernel may have dropped the unsynced pages, so
//     retrying the fsync could falsely succeed. Close and reopen to recover.
//   - WhenDurable callbacks run on the flusher goroutine and must not block;
//     a slow callback delays every later confirm.
//   - Release trusts the Size in the caller's Loc for the byte counters; it
//     should be the Loc returned by Put.
//   - The directory lock uses flock, which is advisory and missing on some
//     platforms (there it is a no-op).
//   - Iterator records alias the iterator's buffer until the next Next.
//   - .tix files are written without fsync (a torn one fails its CRC and is
//     rebuilt). Rebuilding the active segment's time index (first time seek
//     after a crash) scans it holding writeMu, delaying appends meanwhile.
//     The first time seek after Open loads the time indexes of the segments
//     before the answer (small files, no segment data). Open does not delete
//     a .tix whose segment is gone; a stale one is detected by its trailer.
//   - Time seeks assume no compaction (streams never compact): in a compacted
//     segment an entry may stand for a removed record, and the answer can be
//     an older record than asked or cost more than one interval.
package msgstore
