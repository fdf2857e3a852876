package server

import (
	"fmt"
	"math"

	"github.com/warrenmq/warren/queueindex"
)

// The queue indexes of the node open their files through one
// queueindex.FileCache: a queue holds a descriptor only while its index is
// read or written, and the least recently used idle file is closed when the
// cache is full. So the number of durable queues is bounded by the disk, not
// by RLIMIT_NOFILE, and index files cannot starve sockets of descriptors.

// defaultMaxOpenIndexFiles is Config.MaxOpenIndexFiles when it is 0: half of
// the descriptors the socket share (fdlimit.go) leaves, so sockets and index
// files together never use up RLIMIT_NOFILE; the other half stays for the
// message stores' and streams' segment files, meta.db and the runtime. A
// limit of 20,000 gives 1,045 index files, 1,024 gives 96, 256 gives 57.
func defaultMaxOpenIndexFiles(fdLimit uint64) int {
	const fallback = 4096 // the limit is unknown or unbounded
	if fdLimit == 0 || fdLimit > math.MaxInt32 {
		return fallback
	}
	left := int64(fdLimit) - socketShare(fdLimit)
	return max(int(left/2), queueindex.MinFileCacheLimit)
}

// openIndexFiles creates the node's index file cache from the configuration.
func (s *Server) openIndexFiles() error {
	limit := s.cfg.MaxOpenIndexFiles
	if limit == 0 {
		limit = defaultMaxOpenIndexFiles(s.fds.fdLimit)
	}
	files, err := queueindex.NewFileCache(limit, s.log)
	if err != nil {
		return fmt.Errorf("server: MaxOpenIndexFiles: %w", err)
	}
	s.indexFiles = files
	return nil
}

// IndexFileStats reports the node's queue index file cache (for the
// management API and tests); ok is false without a data directory.
func (s *Server) IndexFileStats() (queueindex.FileCacheStats, bool) {
	if s.indexFiles == nil {
		return queueindex.FileCacheStats{}, false
	}
	return s.indexFiles.Stats(), true
}
