package route

import (
	"fmt"

	"github.com/warrenmq/warren/amqp"
)

// Binding connects an exchange to a destination. Its identity is all three
// fields: two bindings are the same when Dest and Key are equal and Args hold
// the same keys with values of the same wire type and value (nested tables,
// arrays and byte arrays compared deeply; floats compared bit for bit, so a NaN
// argument still identifies its binding). A nil and an empty Args are equal.
type Binding[D comparable] struct {
	// Dest is where matching messages go: a queue or an exchange.
	Dest D
	// Key is the binding key: a routing key for direct exchanges, a pattern for
	// topic exchanges, and ignored by fanout and headers exchanges when routing.
	Key string
	// Args are the binding arguments. Headers exchanges match on them; the other
	// types only use them for identity.
	Args amqp.Table
}

// Matcher finds the destinations of a message among an exchange's bindings.
// See the package documentation for the locking contract.
type Matcher[D comparable] interface {
	// Add adds b and reports whether it was new; adding a binding that already
	// exists (same Dest, Key and Args) changes nothing and returns false.
	Add(b Binding[D]) (added bool)
	// Remove removes the binding identical to b and reports whether there was one.
	Remove(b Binding[D]) (removed bool)
	// Match calls visit once for each destination with at least one binding
	// matching the routing key and headers. Which of the two it looks at depends
	// on the exchange type.
	Match(routingKey string, headers amqp.Table, visit func(D))
	// Len returns the number of bindings.
	Len() int
	// Bindings returns a new slice of all bindings in the order they were added.
	Bindings() []Binding[D]
	// HasDest reports whether any binding points at d.
	HasDest(d D) bool
	// RemoveDest removes every binding to d, e.g. when the queue d is deleted,
	// and returns how many it removed.
	RemoveDest(d D) int
}

// Exchange type names accepted by New.
const (
	KindDirect  = "direct"
	KindFanout  = "fanout"
	KindTopic   = "topic"
	KindHeaders = "headers"
)

// New returns an empty matcher for the exchange type kind (one of the Kind
// constants) with the exchange's arguments args. An x-consistent-hash
// matcher hashes what args name (ParseHashSource; an error is an
// *ArgsError); an x-modulus-hash matcher counts its bindings in the order
// less sorts them, which it needs (the other types ignore less). An unknown
// kind is an error wrapping ErrUnknownKind.
func New[D comparable](kind string, args amqp.Table, less func(a, b Binding[D]) bool) (Matcher[D], error) {
	switch kind {
	case KindDirect:
		return NewDirect[D](), nil
	case KindFanout:
		return NewFanout[D](), nil
	case KindTopic:
		return NewTopic[D](), nil
	case KindHeaders:
		return NewHeaders[D](), nil
	case KindConsistentHash:
		src, err := ParseHashSource(args)
		if err != nil {
			return nil, err
		}
		return NewConsistentHash[D](src), nil
	case KindModulusHash:
		if less == nil {
			return nil, fmt.Errorf("route: exchange type %q needs a binding order", kind)
		}
		return NewModulusHash(less), nil
	case KindRandom, KindLocalRandom:
		return NewRandom[D](), nil
	case KindFederationUpstream:
		return NewFederationUpstream[D](args)
	}
	return nil, fmt.Errorf("route: exchange type %q: %w", kind, ErrUnknownKind)
}

// Compile-time checks that every implementation satisfies Matcher.
var (
	_ Matcher[int] = (*Direct[int])(nil)
	_ Matcher[int] = (*Fanout[int])(nil)
	_ Matcher[int] = (*Topic[int])(nil)
	_ Matcher[int] = (*Headers[int])(nil)
	_ Picker[int]  = (*ConsistentHash[int])(nil)
	_ Picker[int]  = (*ModulusHash[int])(nil)
	_ Picker[int]  = (*Random[int])(nil)
)

// identity is the comparable part of a binding's identity, used as a map key;
// Args are compared separately because tables cannot be map keys.
type identity[D comparable] struct {
	dest D
	key  string
}

// entry is one stored binding. X is the per-implementation data a matcher needs
// to undo the binding (the topic trie node, the compiled headers pattern).
type entry[D comparable, X any] struct {
	b          Binding[D]
	x          X
	prev, next *entry[D, X] // insertion order
	ds         *destState[D, X]
	destPos    int // index in ds.entries
}

// destState is everything known about one destination that has bindings.
type destState[D comparable, X any] struct {
	dest    D
	id      uint32 // dense id, reused after the destination's last binding goes
	pos     int    // index in registry.destList
	entries []*entry[D, X]
}

// registry is the bookkeeping all matchers share: identity lookup, insertion
// order, and the per-destination index that HasDest and RemoveDest need. Each
// matcher adds its own routing structure on top.
type registry[D comparable, X any] struct {
	head, tail *entry[D, X]
	byID       map[identity[D]][]*entry[D, X]
	dests      map[D]*destState[D, X]
	destList   []*destState[D, X]
	destIDs    idAlloc
	n          int
}

func (r *registry[D, X]) init() {
	r.byID = make(map[identity[D]][]*entry[D, X])
	r.dests = make(map[D]*destState[D, X])
}

// find returns the stored binding identical to b, or nil.
func (r *registry[D, X]) find(b Binding[D]) *entry[D, X] {
	for _, e := range r.byID[identity[D]{b.Dest, b.Key}] {
		if argsEqual(e.b.Args, b.Args) {
			return e
		}
	}
	return nil
}

