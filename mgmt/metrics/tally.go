package metrics

import (
	"sync"

	"github.com/warrenmq/warren/server"
)

// tally turns counters kept in individual queues, exchanges and connections
// into node-wide counters that never go down. Summing the live objects'
// counters would drop whenever an object is deleted, which Prometheus reads
// as a counter reset and turns into a false spike in rate(). Instead each
// scrape adds what every live object gained since the previous scrape.
//
// mu serialises whole scrapes (snapshot and fold), so snapshots are folded in
// the order they were taken and a vanished object is really gone. It is taken
// before any server lock and never while one is held.
type tally struct {
	mu        sync.Mutex
	queues    map[*server.Queue]queueCounts
	exchanges map[*server.Exchange]uint64 // PublishOut last seen
	conns     map[uint64]connCounts       // by connection id, never reused
	// vhosts are the vhosts' channel counters as last seen, by name: a vhost
	// deleted and created again starts lower, which gain treats as a fresh
	// start.
	vhosts map[string]server.MessageCounters
	tot    totals

	// spare* are the previous scrape's maps, cleared and refilled by the
	// next fold instead of allocating maps as large as the node anew.
	spareQueues    map[*server.Queue]queueCounts
	spareExchanges map[*server.Exchange]uint64
	spareConns     map[uint64]connCounts
}

// queueCounts are one queue's counters as last seen.
type queueCounts struct {
	published, expired, maxlen uint64
}

type connCounts struct{ recv, send uint64 }

// totals are the node-wide counters.
type totals struct {
	// msgs are the channels' counters (received, confirmed, delivered...).
	msgs server.MessageCounters
	// published counts messages enqueued (queue_messages_published_total).
	published uint64
	// expired and maxlen are indexed by dead-letter strategy: 0 disabled
	// (the queue had no dead-letter exchange), 1 at_most_once.
	expired, maxlen [2]uint64
	routed          uint64
	recvBytes       uint64
	sendBytes       uint64
}

func newTally() *tally {
	return &tally{
		queues:    make(map[*server.Queue]queueCounts),
		exchanges: make(map[*server.Exchange]uint64),
		conns:     make(map[uint64]connCounts),
		vhosts:    make(map[string]server.MessageCounters),
	}
}

// scrape takes a snapshot of s and folds it into the totals.
func (t *tally) scrape(s *server.Server) (server.MetricsSnapshot, totals) {
	t.mu.Lock()
	defer t.mu.Unlock()
	snap := s.MetricsSnapshot()
	t.foldLocked(&snap)
	return snap, t.tot
}

// gain is how much a counter grew since it was last seen. Counters only
// grow and objects are keyed by identity, so cur < last cannot happen; the
// guard keeps a bug from wrapping around to 2^64.
func gain(cur, last uint64) uint64 {
	if cur < last {
		return 0
	}
	return cur - last
}

// foldLocked adds each live object's gains to the totals and forgets objects
// that are gone, so the maps hold only live objects.
func (t *tally) foldLocked(snap *server.MetricsSnapshot) {
	queues := reuse(t.spareQueues, len(snap.Queues))
	for i := range snap.Queues {
		q := &snap.Queues[i]
		cur := queueCounts{published: q.Published, expired: q.Expired, maxlen: q.Dropped}
		last := t.queues[q.Queue]
		t.tot.published += gain(cur.published, last.published)
		strategy := 0
		if q.HasDeadLetterExchange {
			strategy = 1
		}
		t.tot.expired[strategy] += gain(cur.expired, last.expired)
		t.tot.maxlen[strategy] += gain(cur.maxlen, last.maxlen)
		queues[q.Queue] = cur
	}
	t.queues, t.spareQueues = queues, t.queues

	exchanges := reuse(t.spareExchanges, len(snap.Exchanges))
	for i := range snap.Exchanges {
		x := &snap.Exchanges[i]
		t.tot.routed += gain(x.PublishOut, t.exchanges[x.Exchange])
		exchanges[x.Exchange] = x.PublishOut
	}
	t.exchanges, t.spareExchanges = exchanges, t.exchanges

	conns := reuse(t.spareConns, len(snap.Connections))
	for i := range snap.Connections {
		c := &snap.Connections[i]
		last := t.conns[c.ID]
		t.tot.recvBytes += gain(c.RecvOct, last.recv)
		t.tot.sendBytes += gain(c.SendOct, last.send)
		conns[c.ID] = connCounts{recv: c.RecvOct, send: c.SendOct}
	}
	t.conns, t.spareConns = conns, t.conns

	vhosts := make(map[string]server.MessageCounters, len(snap.Messages))
	for name, cur := range snap.Messages {
		addGains(&t.tot.msgs, cur, t.vhosts[name])
		vhosts[name] = cur
	}
	t.vhosts = vhosts
}

// addGains adds to tot what each counter gained from last to cur.
func addGains(tot *server.MessageCounters, cur, last server.MessageCounters) {
	tot.Publish += gain(cur.Publish, last.Publish)
	tot.PublishConfirm += gain(cur.PublishConfirm, last.PublishConfirm)
	tot.Confirm += gain(cur.Confirm, last.Confirm)
	tot.ReturnUnroutable += gain(cur.ReturnUnroutable, last.ReturnUnroutable)
	tot.DropUnroutable += gain(cur.DropUnroutable, last.DropUnroutable)
	tot.Deliver += gain(cur.Deliver, last.Deliver)
	tot.DeliverNoAck += gain(cur.DeliverNoAck, last.DeliverNoAck)
	tot.Get += gain(cur.Get, last.Get)
	tot.GetNoAck += gain(cur.GetNoAck, last.GetNoAck)
	tot.GetEmpty += gain(cur.GetEmpty, last.GetEmpty)
	tot.Redeliver += gain(cur.Redeliver, last.Redeliver)
	tot.Ack += gain(cur.Ack, last.Ack)
}

// reuse returns m emptied, or a new map for n entries when m is nil. A map
// keeps its buckets when cleared, so it stays as large as the most objects
// the node has had; one far larger than needed (4n) is dropped so that memory
// returns after a mass deletion.
func reuse[K comparable, V any](m map[K]V, n int) map[K]V {
	if m == nil || len(m) > 4*n+64 {
		return make(map[K]V, n)
	}
	clear(m)
	return m
}
