package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrDataDirInUse means another broker holds the data directory. Start-up
// stops at once, before any file of the directory is opened: two brokers on
// one directory would corrupt each other's stores, and waiting for bbolt's
// lock on meta.db would end in a misleading "unreadable" error.
var ErrDataDirInUse = errors.New("server: data directory in use")

// lockFileName is the file in the data directory whose flock marks the
// directory as held; it contains the holder's pid, for the error a second
// broker prints.
const lockFileName = "LOCK"

// dirLock is the held lock of a data directory. The kernel releases the
// flock when the process exits, so a crashed broker never leaves the
// directory locked; the file itself stays (removing it would race with a
// broker that just opened it).
type dirLock struct{ f *os.File }

// lockDataDir takes the data directory's lock without waiting, creating the
// directory and the lock file as needed, and writes this process's pid into
// the file.
func lockDataDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("server: data directory: %w", err)
	}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("server: data directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, inUseError(dir, f)
		}
		return nil, fmt.Errorf("server: data directory lock %s: %w", path, err)
	}
	if err := writePid(f); err != nil {
		return nil, errors.Join(fmt.Errorf("server: data directory lock %s: %w", path, err), f.Close())
	}
	return &dirLock{f: f}, nil
}

// inUseError names the directory and, when the lock file says, the pid of
// the broker holding it.
func inUseError(dir string, f *os.File) error {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0) // io.EOF after a short read is expected
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return fmt.Errorf("%w: %s is locked by another broker (pid unknown); stop it or choose another data-dir", ErrDataDirInUse, dir)
	}
	return fmt.Errorf("%w: %s is locked by another broker, pid %d; stop it or choose another data-dir", ErrDataDirInUse, dir, pid)
}

func writePid(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		return err
	}
	return f.Sync()
}

// release drops the lock; nil-safe for a server without a data directory.
func (l *dirLock) release() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}
