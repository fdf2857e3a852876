package server

import "sync/atomic"

// pendingDurables are the destinations of one publish that accepted it but
// have not made it durable yet (accepted.wait), which its confirm waits for.
type pendingDurables struct {
	// first is the first destination: a publish usually has at most one
	// that waits (a stream, or the home of a forwarded queue), so it is
	// kept inline, with no allocation per publish; more holds the rest.
	first  pendingDurable
	more   []pendingDurable
	n      int
	failed bool // a write failed at once: the confirm is a nack
}

// pendingDurable is one destination and the token its enqueue returned.
type pendingDurable struct {
	w     durableWaiter
	token uint64
}

// add records one destination that waits.
func (p *pendingDurables) add(w durableWaiter, token uint64) {
	if p.n == 0 {
		p.first = pendingDurable{w: w, token: token}
	} else {
		p.more = append(p.more, pendingDurable{w: w, token: token})
	}
	p.n++
}

// count is the number of destinations that wait.
func (p *pendingDurables) count() int { return p.n }

// testHookStreamDurable, when set by a test, wraps the callback each stream
// append's completion is given, so a test can hold a stream's durability
// back and see the confirm wait for it.
var testHookStreamDurable atomic.Pointer[func(fn func(error)) func(error)]

// completeWhenDurable has each pending destination complete one destination
// of c once its copy is durable.
func (p *pendingDurables) completeWhenDurable(c completion) {
	if p.n == 0 {
		return
	}
	p.first.w.whenDurable(p.first.token, c)
	for _, d := range p.more {
		d.w.whenDurable(d.token, c)
	}
}
