//go:build !linux

package server

// defaultMemoryWatermark is 0 (alarm off) where physical memory cannot be read.
func defaultMemoryWatermark() uint64 { return 0 }
