package server

import (
	"fmt"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// dedupCache remembers recent message keys for x-message-deduplication. It is
// bounded by size (oldest key evicted first) and, optionally, by age. Not safe
// for concurrent use: the owning queue or exchange locks it.
type dedupCache struct {
	size int
	ttl  time.Duration
	seen map[string]time.Time // key → when it was stored
	fifo []string             // insertion order, for eviction
	head int
}

func newDedupCache(size int, ttl time.Duration) *dedupCache {
	return &dedupCache{size: size, ttl: ttl, seen: make(map[string]time.Time)}
}

// dedupKey is the x-deduplication-header header, or else the message-id.
// Queues call it concurrently for a fanned-out message, so it never caches a
// decode in the message.
func dedupKey(m *Message) string {
	if amqp.PeekFlags(m.RawProps)&(amqp.FlagHeaders|amqp.FlagMessageID) == 0 {
		return ""
	}
	p, err := m.sharedProperties()
	if err != nil { // validated at publish: cannot happen
		return ""
	}
	if v, ok := p.Headers["x-deduplication-header"]; ok && v != nil {
		if s, isStr := v.(string); isStr {
			return s
		}
		return fmt.Sprint(v)
	}
	return p.MessageID
}

// seenBefore reports whether m's key is cached (a duplicate); otherwise it
// records the key. Messages without a key are never duplicates.
func (d *dedupCache) seenBefore(m *Message, now time.Time) bool {
	key := dedupKey(m)
	if key == "" {
		return false
	}
	if at, ok := d.seen[key]; ok && (d.ttl == 0 || now.Sub(at) < d.ttl) {
		return true
	}
	for len(d.seen) >= d.size && d.head < len(d.fifo) {
		old := d.fifo[d.head]
		d.fifo[d.head] = ""
		d.head++
		delete(d.seen, old)
	}
	if d.head > 1024 && d.head*2 > len(d.fifo) {
		d.fifo = append(d.fifo[:0], d.fifo[d.head:]...)
		d.head = 0
	}
	if _, ok := d.seen[key]; !ok {
		d.fifo = append(d.fifo, key)
	}
	d.seen[key] = now
	return false
}
