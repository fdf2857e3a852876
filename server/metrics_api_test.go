package server

import (
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// waitSnapshot polls MetricsSnapshot until ok accepts it.
func waitSnapshot(t *testing.T, s *Server, ok func(MetricsSnapshot) bool) MetricsSnapshot {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		snap := s.MetricsSnapshot()
		if ok(snap) {
			return snap
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshot never matched: %+v", snap)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// snapQueue returns the snapshot of queue vhost/name, or a zero one.
func snapQueue(s MetricsSnapshot, vhost, name string) QueueMetrics {
	for _, q := range s.Queues {
		if q.Vhost == vhost && q.Name == name {
			return q
		}
	}
	return QueueMetrics{}
}

func TestMetricsSnapshot(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.ProductVersion = "1.2.3" })
	ts.addVhost(t, "b-vhost")
	ts.grant(t, "guest", "b-vhost", Permission{".*", ".*", ".*"})
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "zz", nil)
	mustDeclare(t, ch, "dl", amqp091.Table{"x-dead-letter-exchange": ""})
	must(t, ch.ExchangeDeclare("fan", "fanout", false, false, false, false, nil))
	must(t, ch.QueueBind("zz", "", "fan", false, nil))
	publish(t, ch, "", "nowhere", "dropped")
	publish(t, ch, "fan", "", "one")
	publish(t, ch, "fan", "", "two")

	c2, err := amqp091.Dial("amqp://guest:guest@" + ts.addr + "/b-vhost")
	must(t, err)
	defer c2.Close()
	ch2, err := c2.Channel()
	must(t, err)
	mustDeclare(t, ch2, "aa", nil)

	snap := waitSnapshot(t, ts.Server, func(s MetricsSnapshot) bool {
		return len(s.Queues) == 3 && len(s.Connections) == 2 && snapQueue(s, "/", "zz").Ready == 2
	})
	if snap.ProductVersion != "1.2.3" || snap.DataDir == "" {
		t.Errorf("version %q, data dir %q", snap.ProductVersion, snap.DataDir)
	}
	if snap.ConnectionsAccepted != 2 || snap.Channels != 2 {
		t.Errorf("ConnectionsAccepted = %d, Channels = %d; want 2 and 2", snap.ConnectionsAccepted, snap.Channels)
	}
	if m := snap.Messages["/"]; m.Publish != 3 || m.DropUnroutable != 1 {
		t.Errorf("vhost / counters %+v; want 3 published, 1 dropped as unroutable", m)
	}
	if snap.ClusterName != "" {
		t.Errorf("ClusterName %q before one is set", snap.ClusterName)
	}
	must(t, ts.SetClusterName("c1"))
	if got := ts.MetricsSnapshot().ClusterName; got != "c1" {
		t.Errorf("ClusterName %q, want c1", got)
	}
	if snap.MemoryUsed == 0 || snap.MemoryHighWatermark != 0 || snap.MemoryAlarm {
		t.Errorf("memory used %d, watermark %d, alarm %v", snap.MemoryUsed, snap.MemoryHighWatermark, snap.MemoryAlarm)
	}

	// Queues: every vhost's, in no particular order.
	var names []string
	for _, q := range snap.Queues {
		names = append(names, q.Vhost+"|"+q.Name)
	}
	slices.Sort(names)
	if want := []string{"/|dl", "/|zz", "b-vhost|aa"}; !slices.Equal(names, want) {
		t.Errorf("queues %v, want %v", names, want)
	}
	dl, zz := snapQueue(snap, "/", "dl"), snapQueue(snap, "/", "zz")
	if !dl.HasDeadLetterExchange || dl.DeadLetterExchange != "" {
		t.Errorf("dl: has DLX %v, DLX %q; want the default exchange", dl.HasDeadLetterExchange, dl.DeadLetterExchange)
	}
	if zz.HasDeadLetterExchange || zz.Published != 2 || zz.Queue == nil || zz.Queue.Name() != "zz" {
		t.Errorf("zz: %+v", zz)
	}

	// Exchanges: the six built-in ones of each vhost plus "fan".
	if len(snap.Exchanges) != 13 {
		t.Fatalf("%d exchanges, want 13", len(snap.Exchanges))
	}
	byName := map[string]ExchangeMetrics{}
	for i, x := range snap.Exchanges {
		if i > 0 {
			p := snap.Exchanges[i-1]
			if p.Vhost > x.Vhost || (p.Vhost == x.Vhost && p.Name >= x.Name) {
				t.Errorf("exchanges out of order: %s|%s before %s|%s", p.Vhost, p.Name, x.Vhost, x.Name)
			}
		}
		if x.Vhost == "/" {
			byName[x.Name] = x
		}
	}
	if f := byName["fan"]; f.Type != "fanout" || f.PublishIn != 2 || f.PublishOut != 2 || f.Exchange == nil {
		t.Errorf("fan: %+v", f)
	}
	// The default exchange saw the unroutable publish but routed nothing.
	if d := byName[""]; d.Type != "direct" || d.PublishIn != 1 || d.PublishOut != 0 {
		t.Errorf("default exchange: %+v", d)
	}

	// Deleting a queue drops it from the next snapshot; a new one of the same
	// name is a different object.
	_, err = ch.QueueDelete("zz", false, false, false)
	must(t, err)
	mustDeclare(t, ch, "zz", nil)
	again := waitSnapshot(t, ts.Server, func(s MetricsSnapshot) bool {
		return len(s.Queues) == 3 && snapQueue(s, "/", "zz").Ready == 0
	})
	if q := snapQueue(again, "/", "zz"); q.Queue == zz.Queue || q.Published != 0 {
		t.Errorf("redeclared queue kept the old identity or counters: %+v", q)
	}
}

func TestMetricsSnapshotMemoryAlarm(t *testing.T) {
	ts := startServer(t)
	ts.SetMemoryHighWatermark(1)
	snap := ts.MetricsSnapshot()
	if !snap.MemoryAlarm || snap.MemoryHighWatermark != 1 {
		t.Errorf("alarm %v, watermark %d; want raised at 1", snap.MemoryAlarm, snap.MemoryHighWatermark)
	}
	ts.SetMemoryHighWatermark(0)
	if snap := ts.MetricsSnapshot(); snap.MemoryAlarm || snap.MemoryHighWatermark != 0 {
		t.Errorf("alarm %v, watermark %d; want cleared and off", snap.MemoryAlarm, snap.MemoryHighWatermark)
	}
}
