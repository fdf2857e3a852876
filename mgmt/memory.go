package mgmt

import (
	"math"
	"net/http"

	"github.com/warrenmq/warren/server"
)

// rabbitMemoryKeys are RabbitMQ 3.10's memory breakdown keys in its order.
// Those Warren has no counterpart of (Erlang processes and tables of
// features it does not have: mnesia, atoms, plugins, quorum and stream
// processes, the stats database) answer 0.
var rabbitMemoryKeys = []string{
	"connection_readers", "connection_writers", "connection_channels", "connection_other",
	"queue_procs", "queue_slave_procs", "quorum_queue_procs", "quorum_queue_dlx_procs", "stream_queue_procs",
	"stream_queue_replica_reader_procs", "stream_queue_coordinator_procs", "plugins", "other_proc", "metrics",
	"mgmt_db", "mnesia", "quorum_ets", "other_ets", "binary", "msg_index", "code", "atom", "other_system",
	"allocated_unused", "reserved_unallocated",
}

// memoryJSON maps Warren's breakdown onto RabbitMQ's keys:
//
//	connection_readers    read buffers of the connections
//	connection_writers    outboxes (write buffers) of the connections
//	connection_channels   channel structures
//	queue_procs           queue structures and per-message entries
//	binary                message bodies held in memory by queues
//	msg_index             message store liveness tables and cached queue index pages
//	other_proc            the rest of the Go heap's objects
//	other_system          goroutine and thread stacks, GC metadata, other runtime data
//	allocated_unused      heap reserved but not in use (free pages, fragmentation)
//	code                  the file-backed resident set (executable and libraries)
//	reserved_unallocated  resident memory none of the above accounts for
//
// total.rss is the process's resident set (as mem_calculation_strategy rss
// reads it), total.allocated the memory the Go runtime holds from the OS
// (the node's mem_used), total.erlang the part of it in use. The keys sum to
// total.rss unless the runtime holds pages never touched (not resident);
// reserved_unallocated is then 0. "warren" holds the figures behind the
// mapped keys.
func memoryJSON(b server.MemoryBreakdown) map[string]any {
	rt := b.Runtime
	held := rt.Total - rt.HeapReleased
	attributed := b.QueueBookkeeping + b.QueueBodies + b.ConnReadBuffers + b.ConnWriteBuffers + b.Channels + b.StoreTables + b.IndexPages
	m := make(map[string]any, len(rabbitMemoryKeys)+3)
	for _, k := range rabbitMemoryKeys {
		m[k] = uint64(0)
	}
	m["connection_readers"], m["connection_writers"], m["connection_channels"] = b.ConnReadBuffers, b.ConnWriteBuffers, b.Channels
	m["queue_procs"], m["binary"], m["msg_index"] = b.QueueBookkeeping, b.QueueBodies, b.StoreTables+b.IndexPages
	m["other_proc"] = sub0(rt.HeapObjects, attributed)
	m["other_system"] = rt.Stacks + rt.GCMetadata + rt.Other
	m["allocated_unused"] = rt.HeapUnused + rt.HeapFree
	m["code"] = b.FileBacked
	m["reserved_unallocated"] = sub0(b.RSS, max(rt.HeapObjects, attributed)+rt.Stacks+rt.GCMetadata+rt.Other+rt.HeapUnused+rt.HeapFree+b.FileBacked)
	m["strategy"] = "rss"
	m["total"] = map[string]any{"erlang": held - rt.HeapUnused - rt.HeapFree, "rss": b.RSS, "allocated": held}
	m["warren"] = map[string]any{
		"queue_bodies": b.QueueBodies, "queue_bookkeeping": b.QueueBookkeeping,
		"queue_index_pages": b.IndexPages, "message_store_tables": b.StoreTables,
		"connection_read_buffers": b.ConnReadBuffers, "connection_write_buffers": b.ConnWriteBuffers,
		"channels": b.Channels, "go_heap_objects": rt.HeapObjects, "go_heap_unused": rt.HeapUnused,
		"go_heap_free": rt.HeapFree, "go_heap_released": rt.HeapReleased, "go_stacks": rt.Stacks,
		"go_gc_metadata": rt.GCMetadata, "go_other": rt.Other, "go_total": rt.Total,
	}
	return m
}

func sub0(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// relativeMemoryJSON is RabbitMQ's relative form: each key as a rounded
// percentage of total.rss (at least 1 when not 0), total 100.
func relativeMemoryJSON(abs map[string]any, rss uint64) map[string]any {
	m := map[string]any{"total": 100}
	for _, k := range rabbitMemoryKeys {
		v := abs[k].(uint64)
		pct := 0
		if rss > 0 {
			pct = int(math.Round(float64(v) / float64(rss) * 100))
		}
		if pct == 0 && v != 0 {
			pct = 1
		}
		m[k] = pct
	}
	return m
}

// getNodeMemory answers /api/nodes/{node}/memory and .../memory/relative.
func (a *API) getNodeMemory(relative bool) handlerFunc {
	return func(rq *request) error {
		if name := rq.param("node"); name != a.srv.NodeName() {
			// Another member's breakdown is not fetched: answered as
			// RabbitMQ answers when its rpc to the node fails.
			nodes, _ := a.clusterNodes(rq)
			for _, n := range nodes {
				if m, ok := n.(map[string]any); ok && m["name"] == name {
					writeJSON(rq.w, http.StatusOK, map[string]any{"memory": "not_available"})
					return nil
				}
			}
			return errNotFound
		}
		b := a.srv.MemoryBreakdown()
		m := memoryJSON(b)
		if relative {
			m = relativeMemoryJSON(m, b.RSS)
		}
		writeJSON(rq.w, http.StatusOK, map[string]any{"memory": m})
		return nil
	}
}
