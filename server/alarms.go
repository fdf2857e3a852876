package server

import (
	"maps"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/warrenmq/warren/cluster"
)

// Resource alarms, as RabbitMQ names them in connection.blocked reasons.
const (
	alarmMemory = "memory"
	alarmDisk   = "disk"
)

// alarms tracks the resource alarms in force for this node's publishers:
// its own and, on a cluster node, those other running members gossip. While
// any is raised, publishing connections are blocked: their sockets are not
// read until all clear. RabbitMQ blocks publishers on every node for an
// alarm on any one (rabbit_alarm's remote alarms), and drops a node's
// alarms when the node goes down.
type alarms struct {
	mu      sync.Mutex
	active  map[string]bool // this node's alarms, by kind
	remote  map[string]bool // kinds raised by other running members
	cleared chan struct{}   // non-nil while an alarm is on
}

// clearedChan returns a channel closed when every alarm has cleared, or nil
// when none is on.
func (a *alarms) clearedChan() chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cleared
}

// set raises or clears one of this node's alarms and reports whether it
// changed.
func (a *alarms) set(kind string, on bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.active[kind] == on {
		return false
	}
	if a.active == nil {
		a.active = make(map[string]bool)
	}
	if on {
		a.active[kind] = true
	} else {
		delete(a.active, kind)
	}
	a.syncLocked()
	return true
}

// setRemote replaces the kinds raised by other members and reports whether
// they changed.
func (a *alarms) setRemote(kinds map[string]bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if maps.Equal(a.remote, kinds) {
		return false
	}
	a.remote = kinds
	a.syncLocked()
	return true
}

// syncLocked makes cleared exist exactly while some alarm is on, closing
// it (waking the blocked readers) when the last one clears.
func (a *alarms) syncLocked() {
	on := len(a.active) > 0 || len(a.remote) > 0
	switch {
	case on && a.cleared == nil:
		a.cleared = make(chan struct{})
	case !on && a.cleared != nil:
		close(a.cleared)
		a.cleared = nil
	}
}

// isOn reports whether this node raised the alarm kind.
func (a *alarms) isOn(kind string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.active[kind]
}

// reason is the connection.blocked reason, e.g. "low on disk & memory":
// RabbitMQ 3.10's rabbit_reader joins the resources blocking the
// connection with " & " after "low on", without naming the node that
// raised them.
func (a *alarms) reason() string {
	a.mu.Lock()
	kinds := make([]string, 0, 2)
	for k := range a.active {
		kinds = append(kinds, k)
	}
	for k := range a.remote {
		if !a.active[k] {
			kinds = append(kinds, k)
		}
	}
	a.mu.Unlock()
	sort.Strings(kinds)
	return "low on " + strings.Join(kinds, " & ")
}

// MemoryAlarm reports whether the memory alarm is raised.
func (s *Server) MemoryAlarm() bool { return s.alarms.isOn(alarmMemory) }

// DiskAlarm reports whether the disk-free alarm is raised.
func (s *Server) DiskAlarm() bool { return s.alarms.isOn(alarmDisk) }

// SetMemoryHighWatermark changes the memory alarm threshold in bytes (0 turns
// the alarm off) and re-evaluates it at once.
func (s *Server) SetMemoryHighWatermark(bytes uint64) {
	s.watermark.Store(bytes)
	s.checkMemory()
}

// SetDiskFreeLimit changes the disk-free limit in bytes (0 turns the alarm
// off) and re-evaluates it at once.
func (s *Server) SetDiskFreeLimit(bytes uint64) {
	s.diskLimit.Store(bytes)
	s.checkDisk()
}

// resourceMonitor compares memory use and free disk space with their limits.
func (s *Server) resourceMonitor() {
	t := time.NewTicker(s.cfg.MemoryCheckInterval)
	defer t.Stop()
	var gossiped cluster.Alarms
	for {
		s.checkMemory()
		s.checkDisk()
		s.gossipAlarms(&gossiped)
		s.noteRemoteAlarms()
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
	}
}

func (s *Server) checkMemory() {
	wm := s.watermark.Load()
	used := MemoryUsed()
	on := wm > 0 && used > wm
	if s.alarms.set(alarmMemory, on) {
		if on {
			s.log.Warn("memory alarm raised: blocking publishers", "used", used, "watermark", wm)
		} else {
			s.log.Info("memory alarm cleared", "used", used, "watermark", wm)
		}
	}
}

// DiskFree returns the bytes available to the broker in its data directory.
func (s *Server) DiskFree() (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.cfg.DataDir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

func (s *Server) checkDisk() {
	limit := s.diskLimit.Load()
	if limit == 0 || s.cfg.DataDir == "" {
		s.alarms.set(alarmDisk, false)
		return
	}
	free, err := s.DiskFree()
	if err != nil {
		s.log.Error("reading free disk space", "dir", s.cfg.DataDir, "err", err)
		return
	}
	on := free < limit
	if s.alarms.set(alarmDisk, on) {
		if on {
			s.log.Warn("disk alarm raised: blocking publishers", "free", free, "limit", limit)
		} else {
			s.log.Info("disk alarm cleared", "free", free, "limit", limit)
		}
	}
}
