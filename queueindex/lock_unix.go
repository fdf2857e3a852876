//go:build unix

package queueindex

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive, non-blocking advisory lock on f. The kernel drops
// the lock when the process dies, so a crash never leaves a stale lock behind.
func lockFile(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("queueindex: lock %s: %w", f.Name(), err)
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			lerr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
			if !errors.Is(lerr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		return fmt.Errorf("queueindex: lock %s: %w", f.Name(), err)
	}
	if errors.Is(lerr, syscall.EWOULDBLOCK) {
		return fmt.Errorf("queueindex: lock %s: %w", f.Name(), ErrLocked)
	}
	if lerr != nil {
		return fmt.Errorf("queueindex: lock %s: %w", f.Name(), lerr)
	}
	return nil
}
