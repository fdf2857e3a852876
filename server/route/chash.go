package route

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/warrenmq/warren/amqp"
)

// ConsistentHash is RabbitMQ 3.10's x-consistent-hash exchange
// (rabbitmq_consistent_hash_exchange). Each destination owns as many
// consecutive buckets of a ring as its binding key says (the weight); a message
// goes to the owner of bucket jump_consistent_hash(phash2(T), total buckets),
// where T is the routing key, a header's {Type, Value} or a property, as
// HashSource says. The ring is kept as one segment per destination, in the
// order destinations joined, so a weight of a million costs one segment, not a
// million buckets.
//
// Like the plugin, a destination holds at most one segment: a second binding
// to it (another weight or other arguments) is stored but does not change the
// ring, and removing any binding to a destination takes its segment out of
// the ring, even if another binding to it remains. When a segment leaves, the
// later ones move down, exactly as the plugin renumbers its buckets.
//
// The zero value is not usable; call NewConsistentHash.
type ConsistentHash[D comparable] struct {
	reg  registry[D, struct{}]
	src  HashSource
	ring []segment[D]
	// ends[i] is one past the last bucket of ring[i].
	ends []int64
	memo bucketMemo
}

// memoSize is the number of entries in a bucketMemo.
const memoSize = 4096

// bucketMemo remembers the bucket recent terms hashed to. The bucket depends
// only on the term's phash2 and the number of buckets, and computing it (16
// generator steps to seed, then a few draws) costs several times a direct
// exchange's map lookup; messages often repeat keys. Each entry packs a valid
// bit, the 27-bit phash2 and a bucket below 2^32. Picks running concurrently
// under the exchange's read lock fill it with atomic stores; it is cleared
// under the write lock whenever the number of buckets changes.
type bucketMemo [memoSize]atomic.Uint64

const memoValid = 1 << 63

func (mm *bucketMemo) bucket(key uint32, n int64) int64 {
	if n > 1<<32 {
		return jumpBucket(key, n)
	}
	slot := &mm[key%memoSize]
	if e := slot.Load(); e&memoValid != 0 && uint32(e>>32)&phash2Mask == key {
		return int64(uint32(e))
	}
	b := jumpBucket(key, n)
	slot.Store(memoValid | uint64(key)<<32 | uint64(b))
	return b
}

func (mm *bucketMemo) clear() {
	for i := range mm {
		mm[i].Store(0)
	}
}

type segment[D comparable] struct {
	dest   D
	weight int64
}

// NewConsistentHash returns an empty x-consistent-hash matcher that hashes what
// src says.
func NewConsistentHash[D comparable](src HashSource) *ConsistentHash[D] {
	m := &ConsistentHash[D]{src: src}
	m.reg.init()
	return m
}

// Add adds b and reports whether it was new. A binding whose key is not a valid
// weight (see ParseWeight) is stored without joining the ring.
func (m *ConsistentHash[D]) Add(b Binding[D]) bool {
	if m.reg.find(b) != nil {
		return false
	}
	m.reg.insert(b, struct{}{})
	if w, err := ParseWeight(b.Key); err == nil && m.segmentOf(b.Dest) < 0 {
		m.ring = append(m.ring, segment[D]{dest: b.Dest, weight: w})
		m.reindex()
	}
	return true
}

// Remove removes the binding identical to b and reports whether there was one.
func (m *ConsistentHash[D]) Remove(b Binding[D]) bool {
	e := m.reg.find(b)
	if e == nil {
		return false
	}
	m.reg.delete(e)
	m.leaveRing(b.Dest)
	return true
}

func (m *ConsistentHash[D]) segmentOf(d D) int {
	for i := range m.ring {
		if m.ring[i].dest == d {
			return i
		}
	}
	return -1
}

func (m *ConsistentHash[D]) leaveRing(d D) {
	i := m.segmentOf(d)
	if i < 0 {
		return
	}
	m.ring = append(m.ring[:i], m.ring[i+1:]...)
	m.reindex()
}

func (m *ConsistentHash[D]) reindex() {
	before := m.Buckets()
	defer func() {
		if m.Buckets() != before {
			m.memo.clear()
		}
	}()
	m.ends = m.ends[:0]
	var n int64
	for _, s := range m.ring {
		n += s.weight
		m.ends = append(m.ends, n)
	}
}

