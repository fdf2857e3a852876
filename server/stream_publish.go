package server

import (
	"sync/atomic"

	"github.com/warrenmq/warren/msgstore"
)

// streamPublish is what publishing one message did to the stream queues it
// was routed to (streamType.accept).
type streamPublish struct {
	logs    []*msgstore.Log // the streams appended to
	offsets []uint64        // and the offsets they gave
	failed  bool            // an append failed: the confirm is a nack
}

// testHookStreamDurable, when set by a test, wraps the callback each stream
// append's completion is given, so a test can hold a stream's durability
// back and see the confirm wait for it.
var testHookStreamDurable atomic.Pointer[func(fn func(error)) func(error)]

// completeWhenDurable has each stream append complete one destination of c
// once it is durable under the stream's flush policy. The callbacks run on
// the logs' flusher goroutines and do not block.
func (sp *streamPublish) completeWhenDurable(c completion) {
	for i, l := range sp.logs {
		fn := c.durable
		if h := testHookStreamDurable.Load(); h != nil {
			fn = (*h)(fn)
		}
		l.WhenDurable(sp.offsets[i], fn)
	}
}
