package server

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// defaultMemoryWatermark is 40% of physical memory, RabbitMQ's default.
func defaultMemoryWatermark() uint64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit) * 4 / 10
}

// processMemory returns the resident set of the process and its file-backed
// part, from /proc/self/statm (in pages); zeros when it cannot be read.
func processMemory() (rss, fileBacked uint64) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return 0, 0
	}
	resident, err1 := strconv.ParseUint(f[1], 10, 64)
	shared, err2 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	page := uint64(os.Getpagesize())
	return resident * page, shared * page
}
