//go:build !linux

package msgstore

import (
	"errors"
	"os"
	"syscall"
)

// fdatasync falls back to a full fsync where fdatasync is not available.
func fdatasync(f *os.File) error { return f.Sync() }

// isDiskFull reports whether err is an out-of-space error.
func isDiskFull(err error) bool { return errors.Is(err, syscall.ENOSPC) }
