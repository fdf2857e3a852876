//go:build linux

package mgmt

import (
	"os"
	"syscall"
)

// fileDescriptors returns the open file descriptors of the process and its
// limit (RLIMIT_NOFILE), or zeros when they cannot be read.
func fileDescriptors() (used, limit uint64) {
	if entries, err := os.ReadDir("/proc/self/fd"); err == nil {
		used = uint64(len(entries))
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil {
		limit = rl.Cur
	}
	return used, limit
}

// diskFree returns the bytes available to the process on the file system of
// dir, or 0 when it cannot be read.
func diskFree(dir string) uint64 {
	var st syscall.Statfs_t
	if dir == "" || syscall.Statfs(dir, &st) != nil {
		return 0
	}
	return st.Bavail * uint64(st.Bsize)
}
