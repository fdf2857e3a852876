package server

import "sync/atomic"

// pendingDurables are the destinations of one publish that accepted it but
// have not made it durable yet (accepted.wait), which its confirm waits for.
type pendingDurables struct {
	waits  []durableWaiter
	tokens []uint64
	failed bool // a write failed at once: the confirm is a nack
}

// testHookStreamDurable, when set by a test, wraps the callback each stream
// append's completion is given, so a test can hold a stream's durability
// back and see the confirm wait for it.
var testHookStreamDurable atomic.Pointer[func(fn func(error)) func(error)]

// completeWhenDurable has each pending destination complete one destination
// of c once its copy is durable.
func (p *pendingDurables) completeWhenDurable(c completion) {
	for i, w := range p.waits {
		w.whenDurable(p.tokens[i], c)
	}
}
