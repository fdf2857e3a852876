// Package queueindex persists the order and delivery state of one durable
// queue: for every message, in publish order, where the message store keeps
// it, its size, priority and expiry, and whether it was delivered. It never
// reads message bodies and imports only the standard library.
//
// # Layout
//
// Each queue has its own directory:
//
//	00000000.qi  segment files of SlotsPerSegment (4096) slots of SlotSize (32)
//	00000001.qi  bytes, no header; segment n holds ids [n*4096, (n+1)*4096)
//	checkpoint   next id, id lease and (after a clean Close) per-segment counts
//
// An Index without Config.Files holds an flock on the directory itself while
// it is open (older versions locked a file named lock, which is now ignored).
// With a shared FileCache it holds no lock and no descriptor between calls;
// the owner keeps other processes out (the broker locks its data directory),
// and the package keeps two indexes of the process out of one directory.
//
// # Open files
//
// Every file an index opens goes through a FileCache: Config.Files, shared by
// all the indexes of a broker, or one of the index's own without a bound. A
// segment file is opened when its page is loaded or written and stays open,
// idle, until the cache needs room (it closes the least recently used idle
// file), the page is dropped, or ReleaseIdle closes it; the directory is
// opened to be fsynced. So a broker with many queues holds at most the
// cache's limit of index files open (plus those in use at that moment), and a
// queue costs a descriptor only while it is being read or written.
//
// The slot of sequence id n is at byte (n%4096)*32 of file n/4096. A slot is,
// big endian:
//
//	0  status    0 never written (whole slot zero), 1 ready, 2 settled
//	1  flags     bit 0 persistent, bit 1 delivered, bit 2 reserved (embedded
//	             body; rejected by this version), others zero
//	2  priority
//	3  reserved  zero
//	4  size      uint32, body size
//	8  offset    uint64, message-store location
//	16 pos       uint32, message-store position hint
//	20 expiry    int64, Unix milliseconds, 0 = none
//	28 crc       CRC32C (Castagnoli) of bytes 0-27
//
// An ack, reject or purge turns the slot into a tombstone (status 2, other
// fields zero, with its CRC) rather than zeroes, so the highest id handed out
// can always be read back from the files.
//
// # Invariants
//
//   - Sequence ids are handed out in order and never again, across restarts
//     and crashes, flushed or not. Every id handed out is below the lease
//     recorded in the checkpoint: Flush moves the lease 16 segments ahead
//     whenever less than 8 are left (one checkpoint write per 32,768 ids),
//     and Append writes it itself if no Flush did. After an unclean stop Open
//     resumes at the lease, a fresh segment.
//   - Appends, delivered flags and acks change an in-memory page; only Flush
//     (or Sync, Close) writes slots, one pwrite per run of adjacent changed
//     slots (runs fewer than 4 slots apart are merged, rewriting the unchanged
//     slots between them with what is already on disk).
//   - A segment with no ready slot is deleted by the next Flush, except the
//     segment holding the last id handed out.
//   - In memory the index keeps, per segment without a cached page, 24 bytes
//     (number, live count, file size, live bytes). Ready messages cost nothing
//     more, however many there are. Cached pages are bounded by
//     Config.CacheSegments, plus pages with unflushed changes.
//   - Open never trusts a checkpoint it did not just verify: a clean
//     checkpoint is used only if its CRC holds and it lists exactly the segment
//     files present with their sizes, and Open replaces it with a dirty one
//     (synced) before returning.
//
// # Durability and crash semantics
//
// The caller makes the message store's data durable before it calls Flush for
// the entries pointing at it. With Config.Sync, a nil Flush means every
// change made before it is on stable storage; without it, the changes survive
// a process crash but not necessarily a power cut, until a nil Sync, which
// fdatasyncs every segment written since the last synced flush (reopening the
// ones the FileCache closed) and the directory. A file the cache closes never
// holds writes a Flush promised to be durable: with Config.Sync the flusher
// fdatasyncs each file before giving it back to the cache. Appends and acks of one
// Flush are written together, unordered. So after a crash:
//
//   - an append that was flushed is present, unless an ack of it was flushed;
//   - an ack that was not flushed is lost: the message reappears (as
//     redelivered if its MarkDelivered was flushed). An acked message never
//     reappears once its ack was flushed, and a flushed append never vanishes.
//   - a delivered flag that was not flushed is lost. A broker that wants an
//     exact redelivered flag flushes MarkDelivered before sending.
//   - slots torn by the crash at the tail are cut; damaged slots in the middle
//     are skipped and reported by Open (see Recovered).
//
// # Concurrency
//
// An Index is safe for concurrent use; the intended callers are the queue's
// owner goroutine (Append, MarkDelivered, Ack, ReadRange) and the group-commit
// flusher (Flush or, for interval policies, Sync). Lock order: flushMu
// (serializes Flush, Sync, Purge, Close, Delete), then mu (all in-memory
// state), then ckMu (checkpoint writes), then FileCache.mu, a leaf shared by
// every index of the cache and held only for list updates: files are opened,
// closed and synced outside it (an eviction closes its victims after
// unlocking). The package-level set of open directories is a leaf too, taken
// only in Open and when an index lets its directory go. Flush holds mu only
// to copy dirty slots into its buffer and to finish up; its file creation,
// pwrites and fdatasyncs run without mu, so the owner keeps appending and
// acking while the disk works. The index and the cache start no goroutines.
//
// # Caveats
//
//   - A cache miss (ReadRange, Ack or MarkDelivered of an uncached segment)
//     reads the whole 128 KiB segment under mu: one read per 4096 messages
//     paged, which can briefly delay a concurrent Flush or Append.
//   - Pages with unflushed changes cannot be evicted, so a caller that touches
//     many segments without flushing grows the cache beyond its bound until
//     the next Flush.
//   - After a failed write or sync every call returns ErrFailed; the owner
//     must Close and Open again to recover from what is on disk. Before it
//     closes the failed index, Unflushed gives it the live entries whose
//     slots may not have reached the disk (their pages stay cached), so it
//     can append them to the new index.
//   - Open after an unclean stop reads every segment file (one read each,
//     128 KiB at most) and skips the unused ids below the lease (at most 17
//     segments' worth, about 70,000 ids).
//   - Append writes the lease (a checkpoint rename, synced with Config.Sync)
//     under mu if more than 8 segments of ids were handed out since the last
//     Flush; a broker that flushes per batch never hits this.
//   - A page load under mu may open its segment file and, when the shared
//     cache is full, close another index's idle file: a close under this
//     index's mu (never under FileCache.mu).
//   - The FileCache bound is soft: files in use are never closed, so while
//     more than its limit are in use at once (each call uses at most two)
//     the cache holds more. Without Config.Sync a Flush notes the segments it
//     wrote (at most one entry per segment) until the next Sync.
//   - Entries that reference message-store records are not checked against
//     the store; the owner decides what to do with an entry whose record is
//     gone.
package queueindex
