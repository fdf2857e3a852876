package server

import (
	"runtime/metrics"
	"unsafe"

	"github.com/warrenmq/warren/queueindex"
)

// MemoryBreakdown is what the node's memory is used for, for the management
// API's /api/nodes/{node}/memory. The broker's own figures come from
// counters kept as objects change (queue tallies, buffer capacities), so
// taking one visits queues and connections but never messages; the runtime
// figures are Go's runtime/metrics and the process ones /proc/self/statm.
type MemoryBreakdown struct {
	// QueueBookkeeping is queue structures and per-message entries
	// (queueMemory without the bodies); QueueBodies the bodies of the
	// messages queues hold in memory, ready or unacknowledged.
	QueueBookkeeping, QueueBodies uint64
	// ConnReadBuffers and ConnWriteBuffers are the capacities of the
	// connections' read buffers and outboxes; Channels the channel structures.
	ConnReadBuffers, ConnWriteBuffers, Channels uint64
	// IndexPages is the queue index segment pages cached in memory;
	// StoreTables the message stores' liveness tables.
	IndexPages, StoreTables uint64
	Runtime                 RuntimeMemory
	// RSS is the resident set of the process; FileBacked the part of it
	// mapped from files (the executable's code and shared libraries). Both
	// are 0 where the OS does not tell (non-Linux).
	RSS, FileBacked uint64
}

// RuntimeMemory is the Go runtime's account of the memory it holds.
type RuntimeMemory struct {
	HeapObjects  uint64 // live objects and dead ones not yet swept
	HeapUnused   uint64 // reserved for objects, not in use (fragmentation)
	HeapFree     uint64 // free heap pages not returned to the OS
	HeapReleased uint64 // heap returned to the OS (not resident)
	Stacks       uint64 // goroutine and OS thread stacks
	GCMetadata   uint64 // GC and allocator metadata (mspans, mcaches, bitmaps)
	Other        uint64 // profiling buckets and other runtime data
	Total        uint64 // everything mapped by the runtime, released included
}

var runtimeMemorySamples = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/stacks:bytes",
	"/memory/classes/os-stacks:bytes",
	"/memory/classes/metadata/mcache/free:bytes",
	"/memory/classes/metadata/mcache/inuse:bytes",
	"/memory/classes/metadata/mspan/free:bytes",
	"/memory/classes/metadata/mspan/inuse:bytes",
	"/memory/classes/metadata/other:bytes",
	"/memory/classes/profiling/buckets:bytes",
	"/memory/classes/other:bytes",
	"/memory/classes/total:bytes",
}

func readRuntimeMemory() RuntimeMemory {
	s := make([]metrics.Sample, len(runtimeMemorySamples))
	for i, n := range runtimeMemorySamples {
		s[i].Name = n
	}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return RuntimeMemory{
		HeapObjects: v(0), HeapUnused: v(1), HeapFree: v(2), HeapReleased: v(3),
		Stacks:     v(4) + v(5),
		GCMetadata: v(6) + v(7) + v(8) + v(9) + v(10),
		Other:      v(11) + v(12),
		Total:      v(13),
	}
}

// MemoryBreakdown takes the node's memory breakdown.
func (s *Server) MemoryBreakdown() MemoryBreakdown {
	var b MemoryBreakdown
	for _, vh := range s.Vhosts() {
		for _, st := range []*vhostStorage{vh.storage, vh.transient} {
			if st != nil && st.store != nil {
				b.StoreTables += uint64(max(st.store.Stats().MemoryBytes, 0))
			}
		}
		for _, q := range vh.Queues() {
			b.addQueue(q)
		}
	}
	s.mu.RLock()
	conns := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.RUnlock()
	for _, c := range conns {
		b.ConnReadBuffers += uint64(c.rbufCap.Load())
		c.out.mu.Lock()
		b.ConnWriteBuffers += uint64(cap(c.out.buf))
		c.out.mu.Unlock()
	}
	b.Channels = uint64(len(s.admin.liveChannels())) * uint64(unsafe.Sizeof(channel{}))
	b.Runtime = readRuntimeMemory()
	b.RSS, b.FileBacked = processMemory()
	return b
}

// addQueue adds a local queue's tallies and its index's cached pages.
func (b *MemoryBreakdown) addQueue(q *Queue) {
	q.mu.Lock()
	bodies := q.ready.bytes + q.unacked.bytes
	mem := queueMemory(q.ready.len(), q.pending.len(), bodies)
	ix := q.index
	q.mu.Unlock()
	b.QueueBookkeeping += uint64(mem - bodies)
	b.QueueBodies += uint64(bodies)
	if ix != nil {
		b.IndexPages += uint64(ix.Stats().CachedSegments) * queueindex.SegmentSize
	}
}
