package main

import "fmt"

// queueFindings are the message-level violations of one history.
type queueFindings struct {
	lost, unexpected, badDup, committed, drain []violation
}

// checkQueue checks the total-queue rules: every confirmed message is
// delivered, nothing unpublished is, a message delivered again carries
// redelivered, and none comes back after its ack was committed.
func checkQueue(hist []Event, s *summary) queueFindings {
	var f queueFindings
	invokes := map[int64]Event{}
	published := map[string][]Event{} // id → its publish invoke and completion
	confirmed := map[string]bool{}
	deliveries := map[string][]Event{}
	committedAt := map[string]Event{} // id → the first tx.commit-ok covering its ack
	var order []string
	for _, e := range hist {
		if e.Type == evInvoke {
			s.Operations++
			invokes[e.Op] = e
		}
		switch {
		case e.F == "publish" && e.Type == evInvoke:
			s.Published++
			published[e.ID] = append(published[e.ID], e)
			order = append(order, e.ID)
		case e.F == "publish":
			published[e.ID] = append(published[e.ID], e)
			countPublish(e, s, confirmed)
		case (e.F == "deliver" || e.F == "get") && e.Type == evOK:
			s.Deliveries++
			deliveries[e.ID] = append(deliveries[e.ID], e)
			f.checkDelivery(e, published, deliveries[e.ID], committedAt, s)
		case e.F == "commit" && e.Type == evOK:
			s.CommitsOK++
			for _, id := range e.IDs {
				if _, seen := committedAt[id]; !seen {
					committedAt[id] = e
				}
			}
		case e.F == "drain" && e.Type == evFail:
			f.drain = append(f.drain, violation{ID: e.Node, Detail: e.Err, Events: []Event{e}})
		}
	}
	for _, id := range order {
		if !confirmed[id] && len(deliveries[id]) > 0 {
			s.Recovered++
		}
		if confirmed[id] && len(deliveries[id]) == 0 {
			f.lost = append(f.lost, violation{ID: id, Detail: "confirmed, never delivered", Events: published[id]})
		}
	}
	s.Delivered = len(deliveries)
	return f
}

func countPublish(e Event, s *summary, confirmed map[string]bool) {
	switch e.Type {
	case evOK:
		s.Confirmed++
		confirmed[e.ID] = true
	case evFail:
		s.PublishFailed++
	case evUnknown:
		s.PublishUnknown++
	}
}

// checkDelivery checks one delivery d against what came before it; all is
// every delivery of its id so far, d last.
func (f *queueFindings) checkDelivery(d Event, published map[string][]Event, all []Event, committedAt map[string]Event, s *summary) {
	if d.Redelivered {
		s.Redeliveries++
	}
	if len(published[d.ID]) == 0 {
		f.unexpected = append(f.unexpected, violation{ID: d.ID, Detail: "delivered, never published", Events: []Event{d}})
		return
	}
	if c, ok := committedAt[d.ID]; ok {
		f.committed = append(f.committed, violation{ID: d.ID,
			Detail: fmt.Sprintf("delivered again after tx.commit-ok of its ack on %s", c.Node),
			Events: append(append([]Event{}, all...), c)})
	}
	if len(all) > 1 && !d.Redelivered {
		f.badDup = append(f.badDup, violation{ID: d.ID,
			Detail: fmt.Sprintf("delivery %d of the message without redelivered", len(all)),
			Events: append(append([]Event{}, published[d.ID]...), all...)})
	}
}
