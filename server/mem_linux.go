package server

import "syscall"

// defaultMemoryWatermark is 40% of physical memory, RabbitMQ's default.
func defaultMemoryWatermark() uint64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit) * 4 / 10
}
