package metrics

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// diskAvailable returns the bytes available to unprivileged users on the file
// system holding dir. A data directory not created yet is measured where it
// will be created: at its nearest existing ancestor.
func diskAvailable(dir string) (uint64, error) {
	path, err := filepath.Abs(dir)
	if err != nil {
		return 0, fmt.Errorf("metrics: data directory %q: %w", dir, err)
	}
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(path, &st)
		if err == nil {
			return st.Bavail * uint64(st.Bsize), nil
		}
		parent := filepath.Dir(path)
		if !errors.Is(err, fs.ErrNotExist) || parent == path {
			return 0, fmt.Errorf("metrics: statfs %s: %w", path, err)
		}
		path = parent
	}
}

// openFDs counts the process's open file descriptors.
func openFDs() (uint64, error) {
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, fmt.Errorf("metrics: open file descriptors: %w", err)
	}
	defer f.Close()
	// Names only, no stat per descriptor. The count includes the descriptor
	// reading the directory, as the Prometheus process collector's does.
	names, err := f.Readdirnames(-1)
	if err != nil {
		return 0, fmt.Errorf("metrics: open file descriptors: %w", err)
	}
	return uint64(len(names)), nil
}

// maxFDs returns the soft limit on open file descriptors.
func maxFDs() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("metrics: file descriptor limit: %w", err)
	}
	return rl.Cur, nil
}
