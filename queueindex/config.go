package queueindex

import (
	"fmt"
	"log/slog"
)

// Config configures one Index. Start from DefaultConfig; the zero value is not
// valid (Dir is required and CacheSegments must be positive).
type Config struct {
	// Dir is the queue's own directory. Open creates it if needed. Nothing else
	// may write into it.
	Dir string

	// Sync makes Flush call fdatasync on every file it wrote (and fsync the
	// directory when files were created or removed) before returning. With Sync
	// a successful Flush means the flushed changes survive a power cut; without
	// it they survive a process crash only. The broker's group commit calls
	// Flush once per batch. Close always syncs, whatever this says.
	Sync bool

	// CacheSegments bounds how many segment pages (SegmentSize bytes each) the
	// index keeps in memory for appends, acks and ReadRange. Pages with changes
	// not yet flushed cannot be evicted, so between two Flush calls the cache
	// can exceed this bound by the number of segments touched since the last
	// Flush; it shrinks back on Flush.
	CacheSegments int

	// Files, if set, is the FileCache the index opens its files through,
	// shared with other indexes so that together they keep at most its limit
	// open (a broker shares one per node). The index then holds no
	// descriptor between calls and takes no directory lock: the owner must
	// make sure no other process opens the directory (the broker's data
	// directory is locked). Nil gives the index a cache of its own without a
	// bound, and the index holds its directory open and flock'ed.
	Files *FileCache

	// Logger receives what Open cut or skipped while recovering and errors that
	// have no caller to return to (closing a file the cache evicts).
	Logger *slog.Logger
}

// MaxCacheSegments is the largest allowed Config.CacheSegments (128 MiB of
// pages per index).
const MaxCacheSegments = 1024

// DefaultConfig returns the defaults: Sync on (a flushed append or ack is on
// stable storage), a cache of 4 segments (512 KiB) and slog.Default() as the
// logger. Dir must still be set.
func DefaultConfig() Config {
	return Config{
		Sync:          true,
		CacheSegments: 4,
		Logger:        slog.Default(),
	}
}

// Validate reports whether c can be used to open an Index.
func (c Config) Validate() error {
	if c.Dir == "" {
		return fmt.Errorf("%w: Dir is empty", ErrInvalidConfig)
	}
	if c.CacheSegments < 1 || c.CacheSegments > MaxCacheSegments {
		return fmt.Errorf("%w: CacheSegments %d not in [1, %d]", ErrInvalidConfig, c.CacheSegments, MaxCacheSegments)
	}
	if c.Logger == nil {
		return fmt.Errorf("%w: Logger is nil", ErrInvalidConfig)
	}
	return nil
}
