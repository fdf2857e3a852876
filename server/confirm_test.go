package server

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/warrenmq/warren/amqp"
)

// The confirm tracker and its completions, without sockets: what a tracker
// sends is read back from its outbox's buffer.

func newTestTracker(channel uint16) (*confirmTracker, *outbox) {
	o := newOutbox(1 << 20)
	t := &confirmTracker{}
	t.init(o, channel)
	return t, o
}

// sentConfirms takes the frames written to o since the last call and
// renders each as "ack 3", "ack 5 multiple" or "nack 2" ("@ch" appended when
// channel is 0: every channel).
func sentConfirms(t *testing.T, o *outbox, channel uint16) string {
	t.Helper()
	o.mu.Lock()
	b := o.buf
	o.buf = o.buf[len(o.buf):]
	o.mu.Unlock()
	var out []string
	for len(b) > 0 {
		f, n, err := amqp.ParseFrame(b, 0)
		if err != nil || n == 0 {
			t.Fatalf("parsing the outbox: n %d, err %v", n, err)
		}
		b = b[n:]
		m, err := amqp.DecodeMethod(f.Payload)
		must(t, err)
		var s string
		switch m := m.(type) {
		case *amqp.BasicAck:
			s = fmt.Sprintf("ack %d", m.DeliveryTag)
			if m.Multiple {
				s += " multiple"
			}
		case *amqp.BasicNack:
			s = fmt.Sprintf("nack %d", m.DeliveryTag)
			if m.Multiple {
				s += " multiple"
			}
		default:
			t.Fatalf("unexpected %T in the outbox", m)
		}
		if channel == 0 {
			s += fmt.Sprintf("@%d", f.Channel)
		} else if f.Channel != channel {
			t.Fatalf("%s sent on channel %d, want %d", s, f.Channel, channel)
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

func expectSent(t *testing.T, o *outbox, channel uint16, want string) {
	t.Helper()
	if got := sentConfirms(t, o, channel); got != want {
		t.Fatalf("sent %q, want %q", got, want)
	}
}

// Destinations complete out of order, across publishes and within one; the
// confirms still go out in publish order, each once all its destinations are
// done, and a run of acks is one basic.ack with multiple.
func TestConfirmTrackerReleasesInOrder(t *testing.T) {
	tr, o := newTestTracker(7)
	c1 := tr.expect(1, 2) // e.g. a durable queue and a stream
	c2 := tr.expect(2, 1)
	c3 := tr.expect(3, 2)
	c4 := tr.expect(4, 1)

	c3.done(true)
	c3.done(true)
	c4.done(true)
	c1.done(true)
	expectSent(t, o, 7, "") // 1 waits for its second destination
	c1.durable(nil)
	expectSent(t, o, 7, "ack 1") // 2 still waits
	c2.done(true)
	expectSent(t, o, 7, "ack 4 multiple") // 2, 3 and 4 at once

	tr.settled(5, true)
	tr.settled(6, true)
	c7 := tr.expect(7, 1)
	tr.settled(8, true)
	tr.flush()
	expectSent(t, o, 7, "ack 6 multiple")
	c7.done(true)
	expectSent(t, o, 7, "ack 8 multiple")
	if tr.acked != 8 {
		t.Fatalf("acked counts %d confirms, want 8", tr.acked)
	}
}

// One failed destination nacks its publish, whatever the others did, and
// only that publish: the acks around it are coalesced on each side.
func TestConfirmTrackerNacksAFailedDestination(t *testing.T) {
	tr, o := newTestTracker(1)
	c1 := tr.expect(1, 1)
	c2 := tr.expect(2, 3)
	c3 := tr.expect(3, 1)
	c4 := tr.expect(4, 1)
	c2.done(true)
	c2.durable(errors.New("stream append failed"))
	c1.done(true)
	c3.done(true)
	c4.done(true)
	expectSent(t, o, 1, "ack 1") // 2 waits for its third destination
	c2.done(true)
	expectSent(t, o, 1, "nack 2, ack 4 multiple")
	c2.done(true) // a destination completing too often is ignored
	tr.settled(5, false)
	tr.flush()
	expectSent(t, o, 1, "nack 5")
}

// A publish routed to a durable queue and a stream is confirmed only when
// both the commit round (completeAll) and the stream (durable) are done, in
// either order; a commit round completes the waiters of several channels and
// sends each channel's confirms coalesced.
func TestConfirmTrackerWaitsForStreamAndCommitRound(t *testing.T) {
	o := newOutbox(1 << 20)
	a, b := &confirmTracker{}, &confirmTracker{}
	a.init(o, 1)
	b.init(o, 2)
	var round []completion
	var streams []completion
	for seq := uint64(1); seq <= 3; seq++ {
		ca := a.expect(seq, 2) // queue + stream
		round = append(round, ca)
		streams = append(streams, ca)
		round = append(round, b.expect(seq, 1)) // queue only
	}
	streams[1].durable(nil)
	completeAll(round, true)
	expectSent(t, o, 0, "ack 3 multiple@2") // channel 1's publishes wait for the stream
	streams[2].durable(nil)
	expectSent(t, o, 0, "")
	streams[0].durable(nil)
	expectSent(t, o, 0, "ack 3 multiple@1")

	// Stream first, then a failed commit round: a nack.
	c := a.expect(4, 2)
	c.durable(nil)
	completeAll([]completion{c}, false)
	expectSent(t, o, 0, "nack 4@1")
}

// A closed channel's tracker sends nothing, and completions arriving after
// the close (a commit round in flight) are ignored.
func TestConfirmTrackerAfterClose(t *testing.T) {
	tr, o := newTestTracker(1)
	c := tr.expect(1, 1)
	tr.close()
	c.done(true)
	completeAll([]completion{c}, true)
	tr.settled(2, true)
	tr.flush()
	expectSent(t, o, 1, "")
}

// Recording a publish and completing it allocates nothing once the
// tracker's slice has grown.
func TestConfirmTrackerDoesNotAllocate(t *testing.T) {
	tr, o := newTestTracker(1)
	var seq uint64
	round := make([]completion, 0, 16)
	cycle := func() {
		round = round[:0]
		for range 16 {
			seq++
			round = append(round, tr.expect(seq, 1))
		}
		completeAll(round, true)
		o.mu.Lock()
		o.buf = o.buf[:0]
		o.mu.Unlock()
	}
	cycle()
	if n := testing.AllocsPerRun(100, cycle); n != 0 {
		t.Fatalf("%v allocations per 16 publishes", n)
	}
}
