package route

import (
	"strings"
	"sync"

	"github.com/warrenmq/warren/amqp"
)

// Topic routes a message to the destinations whose binding pattern matches its
// routing key. Keys and patterns are split into words at every "."; the empty
// string has no words, and "a..b" has three, the middle one empty. In a pattern
// "*" matches exactly one word (possibly empty) and "#" zero or more words.
//
// Patterns are stored in a trie whose edges are words, with the two wildcards
// kept apart from literal words. Match walks the routing key word by word,
// carrying the set of trie nodes reachable so far (a node reached by a "#" edge
// stays reachable on every further word); at the end it visits the destinations
// bound at the reachable nodes. The zero value is not usable; call NewTopic.
type Topic[D comparable] struct {
	reg     registry[D, *topicNode[D]]
	root    *topicNode[D]
	nodeIDs idAlloc
	// scratch holds *topicScratch values, so concurrent Match calls under the
	// exchange's read lock each get their own working space.
	scratch sync.Pool
}

// topicNode is a trie node. The path from the root spells a pattern; dests are
// the destinations bound with that pattern (or an equivalent one with repeated
// "#" collapsed).
type topicNode[D comparable] struct {
	id       uint32 // dense, indexes topicScratch.nodeMark
	parent   *topicNode[D]
	word     string // label of the edge from parent
	children map[string]*topicNode[D]
	star     *topicNode[D] // the "*" child
	hash     *topicNode[D] // the "#" child
	isHash   bool          // reached by a "#" edge: matches any further word
	dests    destSet[D]
}

func (n *topicNode[D]) unused() bool {
	return len(n.children) == 0 && n.star == nil && n.hash == nil && n.dests.empty()
}

// topicScratch is one Match call's working space. Marks are generation stamps:
// a node is in the current set when nodeMark[id] equals the current generation,
// so nothing needs clearing between words or calls.
type topicScratch[D comparable] struct {
	cur, next []*topicNode[D]
	nodeMark  []uint32
	destMark  []uint32
	gen       uint32
}

// NewTopic returns an empty topic-exchange matcher.
func NewTopic[D comparable]() *Topic[D] {
	m := &Topic[D]{}
	m.reg.init()
	m.root = &topicNode[D]{id: m.nodeIDs.get()}
	m.scratch.New = func() any { return new(topicScratch[D]) }
	return m
}

// Add adds b and reports whether it was new.
func (m *Topic[D]) Add(b Binding[D]) bool {
	if m.reg.find(b) != nil {
		return false
	}
	n := m.insertPattern(b.Key)
	e := m.reg.insert(b, n)
	n.dests.add(b.Dest, e.ds.id)
	return true
}

// Remove removes the binding identical to b and reports whether there was one.
func (m *Topic[D]) Remove(b Binding[D]) bool {
	e := m.reg.find(b)
	if e == nil {
		return false
	}
	m.unroute(e)
	m.reg.delete(e)
	return true
}

func (m *Topic[D]) unroute(e *entry[D, *topicNode[D]]) {
	n := e.x
	n.dests.remove(e.b.Dest)
	m.prune(n)
}

// Len returns the number of bindings.
func (m *Topic[D]) Len() int { return m.reg.n }

// Bindings returns all bindings in the order they were added.
func (m *Topic[D]) Bindings() []Binding[D] { return m.reg.bindings() }

// HasDest reports whether any binding points at d.
func (m *Topic[D]) HasDest(d D) bool { return m.reg.hasDest(d) }

// RemoveDest removes every binding to d and returns how many it removed.
func (m *Topic[D]) RemoveDest(d D) int { return m.reg.removeDest(d, m.unroute) }

