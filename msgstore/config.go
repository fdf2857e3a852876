package msgstore

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// FlushPolicy says when appended data is forced to stable storage and what
// WhenDurable (and so a publisher confirm) waits for. One policy type is shared
// by the message store and the queue index.
type FlushPolicy uint8

const (
	// FlushFsync (the default) is group commit: one flusher goroutine fdatasyncs
	// every file written since its previous round, then releases every waiter the
	// round covers. WhenDurable means "on stable storage": it survives a power cut.
	FlushFsync FlushPolicy = iota
	// FlushInterval fsyncs every Config.FlushInterval. WhenDurable means "written
	// to the OS": it survives a process crash, not a power cut within the interval.
	FlushInterval
	// FlushMessages fsyncs after every Config.FlushMessages appended records.
	// WhenDurable means "written to the OS", as for FlushInterval.
	FlushMessages
	// FlushOS never fsyncs on the hot path (only when a segment is sealed, on
	// Sync and on Close). WhenDurable means "written to the OS".
	FlushOS
)

// String returns the policy's configuration name: fsync, interval, messages or os.
func (p FlushPolicy) String() string {
	switch p {
	case FlushFsync:
		return "fsync"
	case FlushInterval:
		return "interval"
	case FlushMessages:
		return "messages"
	case FlushOS:
		return "os"
	}
	return fmt.Sprintf("FlushPolicy(%d)", uint8(p))
}

// ParseFlushPolicy parses a configuration name as returned by String.
func ParseFlushPolicy(s string) (FlushPolicy, error) {
	for p := FlushFsync; p <= FlushOS; p++ {
		if strings.EqualFold(s, p.String()) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown flush policy %q (want fsync, interval, messages or os)", ErrInvalidConfig, s)
}

// MarshalText implements encoding.TextMarshaler so config files and JSON carry the name.
func (p FlushPolicy) MarshalText() ([]byte, error) {
	if p > FlushOS {
		return nil, fmt.Errorf("%w: unknown flush policy %d", ErrInvalidConfig, uint8(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *FlushPolicy) UnmarshalText(b []byte) error {
	v, err := ParseFlushPolicy(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// DurableMeaning describes in one sentence what WhenDurable guarantees under p,
// for the management API.
func (p FlushPolicy) DurableMeaning() string {
	if p == FlushFsync {
		return "on stable storage (fdatasync): survives a power cut"
	}
	return "written to the operating system: survives a process crash, not a power cut"
}

// Format limits.
const (
	// MaxSegmentSize bounds Config.SegmentSize so file positions fit in Loc.Pos.
	MaxSegmentSize = 2 << 30
	// MaxRecordLimit is the largest record the format allows; Config.MaxRecordSize
	// may not exceed it and recovery treats longer lengths as impossible.
	MaxRecordLimit = 1 << 30
)

// Config configures a Log or a Store. Start from DefaultConfig; the zero value is not valid.
type Config struct {
	// Dir holds the segment (.seg), index (.idx) and checkpoint files. It is
	// created if missing and locked while open.
	Dir string
	// SegmentSize is the size at which a new segment file is started (default
	// 64 MiB). A record larger than this gets a segment of its own.
	SegmentSize int64
	// MaxRecordSize is the largest encoded record Append accepts (default 129 MiB:
	// a 128 MiB body plus properties and header).
	MaxRecordSize int
	// IndexInterval is the number of segment bytes between sparse index entries
	// (default 4096). A lookup by offset reads at most one interval.
	IndexInterval int
	// Flush is the flush policy (default FlushFsync).
	Flush FlushPolicy
	// FlushInterval is the fsync period under FlushInterval (default 200 ms).
	FlushInterval time.Duration
	// FlushMessages is the number of records between fsyncs under FlushMessages (default 1000).
	FlushMessages int
	// CompactDeadRatio is the fraction of dead bytes above which a sealed segment
	// is compacted (default 0.5). 1 disables compaction (whole empty segments are
	// still deleted).
	CompactDeadRatio float64
	// CompactBytesPerSec limits how fast compaction reads old segments (default
	// 32 MiB/s). 0 means unlimited.
	CompactBytesPerSec int64
	// Logger receives errors of background work that has no caller to return them
	// to (compaction, index rebuilds). Required.
	Logger *slog.Logger
}

// DefaultConfig returns the documented defaults for dir.
func DefaultConfig(dir string) Config {
	return Config{
		Dir:                dir,
		SegmentSize:        64 << 20,
		MaxRecordSize:      129 << 20,
		IndexInterval:      4096,
		Flush:              FlushFsync,
		FlushInterval:      200 * time.Millisecond,
		FlushMessages:      1000,
		CompactDeadRatio:   0.5,
		CompactBytesPerSec: 32 << 20,
		Logger:             slog.Default(),
	}
}

// Validate reports the first invalid field, wrapped in ErrInvalidConfig.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Dir == "":
		return bad("Dir is empty")
	case c.SegmentSize < 1024 || c.SegmentSize > MaxSegmentSize:
		return bad("SegmentSize %d outside [1024, %d]", c.SegmentSize, MaxSegmentSize)
	case c.MaxRecordSize < MinRecordSize || c.MaxRecordSize > MaxRecordLimit:
		return bad("MaxRecordSize %d outside [%d, %d]", c.MaxRecordSize, MinRecordSize, MaxRecordLimit)
	case c.IndexInterval < 64 || int64(c.IndexInterval) > c.SegmentSize:
		return bad("IndexInterval %d outside [64, SegmentSize]", c.IndexInterval)
	case c.Flush > FlushOS:
		return bad("unknown Flush policy %d", uint8(c.Flush))
	case c.Flush == FlushInterval && c.FlushInterval <= 0:
		return bad("FlushInterval must be positive under the interval policy")
	case c.Flush == FlushMessages && c.FlushMessages <= 0:
		return bad("FlushMessages must be positive under the messages policy")
	case !(c.CompactDeadRatio > 0 && c.CompactDeadRatio <= 1):
		return bad("CompactDeadRatio %v outside (0, 1]", c.CompactDeadRatio)
	case c.CompactBytesPerSec < 0:
		return bad("CompactBytesPerSec is negative")
	case c.Logger == nil:
		return bad("Logger is nil")
	}
	return nil
}
