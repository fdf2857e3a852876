package server

import (
	"math"
	"time"
)

// consumerUse is RabbitMQ 3.10's consumer capacity (also reported as
// consumer_utilisation): the share of time the queue's consumers could take
// messages, as a moving average with a one-second half-life
// (rabbit_queue_consumers' use_avg). The queue is inactive from the moment
// it has a message ready that no consumer can take (all at their prefetch
// or write-blocked) until a consumer takes one again or a new one arrives;
// each such change folds the last active and inactive spans into the
// average. Guarded by Queue.mu; it costs a clock read only at a change.
type consumerUse struct {
	inactive bool
	since    time.Time     // start of the current active or inactive span
	active   time.Duration // the active span before the current inactive one
	avg      float64
}

func newConsumerUse(now time.Time) consumerUse { return consumerUse{since: now, avg: 1} }

// useHalfLife is rabbit_queue_consumers' half-life of the average.
const useHalfLife = time.Second

// block records that a ready message found no consumer able to take it.
func (u *consumerUse) block(now time.Time) {
	if u.inactive {
		return
	}
	u.inactive, u.active, u.since = true, now.Sub(u.since), now
}

// unblock records that a consumer can take messages again.
func (u *consumerUse) unblock(now time.Time) {
	if !u.inactive {
		return
	}
	u.avg = useAverage(u.active, now.Sub(u.since), u.avg)
	u.inactive, u.active, u.since = false, 0, now
}

// capacity is the average as of now, the current span included.
func (u *consumerUse) capacity(now time.Time) float64 {
	if u.inactive {
		return useAverage(u.active, now.Sub(u.since), u.avg)
	}
	return useAverage(now.Sub(u.since), 0, u.avg)
}

// useAverage folds a span of active then inactive time into avg, weighting
// the old average by half for each half-life the span lasted
// (rabbit_misc:moving_average).
func useAverage(active, inactive time.Duration, avg float64) float64 {
	span := active + inactive
	if span <= 0 {
		return avg
	}
	w := math.Exp(-float64(span) * math.Ln2 / float64(useHalfLife))
	// avg + (share-avg)(1-w): a queue never blocked stays exactly 1.
	return avg + (float64(active)/float64(span)-avg)*(1-w)
}
