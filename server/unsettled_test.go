package server

import (
	"fmt"
	"testing"
)

// A delivery held while hundreds after it are acked, out of order, leaves
// holes in the queue's unsettled set until it is compacted; every delivery
// must still be settled by its id afterwards, once, and no other.
func TestQueueHandleSettlesByIDAcrossHoles(t *testing.T) {
	s := newQueueHarness(t)
	h := declareHandle(t, s, "holes", nil)
	const n = 300
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = fmt.Sprint(i)
	}
	publishViaAPI(t, s, "holes", bodies...)
	ms := getUnacked(t, h)
	if len(ms) != n {
		t.Fatalf("got %d of %d", len(ms), n)
	}
	unacked := func() int { return h.info().Unacked }
	// Ack all but 0 and 150, newest first, then the ones between them.
	for i := n - 1; i > 150; i-- {
		h.settle([]delivery{{q: h, id: ms[i].id}}, settleAck)
	}
	// Not compacted yet (149 holes, 151 live): a hole settles nothing.
	h.settle([]delivery{{q: h, id: ms[n-1].id}}, settleRequeue)
	if ready, _ := h.counts(); ready != 0 || unacked() != 151 {
		t.Fatalf("settling a hole: %d ready, %d unacked, want 0, 151", ready, unacked())
	}
	for i := 1; i < 150; i++ {
		h.settle([]delivery{{q: h, id: ms[i].id}}, settleAck)
	}
	if got := unacked(); got != 2 {
		t.Fatalf("after acking %d: %d unacked, want 2", n-2, got)
	}
	// An id acked already, and one never handed out, settle nothing.
	h.settle([]delivery{{q: h, id: ms[200].id}, {q: h, id: ms[n-1].id + 1000}}, settleRequeue)
	if ready, _ := h.counts(); ready != 0 || unacked() != 2 {
		t.Fatalf("settling unknown ids: %d ready, %d unacked", ready, unacked())
	}
	h.settle([]delivery{{q: h, id: ms[150].id}}, settleRequeue)
	h.settle([]delivery{{q: h, id: ms[0].id}}, settleAck)
	if ready, _ := h.counts(); ready != 1 || unacked() != 0 {
		t.Fatalf("after requeue 150, ack 0: %d ready, %d unacked, want 1, 0", ready, unacked())
	}
	again := getUnacked(t, h)
	wantStrings(t, "redelivered", outgoingBodies(again), []string{"150"})
	if !again[0].redelivered {
		t.Fatal("150 came back without redelivered")
	}
	h.settle([]delivery{{q: h, id: ms[150].id}}, settleAck) // its old id
	if unacked() != 1 {
		t.Fatalf("the old id of a redelivered message settled it: %d unacked", unacked())
	}
	h.settle([]delivery{{q: h, id: again[0].id}}, settleAck)
	if unacked() != 0 {
		t.Fatalf("after its new id: %d unacked", unacked())
	}
}