// cutWord splits s at its first ".". more is false when s is the last word.
func cutWord(s string) (word, rest string, more bool) {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// insertPattern returns the node for pattern, creating the path as needed.
func (m *Topic[D]) insertPattern(pattern string) *topicNode[D] {
	n := m.root
	if pattern == "" {
		return n
	}
	for rest, more := pattern, true; more; {
		var w string
		w, rest, more = cutWord(rest)
		n = m.child(n, w)
	}
	return n
}

func (m *Topic[D]) child(n *topicNode[D], w string) *topicNode[D] {
	switch w {
	case "#":
		if n.isHash {
			return n // "#.#" matches what "#" matches
		}
		if n.hash == nil {
			n.hash = &topicNode[D]{id: m.nodeIDs.get(), parent: n, word: w, isHash: true}
		}
		return n.hash
	case "*":
		if n.star == nil {
			n.star = &topicNode[D]{id: m.nodeIDs.get(), parent: n, word: w}
		}
		return n.star
	}
	c := n.children[w]
	if c == nil {
		// Clone so the trie does not pin the whole binding key of whichever
		// binding created the node after that binding is gone.
		w = strings.Clone(w)
		c = &topicNode[D]{id: m.nodeIDs.get(), parent: n, word: w}
		if n.children == nil {
			n.children = make(map[string]*topicNode[D])
		}
		n.children[w] = c
	}
	return c
}

// prune removes n and its ancestors while they hold no bindings and no children.
func (m *Topic[D]) prune(n *topicNode[D]) {
	for n != m.root && n.unused() {
		p := n.parent
		switch n {
		case p.hash:
			p.hash = nil
		case p.star:
			p.star = nil
		default:
			delete(p.children, n.word)
			if len(p.children) == 0 {
				p.children = nil
			}
		}
		m.nodeIDs.put(n.id)
		n.parent = nil
		n = p
	}
}

// Match calls visit once for each destination with a pattern matching
// routingKey. Headers are ignored.
func (m *Topic[D]) Match(routingKey string, _ amqp.Table, visit func(D)) {
	if m.reg.n == 0 {
		return
	}
	s := m.scratch.Get().(*topicScratch[D])
	s.fit(m.nodeIDs.limit(), m.reg.destIDs.limit())

	cur := s.add(s.cur[:0], m.root, s.step())
	next := s.next[:0]
	for rest, more := routingKey, routingKey != ""; more && len(cur) > 0; {
		var w string
		w, rest, more = cutWord(rest)
		gen := s.step()
		next = next[:0]
		for _, n := range cur {
			if n.children != nil {
				if c := n.children[w]; c != nil {
					next = s.add(next, c, gen)
				}
			}
			if n.star != nil {
				next = s.add(next, n.star, gen)
			}
			if n.isHash {
				next = s.add(next, n, gen)
			}
		}
		cur, next = next, cur
	}

	gen := s.step()
	for _, n := range cur {
		for i := range n.dests.items {
			d := &n.dests.items[i]
			if s.destMark[d.id] != gen {
				s.destMark[d.id] = gen
				visit(d.dest)
			}
		}
	}

	// Drop node pointers so a pooled scratch does not keep removed nodes alive.
	clear(cur[:cap(cur)])
	clear(next[:cap(next)])
	s.cur, s.next = cur[:0], next[:0]
	m.scratch.Put(s)
}

// fit makes the mark arrays large enough for the matcher's current ids.
func (s *topicScratch[D]) fit(nodes, dests int) {
	if len(s.nodeMark) < nodes {
		s.nodeMark = make([]uint32, max(nodes, 2*len(s.nodeMark)))
	}
	if len(s.destMark) < dests {
		s.destMark = make([]uint32, max(dests, 2*len(s.destMark)))
	}
}

// step starts a new generation of marks.
func (s *topicScratch[D]) step() uint32 {
	s.gen++
	if s.gen == 0 {
		clear(s.nodeMark)
		clear(s.destMark)
		s.gen = 1
	}
	return s.gen
}

// add appends n to set unless it is already there, together with the "#" child
// that follows it, because "#" also matches zero words.
func (s *topicScratch[D]) add(set []*topicNode[D], n *topicNode[D], gen uint32) []*topicNode[D] {
	for ; n != nil; n = n.hash {
		if s.nodeMark[n.id] == gen {
			return set
		}
		s.nodeMark[n.id] = gen
		set = append(set, n)
	}
	return set
}
