package server

import (
	"net"
	"strconv"
	"time"
)

// The administrative API (see admin.go): node settings and resource use.

// NodeInfo describes this node's settings and resource use.
type NodeInfo struct {
	AMQPAddr        string // the listener's address
	DataDir         string
	DefaultVhost    string
	ProductVersion  string
	MemoryUsed      uint64
	MemoryLimit     uint64 // the memory high watermark in bytes; 0 = off
	MemoryAlarm     bool
	DiskFreeLimit   uint64 // bytes; 0 = off
	DiskAlarm       bool
	FrameMax        uint32
	ChannelMax      uint16
	Heartbeat       time.Duration
	ConsumerTimeout time.Duration
}

// Node returns this node's settings and resource use.
func (s *Server) Node() NodeInfo {
	n := NodeInfo{
		DataDir: s.cfg.DataDir, DefaultVhost: s.cfg.DefaultVhost, ProductVersion: s.cfg.ProductVersion,
		MemoryUsed: MemoryUsed(), MemoryLimit: s.watermark.Load(), MemoryAlarm: s.MemoryAlarm(),
		DiskFreeLimit: s.diskLimit.Load(), DiskAlarm: s.DiskAlarm(),
		FrameMax: s.cfg.FrameMax, ChannelMax: s.cfg.ChannelMax, Heartbeat: s.cfg.Heartbeat,
		ConsumerTimeout: s.cfg.ConsumerTimeout,
	}
	if s.ln != nil {
		n.AMQPAddr = s.ln.Addr().String()
	}
	return n
}

// SplitHostPort splits a "host:port" address into host and numeric port
// (0 when there is none).
func SplitHostPort(addr string) (string, int) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	n, _ := strconv.Atoi(port)
	return host, n
}

// Churn returns the connections accepted since start and the lifecycle
// counters, without the per-queue walk of MetricsSnapshot: the management
// sampler reads it every interval for the overview's churn_rates.
func (s *Server) Churn() (accepted uint64, c ChurnCounters) {
	return s.nextID.Load(), s.churn.snapshot()
}