// Buckets returns the number of buckets in the ring: the sum of the weights of
// the destinations in it.
func (m *ConsistentHash[D]) Buckets() int64 {
	if len(m.ends) == 0 {
		return 0
	}
	return m.ends[len(m.ends)-1]
}

// Ring returns the destinations in ring order with their weights.
func (m *ConsistentHash[D]) Ring() []Binding[D] {
	out := make([]Binding[D], len(m.ring))
	for i, s := range m.ring {
		out[i] = Binding[D]{Dest: s.dest, Key: strconv.FormatInt(s.weight, 10)}
	}
	return out
}

// Rebuild empties the ring and refills it from the bindings in the order less
// sorts them, each destination joining once with the first of its bindings in
// that order. The plugin does this when RabbitMQ boots: its ring lives in RAM
// and is rebuilt from the bindings sorted as Erlang terms (by binding key, then
// destination).
func (m *ConsistentHash[D]) Rebuild(less func(a, b Binding[D]) bool) {
	bs := m.reg.bindings()
	sortBindings(bs, less)
	m.ring = m.ring[:0]
	for _, b := range bs {
		if w, err := ParseWeight(b.Key); err == nil && m.segmentOf(b.Dest) < 0 {
			m.ring = append(m.ring, segment[D]{dest: b.Dest, weight: w})
		}
	}
	m.reindex()
}

// Pick visits the owner of the bucket the message hashes to.
func (m *ConsistentHash[D]) Pick(d *Delivery, visit func(D)) {
	n := m.Buckets()
	if n == 0 {
		return
	}
	bucket := m.memo.bucket(m.src.hash(d), n)
	lo, hi := 0, len(m.ends) // the first segment whose end is past bucket
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if m.ends[mid] <= bucket {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	visit(m.ring[lo].dest)
}

// Reads reports whether Pick needs headers or properties.
func (m *ConsistentHash[D]) Reads() Reads {
	switch m.src.kind {
	case hashHeader:
		return ReadsHeaders
	case hashProperty:
		return ReadsProperties
	}
	return 0
}

// Match picks for a message with routingKey and headers and no properties.
func (m *ConsistentHash[D]) Match(routingKey string, headers amqp.Table, visit func(D)) {
	m.Pick(&Delivery{RoutingKey: routingKey, Headers: headers}, visit)
}

// Len returns the number of bindings.
func (m *ConsistentHash[D]) Len() int { return m.reg.n }

// Bindings returns all bindings in the order they were added.
func (m *ConsistentHash[D]) Bindings() []Binding[D] { return m.reg.bindings() }

// HasDest reports whether any binding points at d.
func (m *ConsistentHash[D]) HasDest(d D) bool { return m.reg.hasDest(d) }

// RemoveDest removes every binding to d and returns how many it removed.
func (m *ConsistentHash[D]) RemoveDest(d D) int {
	n := m.reg.removeDest(d, func(*entry[D, struct{}]) {})
	if n > 0 {
		m.leaveRing(d)
	}
	return n
}

// MaxWeight is the largest binding key an x-consistent-hash binding may have.
// RabbitMQ has no limit but allocates one map entry per bucket: a key of
// 99999999999999999999 exhausts a node's memory and kills it.
const MaxWeight = 1<<31 - 1

// ErrInvalidWeight means an x-consistent-hash binding key is not a positive
// integer; ParseWeight wraps it in an *ArgsError with RabbitMQ's reply text.
var ErrInvalidWeight = errors.New("route: invalid consistent-hash weight")

// ParseWeight reads an x-consistent-hash binding key as the plugin does
// (list_to_integer: an optional sign and decimal digits) and checks it is at
// least 1 and at most MaxWeight.
func ParseWeight(key string) (int64, error) {
	digits, neg := key, false
	if digits != "" && (digits[0] == '+' || digits[0] == '-') {
		neg = digits[0] == '-'
		digits = digits[1:]
	}
	if digits == "" || strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, &ArgsError{Text: "The binding key must be an integer: " + string(appendErlBinary(nil, key)),
			Err: ErrInvalidWeight}
	}
	digits = strings.TrimLeft(digits, "0")
	if neg || digits == "" {
		return 0, &ArgsError{Text: "The binding key must be greater than 0", Err: ErrInvalidWeight}
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || v > MaxWeight {
		return 0, &ArgsError{Text: fmt.Sprintf("The binding key must be at most %d", MaxWeight), Err: ErrInvalidWeight}
	}
	return v, nil
}
