package queueindex

import (
	"errors"
	"os"
	"syscall"
)

// fdatasync flushes f's data (and the metadata needed to read it back, such as
// its size) to stable storage. It skips the timestamps a full fsync would also
// write.
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if !errors.Is(serr, syscall.EINTR) {
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
