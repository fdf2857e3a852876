//go:build linux

package mgmt

import (
	"os"
	"syscall"
)

// openDescriptors returns the open file descriptors of the process, or 0
// when they cannot be counted. The limit is the server's (Descriptors).
func openDescriptors() uint64 {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return uint64(len(entries))
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
