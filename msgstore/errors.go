package msgstore

import (
	"errors"
	"fmt"
)

// Sentinel errors. Functions wrap them with context; test with errors.Is.
var (
	// ErrClosed means the Log or Store was closed before or during the call.
	ErrClosed = errors.New("msgstore: closed")
	// ErrNotFound means no record (or no live record, for a Store) exists at the location.
	ErrNotFound = errors.New("msgstore: record not found")
	// ErrCorrupt means bytes on disk or in a buffer do not form a valid record:
	// an impossible length, a CRC mismatch, an unknown version or inconsistent field lengths.
	ErrCorrupt = errors.New("msgstore: corrupt record")
	// ErrTruncated means a buffer ended before the record it starts with.
	ErrTruncated = errors.New("msgstore: truncated record")
	// ErrRecordTooLarge means an encoded record would exceed Config.MaxRecordSize.
	ErrRecordTooLarge = errors.New("msgstore: record too large")
	// ErrFieldTooLong means an exchange or routing key is longer than 255 bytes.
	ErrFieldTooLong = errors.New("msgstore: exchange or routing key longer than 255 bytes")
	// ErrDiskFull means a write failed because the file system is out of space (ENOSPC)
	// or quota. The log stays consistent and appends work again once space is freed.
	ErrDiskFull = errors.New("msgstore: disk full")
	// ErrLogFailed means an fsync failed. After a failed fsync the kernel may have
	// dropped dirty pages, so nothing written since the last good fsync can be trusted:
	// the log refuses further appends until it is closed and reopened (which recovers
	// from what is really on disk).
	ErrLogFailed = errors.New("msgstore: log failed")
	// ErrLocked means another process (or another Log in this process) holds the directory.
	ErrLocked = errors.New("msgstore: directory locked by another user")
	// ErrInvalidConfig means Config.Validate rejected the configuration.
	ErrInvalidConfig = errors.New("msgstore: invalid config")
	// ErrInvalidRefs means Put was called with a reference count below 1.
	ErrInvalidRefs = errors.New("msgstore: reference count must be at least 1")
	// ErrRebuildPending means the Store was opened after a crash and its owner has
	// not yet called RebuildRefs; Put and Release are refused until it has.
	ErrRebuildPending = errors.New("msgstore: reference counts not rebuilt yet")
	// ErrRebuildNotNeeded means RebuildRefs was called on a Store whose reference
	// counts were loaded from a checkpoint or already rebuilt.
	ErrRebuildNotNeeded = errors.New("msgstore: reference counts do not need a rebuild")
)

// errSegmentChanged tells an iterator that compaction replaced the file under it,
// so file positions it holds are stale and it must seek again by offset.
var errSegmentChanged = errors.New("msgstore: segment replaced by compaction")

// corruptf wraps ErrCorrupt with a formatted reason.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// wrapWriteErr classifies a failed write: out-of-space errors also match ErrDiskFull.
func wrapWriteErr(err error) error {
	if isDiskFull(err) {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	return err
}
