//go:build linux

package msgstore

import (
	"errors"
	"os"
	"syscall"
)

// fdatasync flushes f's data and the metadata needed to read it back (its size)
// to stable storage. Control holds a reference on the descriptor for the duration
// of the call, so a concurrent Close cannot make us sync a reused descriptor.
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	if obs := syncObserver.Load(); obs != nil {
		(*obs)(f.Name())
	}
	return nil
}

// isDiskFull reports whether err is an out-of-space or out-of-quota error.
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
