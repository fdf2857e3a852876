//go:build !linux

package server

// defaultMemoryWatermark is 0 (alarm off) where physical memory cannot be read.
func defaultMemoryWatermark() uint64 { return 0 }

// processMemory is unknown here: the breakdown then rests on the runtime's
// figures alone.
func processMemory() (rss, fileBacked uint64) { return 0, 0 }