// insert stores b, which the caller has checked is not present yet.
func (r *registry[D, X]) insert(b Binding[D], x X) *entry[D, X] {
	e := &entry[D, X]{b: b, x: x, prev: r.tail}
	if r.tail != nil {
		r.tail.next = e
	} else {
		r.head = e
	}
	r.tail = e
	id := identity[D]{b.Dest, b.Key}
	r.byID[id] = append(r.byID[id], e)

	ds := r.dests[b.Dest]
	if ds == nil {
		ds = &destState[D, X]{dest: b.Dest, id: r.destIDs.get(), pos: len(r.destList)}
		r.dests[b.Dest] = ds
		r.destList = append(r.destList, ds)
	}
	e.ds = ds
	e.destPos = len(ds.entries)
	ds.entries = append(ds.entries, e)
	r.n++
	return e
}

// delete forgets e. The caller has already removed it from its own structure.
func (r *registry[D, X]) delete(e *entry[D, X]) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		r.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		r.tail = e.prev
	}

	id := identity[D]{e.b.Dest, e.b.Key}
	same := r.byID[id]
	for i, o := range same {
		if o == e {
			same = append(same[:i], same[i+1:]...)
			break
		}
	}
	if len(same) == 0 {
		delete(r.byID, id)
	} else {
		r.byID[id] = same
	}

	ds := e.ds
	last := len(ds.entries) - 1
	if e.destPos != last {
		moved := ds.entries[last]
		ds.entries[e.destPos] = moved
		moved.destPos = e.destPos
	}
	ds.entries[last] = nil
	ds.entries = ds.entries[:last]
	if last == 0 {
		r.dropDest(ds)
	}
	*e = entry[D, X]{b: e.b}
	r.n--
}

func (r *registry[D, X]) dropDest(ds *destState[D, X]) {
	delete(r.dests, ds.dest)
	last := len(r.destList) - 1
	if ds.pos != last {
		moved := r.destList[last]
		r.destList[ds.pos] = moved
		moved.pos = ds.pos
	}
	r.destList[last] = nil
	r.destList = r.destList[:last]
	r.destIDs.put(ds.id)
}

// removeDest deletes every binding to d, calling unroute on each first so the
// matcher can take it out of its routing structure.
func (r *registry[D, X]) removeDest(d D, unroute func(*entry[D, X])) int {
	ds := r.dests[d]
	if ds == nil {
		return 0
	}
	n := 0
	for len(ds.entries) > 0 {
		e := ds.entries[len(ds.entries)-1]
		unroute(e)
		r.delete(e)
		n++
	}
	return n
}

// bindings lists the stored bindings in insertion order.
func (r *registry[D, X]) bindings() []Binding[D] {
	out := make([]Binding[D], 0, r.n)
	for e := r.head; e != nil; e = e.next {
		out = append(out, e.b)
	}
	return out
}

func (r *registry[D, X]) hasDest(d D) bool {
	_, ok := r.dests[d]
	return ok
}

// idAlloc hands out small dense ids so that per-match scratch space can be a
// slice indexed by id instead of a map. Ids are reused, so the largest id never
// exceeds the largest number in use at once.
type idAlloc struct {
	next uint32
	free []uint32
}

func (a *idAlloc) get() uint32 {
	if n := len(a.free); n > 0 {
		id := a.free[n-1]
		a.free = a.free[:n-1]
		return id
	}
	id := a.next
	a.next++
	return id
}

func (a *idAlloc) put(id uint32) {
	a.free = append(a.free, id)
	if len(a.free) == int(a.next) {
		// Everything is free: start over so the high-water mark, and with it
		// the size of per-match scratch arrays, can shrink.
		a.next = 0
		a.free = a.free[:0]
	}
}

// limit returns one more than the largest id handed out.
func (a *idAlloc) limit() int { return int(a.next) }

// destRef is one destination in a destSet, with the number of bindings that put
// it there.
type destRef[D comparable] struct {
	dest D
	id   uint32
	refs int32
}

// smallSet is the size up to which destSet finds members by scanning; above it
// a map index keeps Add and Remove constant-time for keys bound to many queues.
const smallSet = 8

// destSet is a set of destinations with reference counts, iterated as a slice so
// that Match neither allocates nor hashes.
type destSet[D comparable] struct {
	items []destRef[D]
	index map[D]int
}

func (s *destSet[D]) find(d D) int {
	if s.index != nil {
		if i, ok := s.index[d]; ok {
			return i
		}
		return -1
	}
	for i := range s.items {
		if s.items[i].dest == d {
			return i
		}
	}
	return -1
}

// add counts one more binding to d.
func (s *destSet[D]) add(d D, id uint32) {
	if i := s.find(d); i >= 0 {
		s.items[i].refs++
		return
	}
	s.items = append(s.items, destRef[D]{dest: d, id: id, refs: 1})
	switch {
	case s.index != nil:
		s.index[d] = len(s.items) - 1
	case len(s.items) > smallSet:
		s.index = make(map[D]int, len(s.items))
		for i := range s.items {
			s.index[s.items[i].dest] = i
		}
	}
}

// remove counts one binding to d less and reports whether d was in the set.
func (s *destSet[D]) remove(d D) bool {
	i := s.find(d)
	if i < 0 {
		return false
	}
	if s.items[i].refs--; s.items[i].refs > 0 {
		return true
	}
	last := len(s.items) - 1
	if i != last {
		s.items[i] = s.items[last]
		if s.index != nil {
			s.index[s.items[i].dest] = i
		}
	}
	s.items[last] = destRef[D]{}
	s.items = s.items[:last]
	if s.index != nil {
		delete(s.index, d)
		if len(s.items) <= smallSet/2 {
			s.index = nil
		}
	}
	return true
}

func (s *destSet[D]) empty() bool { return len(s.items) == 0 }
