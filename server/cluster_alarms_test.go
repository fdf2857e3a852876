package server

import (
	"testing"
	"time"
)

// TestClusterAlarmBlocksPublishersOnEveryNode: a memory alarm on one node
// blocks publishers connected to another with connection.blocked "low on
// memory" (RabbitMQ's reason names the resource, not the node), and
// connection.unblocked when it clears; likewise a disk alarm the other way
// round. Consumers are never blocked, and the held publish arrives.
func TestClusterAlarmBlocksPublishersOnEveryNode(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	blockedBy := func(n *clusterNode) func() bool {
		return func() bool { return n.alarms.clearedChan() != nil }
	}
	testAlarmBlocksPublishers(t, b.testServer, "low on memory",
		func() bool {
			a.SetMemoryHighWatermark(1) // anything is above one byte
			waitFor(t, 10*time.Second, "b to see a's memory alarm", blockedBy(b))
			return a.MemoryAlarm() && !b.MemoryAlarm()
		},
		func() { a.SetMemoryHighWatermark(0) })
	// The first round's consumer would take the second round's messages.
	_, ch := b.channel(t)
	_, err := ch.QueueDelete("alarm", false, false, false)
	must(t, err)
	testAlarmBlocksPublishers(t, a.testServer, "low on disk",
		func() bool {
			c.SetDiskFreeLimit(1 << 62) // more than any disk has free
			waitFor(t, 10*time.Second, "a to see c's disk alarm", blockedBy(a))
			return c.DiskAlarm() && !a.DiskAlarm()
		},
		func() { c.SetDiskFreeLimit(0) })
	if got := a.ResourceAlarms(false); len(got) != 0 {
		t.Fatalf("alarms after both cleared: %v", got)
	}
}

// TestClusterAlarmOfAStoppedNodeIsDropped: the alarm of a node that stops
// running no longer blocks the others (RabbitMQ clears a down node's
// alarms), and both kinds raised on different nodes are named together.
func TestClusterAlarmOfAStoppedNodeIsDropped(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	a.SetMemoryHighWatermark(1)
	c.SetDiskFreeLimit(1 << 62)
	// The reason names both resources, not the nodes, sorted.
	waitFor(t, 10*time.Second, "b blocked for both alarms", func() bool { return b.alarms.reason() == "low on disk & memory" })
	if got := b.ResourceAlarms(false); len(got) != 2 {
		t.Fatalf("b lists alarms %v, want a's memory and c's disk", got)
	}
	must(t, a.Close())
	waitFor(t, 15*time.Second, "b to drop the stopped node's alarm", func() bool {
		got := b.ResourceAlarms(false)
		return len(got) == 1 && got[0] == Alarm{c.name, alarmDisk}
	})
	c.SetDiskFreeLimit(0)
	waitFor(t, 10*time.Second, "b unblocked", func() bool { return b.alarms.clearedChan() == nil })
}
