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

// awaitStreams settles confirm seq once every stream append is durable under
// the flush policy, and, when stored is set, after the vhost's next commit
// round too. The callbacks run on the logs' flusher goroutines and do not block.
func (ch *channel) awaitStreams(seq uint64, sp streamPublish, stored bool) {
	ch.confirms.add(seq, confirmWaiting)
	var pending atomic.Int32
	var failed atomic.Bool
	pending.Store(int32(len(sp.logs)))
	done := func(err error) {
		if err != nil {
			failed.Store(true)
		}
		if pending.Add(-1) != 0 {
			return
		}
		switch {
		case failed.Load():
			if ch.confirms.settle(seq, false) {
				ch.confirms.flush(ch.conn.out, ch.id)
			}
		case stored:
			ch.conn.vhost.storage.await(ch, seq)
		default:
			if ch.confirms.settle(seq, true) {
				ch.confirms.flush(ch.conn.out, ch.id)
			}
		}
	}
	for i, l := range sp.logs {
		l.WhenDurable(sp.offsets[i], done)
	}
}
