//go:build !linux

package mgmt

// openDescriptors is not measured on this platform.
func openDescriptors() uint64 { return 0 }

// diskFree is not measured on this platform.
func diskFree(dir string) uint64 { return 0 }
