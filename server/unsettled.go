package server

import "sort"

// unsettledSet is a classic queue's deliveries awaiting a settlement, named
// by the delivery ids it hands out (outgoing.id), guarded by Queue.mu.
//
// Ids increase with every delivery, so the entries are a slice in id order:
// adding appends, and a settlement, usually of the oldest entries, finds its
// entry by its distance from the first one, with no map insert, hash or
// delete per delivery (a fanout publish makes one per queue). A settled
// entry leaves a hole until the entries before it are settled too; once the
// holes outnumber the live entries the slice is compacted, so one delivery
// held for long while the rest are acked costs no more than twice the live
// entries. After a compaction, lookups fall back to a binary search.
type unsettledSet struct {
	items []unsettledEntry // by id; items[head] is live when any is
	head  int
	live  int
	next  uint64 // the last id handed out
}

// unsettledEntry is one delivery; settled marks a hole.
type unsettledEntry struct {
	id      uint64
	m       queued
	settled bool
}

// unsettledCompactMin is the number of holes below which the slice is not
// compacted: a few holes cost less than moving the live entries.
const unsettledCompactMin = 64

func (s *unsettledSet) len() int { return s.live }

// add keeps m until it is settled and returns its delivery id.
func (s *unsettledSet) add(m queued) uint64 {
	s.next++
	s.items = append(s.items, unsettledEntry{id: s.next, m: m})
	s.live++
	return s.next
}

// take removes the delivery id and returns its message; ok is false when
// the set does not hold it (settled already, or dropped by a queue delete).
func (s *unsettledSet) take(id uint64) (queued, bool) {
	i := s.find(id)
	if i < 0 {
		return queued{}, false
	}
	m := s.items[i].m
	s.items[i] = unsettledEntry{id: id, settled: true}
	s.live--
	for s.head < len(s.items) && s.items[s.head].settled {
		s.head++
	}
	switch holes := len(s.items) - s.head - s.live; {
	case s.live == 0:
		clear(s.items)
		s.items, s.head = s.items[:0], 0
	case holes >= unsettledCompactMin && holes > s.live:
		s.compact()
	}
	return m, true
}

// find is the index of id's live entry, or -1.
func (s *unsettledSet) find(id uint64) int {
	if s.live == 0 {
		return -1
	}
	first := s.items[s.head].id
	if id < first || id > s.next {
		return -1
	}
	i := s.head + int(id-first)
	if i >= len(s.items) || s.items[i].id != id {
		// Compacted since: the ids have gaps.
		rest := s.items[s.head:]
		i = s.head + sort.Search(len(rest), func(j int) bool { return rest[j].id >= id })
		if i == len(s.items) || s.items[i].id != id {
			return -1
		}
	}
	if s.items[i].settled {
		return -1
	}
	return i
}

// compact drops the holes, keeping the live entries in id order.
func (s *unsettledSet) compact() {
	n := 0
	for _, e := range s.items[s.head:] {
		if !e.settled {
			s.items[n] = e
			n++
		}
	}
	clear(s.items[n:])
	s.items, s.head = s.items[:n], 0
}

// each calls fn with every unsettled message, in delivery order.
func (s *unsettledSet) each(fn func(m *queued)) {
	for i := s.head; i < len(s.items); i++ {
		if !s.items[i].settled {
			fn(&s.items[i].m)
		}
	}
}

// drop forgets every delivery (the queue was deleted); ids are not reused,
// so a late settlement finds nothing.
func (s *unsettledSet) drop() {
	clear(s.items)
	s.items, s.head, s.live = s.items[:0], 0, 0
}
