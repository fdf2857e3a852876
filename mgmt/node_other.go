//go:build !linux

package mgmt

// fileDescriptors is not measured on this platform.
func fileDescriptors() (used, limit uint64) { return 0, 0 }

// diskFree is not measured on this platform.
func diskFree(dir string) uint64 { return 0 }
