package queueindex

import "errors"

// Sentinel errors. Functions wrap them with context; test with errors.Is.
var (
	// ErrInvalidConfig means a Config failed Validate.
	ErrInvalidConfig = errors.New("queueindex: invalid config")
	// ErrClosed means the Index was closed or deleted.
	ErrClosed = errors.New("queueindex: index closed")
	// ErrLocked means another Index (in this or another process) has the
	// directory open.
	ErrLocked = errors.New("queueindex: directory locked by another index")
	// ErrNotFound means a sequence id has no live entry: it was never appended,
	// was already settled, or its slot was found corrupt at Open.
	ErrNotFound = errors.New("queueindex: no live entry")
	// ErrCorrupt means a slot or checkpoint failed its CRC or format checks.
	ErrCorrupt = errors.New("queueindex: corrupt data")
	// ErrStaleCheckpoint means a clean checkpoint does not match the segment files
	// on disk, so Open ignored it and scanned the files instead.
	ErrStaleCheckpoint = errors.New("queueindex: checkpoint does not match segment files")
	// ErrFailed means an earlier write or sync of the index failed. After a failed
	// fdatasync the page cache can no longer be trusted, so every later call
	// returns this error; the owner must close the index and open it again,
	// which recovers from what is on disk.
	ErrFailed = errors.New("queueindex: index failed after a write error")
	// ErrSeqExhausted means the 64-bit sequence space is used up.
	ErrSeqExhausted = errors.New("queueindex: sequence ids exhausted")
)
