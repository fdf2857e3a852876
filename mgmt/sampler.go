package mgmt

import (
	"strconv"
	"sync"
	"time"

	"github.com/warrenmq/warren/server"
)

// Metric names of each kind of sampled object, in the order their values
// are stored. Names are RabbitMQ's JSON keys.
var (
	queueMetrics    = []string{"messages", "messages_ready", "messages_unacknowledged", "publish", "deliver_get", "ack", "redeliver"}
	exchangeMetrics = []string{"publish_in", "publish_out"}
	connMetrics     = []string{"recv_oct", "send_oct"}
	channelMetrics  = []string{"publish", "confirm", "return_unroutable", "drop_unroutable", "deliver", "deliver_no_ack",
		"get", "get_no_ack", "get_empty", "redeliver", "ack", "deliver_get"}
	// vhostMetrics (and the overview's) are the channel counters, the queue
	// totals and the traffic of the vhost's connections.
	vhostMetrics = append(append([]string{"messages", "messages_ready", "messages_unacknowledged"}, channelMetrics...), "recv_oct", "send_oct")
	// churnMetrics are the overview's churn_rates keys (RabbitMQ 3.10's).
	churnMetrics = []string{"connection_created", "connection_closed", "channel_created", "channel_closed",
		"queue_declared", "queue_created", "queue_deleted"}
)

// churnValues orders the node's lifecycle counters as churnMetrics.
func churnValues(accepted uint64, c server.ChurnCounters) []uint64 {
	return []uint64{accepted, c.ConnectionsClosed, c.ChannelsOpened, c.ChannelsClosed,
		c.QueuesDeclared, c.QueuesCreated, c.QueuesDeleted}
}

// series is a fixed-size ring of samples of one object: each sample is a
// timestamp and one value per metric.
type series struct {
	width int
	times []int64  // unix ms, ring
	vals  []uint64 // ring of width values per sample
	n     int      // samples stored
	head  int      // next slot to write
	seen  uint64   // tick that last updated it, for pruning
}

func newSeries(width, capacity int) *series {
	return &series{width: width, times: make([]int64, capacity), vals: make([]uint64, width*capacity)}
}

func (s *series) push(ts int64, v []uint64) {
	s.times[s.head] = ts
	copy(s.vals[s.head*s.width:], v)
	s.head = (s.head + 1) % len(s.times)
	if s.n < len(s.times) {
		s.n++
	}
}

// at returns the i-th newest sample (0 = newest).
func (s *series) at(i int) (int64, []uint64) {
	slot := (s.head - 1 - i + 2*len(s.times)) % len(s.times)
	return s.times[slot], s.vals[slot*s.width : (slot+1)*s.width]
}

// sampler turns the server's counters into rates. One goroutine (run) calls
// sample every interval; handlers read under mu.
type sampler struct {
	srv      *server.Server
	interval time.Duration
	history  int // samples of the overview and vhosts
	objHist  int // samples of queues, exchanges, connections, channels

	mu        sync.RWMutex
	tick      uint64
	overview  *series
	churn     *series
	vhosts    map[string]*series
	queues    map[*server.Queue]*series
	exchanges map[*server.Exchange]*series
	conns     map[uint64]*series
	channels  map[chanKey]*series
}

type chanKey struct {
	conn   uint64
	number uint16
}

func newSampler(srv *server.Server, interval time.Duration, history, objHist int) *sampler {
	return &sampler{
		srv: srv, interval: interval, history: history, objHist: objHist,
		overview: newSeries(len(vhostMetrics), history),
		churn:    newSeries(len(churnMetrics), history),
		vhosts:   make(map[string]*series), queues: make(map[*server.Queue]*series),
		exchanges: make(map[*server.Exchange]*series), conns: make(map[uint64]*series),
		channels: make(map[chanKey]*series),
	}
}

// run samples every interval until quit closes.
func (s *sampler) run(quit <-chan struct{}) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case now := <-t.C:
			s.sample(now)
		}
	}
}

// objectSample is one object's values gathered without the sampler's lock.
type objectSample[K comparable] struct {
	key  K
	vals []uint64
}

// sample reads every counter once. The server is read first, with no
// sampler lock held; the rings are then updated under mu in one short step.
func (s *sampler) sample(now time.Time) {
	ts := now.UnixMilli()
	counters := s.srv.VhostCounters()
	vhostVals := make(map[string][]uint64)
	var queues []objectSample[*server.Queue]
	var exchanges []objectSample[*server.Exchange]
	for _, vh := range s.srv.Vhosts() {
		v := make([]uint64, len(vhostMetrics))
		copy(v[3:], channelValues(counters[vh.Name()]))
		for _, q := range vh.Queues() {
			qv := queueValues(q.Info())
			queues = append(queues, objectSample[*server.Queue]{q, qv})
			v[0] += qv[0]
			v[1] += qv[1]
			v[2] += qv[2]
		}
		for _, ex := range vh.Exchanges() {
			info := ex.Info()
			exchanges = append(exchanges, objectSample[*server.Exchange]{ex, []uint64{info.PublishIn, info.PublishOut}})
		}
		vhostVals[vh.Name()] = v
	}
	var conns []objectSample[uint64]
	for _, c := range s.srv.ConnectionDetails() {
		conns = append(conns, objectSample[uint64]{c.ID, []uint64{c.RecvOct, c.SendOct}})
		if v := vhostVals[c.Vhost]; v != nil {
			v[len(v)-2] += c.RecvOct
			v[len(v)-1] += c.SendOct
		}
	}
	var chans []objectSample[chanKey]
	for _, ch := range s.srv.Channels() {
		chans = append(chans, objectSample[chanKey]{chanKey{ch.ConnID, ch.Number}, channelValues(ch.Stats)})
	}
	overview := make([]uint64, len(vhostMetrics))
	for _, v := range vhostVals {
		for i := range v {
			overview[i] += v[i]
		}
	}
	// Counters of deleted vhosts are gone; the overview keeps the sum of
	// the vhosts that exist, as RabbitMQ's does after a vhost is deleted.
	churn := churnValues(s.srv.Churn())

	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick++
	s.overview.push(ts, overview)
	s.churn.push(ts, churn)
	for name, v := range vhostVals {
		pushTo(s.vhosts, name, v, ts, s.tick, s.history)
	}
	for _, o := range queues {
		pushTo(s.queues, o.key, o.vals, ts, s.tick, s.objHist)
	}
	for _, o := range exchanges {
		pushTo(s.exchanges, o.key, o.vals, ts, s.tick, s.objHist)
	}
	for _, o := range conns {
		pushTo(s.conns, o.key, o.vals, ts, s.tick, s.objHist)
	}
	for _, o := range chans {
		pushTo(s.channels, o.key, o.vals, ts, s.tick, s.objHist)
	}
	prune(s.vhosts, s.tick)
	prune(s.queues, s.tick)
	prune(s.exchanges, s.tick)
	prune(s.conns, s.tick)
	prune(s.channels, s.tick)
}

func pushTo[K comparable](m map[K]*series, k K, v []uint64, ts int64, tick uint64, capacity int) {
	sr := m[k]
	if sr == nil {
		sr = newSeries(len(v), capacity)
		m[k] = sr
	}
	sr.push(ts, v)
	sr.seen = tick
}

// prune drops the series of objects that no longer exist.
func prune[K comparable](m map[K]*series, tick uint64) {
	for k, sr := range m {
		if sr.seen != tick {
			delete(m, k)
		}
	}
}

func queueValues(i server.QueueInfo) []uint64 {
	return []uint64{
		uint64(i.Ready + i.Unacked), uint64(i.Ready), uint64(i.Unacked),
		i.Published, i.Delivered + i.Got, i.Acked, i.Redelivered,
	}
}

func channelValues(m server.MessageCounters) []uint64 {
	return []uint64{
		m.Publish, m.Confirm, m.ReturnUnroutable, m.DropUnroutable, m.Deliver, m.DeliverNoAck,
		m.Get, m.GetNoAck, m.GetEmpty, m.Redeliver, m.Ack, m.Deliver + m.DeliverNoAck + m.Get + m.GetNoAck,
	}
}

// sampleQuery asks for sample histories: the *_age and *_incr parameters,
// in seconds, per group of metrics. A zero age means rates only.
type sampleQuery struct {
	lengthsAge, lengthsIncr int64
	msgAge, msgIncr         int64
	dataAge, dataIncr       int64
}

func parseSampleQuery(rq *request) sampleQuery {
	get := func(k string) int64 {
		n, err := strconv.ParseInt(rq.query.Get(k), 10, 64)
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	return sampleQuery{
		lengthsAge: get("lengths_age"), lengthsIncr: get("lengths_incr"),
		msgAge: get("msg_rates_age"), msgIncr: get("msg_rates_incr"),
		dataAge: get("data_rates_age"), dataIncr: get("data_rates_incr"),
	}
}

// window returns the age and increment asked for a metric's group.
func (q sampleQuery) window(metric string) (age, incr int64) {
	switch metric {
	case "messages", "messages_ready", "messages_unacknowledged":
		return q.lengthsAge, q.lengthsIncr
	case "recv_oct", "send_oct":
		return q.dataAge, q.dataIncr
	}
	return q.msgAge, q.msgIncr
}

// details computes the x_details object of every metric of one series:
// {"rate": r} and, when asked, avg, avg_rate and samples (newest first).
// A missing or single-sample series has rate 0.
func (s *sampler) details(sr *series, metrics []string, q sampleQuery) map[string]map[string]any {
	out := make(map[string]map[string]any, len(metrics))
	for i, m := range metrics {
		d := map[string]any{"rate": 0.0}
		if sr != nil && sr.n >= 2 {
			t0, v0 := sr.at(0)
			t1, v1 := sr.at(1)
			if dt := float64(t0-t1) / 1000; dt > 0 {
				d["rate"] = (float64(v0[i]) - float64(v1[i])) / dt
			}
		}
		if age, incr := q.window(m); age > 0 && sr != nil {
			addSamples(d, sr, i, age, incr)
		}
		out[m] = d
	}
	return out
}

func addSamples(d map[string]any, sr *series, i int, age, incr int64) {
	newest, _ := sr.at(0)
	var samples []map[string]any
	var sum float64
	var lastTS int64
	var oldestTS int64
	var oldestV, newestV uint64
	for k := 0; k < sr.n; k++ {
		ts, v := sr.at(k)
		if ts < newest-age*1000 {
			break
		}
		if len(samples) > 0 && incr > 0 && lastTS-ts < incr*1000 {
			continue
		}
		if len(samples) == 0 {
			newestV = v[i]
		}
		samples = append(samples, map[string]any{"sample": v[i], "timestamp": ts})
		sum += float64(v[i])
		lastTS, oldestTS, oldestV = ts, ts, v[i]
	}
	if samples == nil {
		samples = []map[string]any{}
	}
	d["samples"] = samples
	if len(samples) > 0 {
		d["avg"] = sum / float64(len(samples))
	}
	avgRate := 0.0
	if span := float64(newest-oldestTS) / 1000; span > 0 {
		avgRate = (float64(newestV) - float64(oldestV)) / span
	}
	d["avg_rate"] = avgRate
}

// The lookups below copy what a handler needs under the read lock.

func (s *sampler) overviewDetails(q sampleQuery) map[string]map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.details(s.overview, vhostMetrics, q)
}

func (s *sampler) churnDetails(q sampleQuery) map[string]map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.details(s.churn, churnMetrics, q)
}

func (s *sampler) vhostDetails(name string, q sampleQuery) map[string]map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.details(s.vhosts[name], vhostMetrics, q)
}

func (s *sampler) queueDetails(qu *server.Queue, q sampleQuery) map[string]map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.details(s.queues[qu], queueMetrics, q)
}

func (s *sampler) exchangeDetails(ex *server.Exchange, q sampleQuery) map[string]map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.details(s.exchanges[ex], exchangeMetrics, q)
}

func (s *sampler) connDetails(id uint64, q sampleQuery) map[string]map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.details(s.conns[id], connMetrics, q)
}

func (s *sampler) channelDetails(k chanKey, q sampleQuery) map[string]map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.details(s.channels[k], channelMetrics, q)
}

// putStat sets m[key] = value and m[key_details] from details.
func putStat(m map[string]any, key string, value any, details map[string]map[string]any) {
	m[key] = value
	if d, ok := details[key]; ok {
		m[key+"_details"] = d
	}
}

// messageStats builds a message_stats object from values named by metrics.
// Groups of keys appear only once one of them has seen activity, as in
// RabbitMQ ("only fields for which some activity has taken place").
func messageStats(metrics []string, vals []uint64, details map[string]map[string]any, groups [][]string) map[string]any {
	byName := make(map[string]uint64, len(metrics))
	for i, m := range metrics {
		byName[m] = vals[i]
	}
	out := map[string]any{}
	for _, g := range groups {
		active := false
		for _, k := range g {
			if byName[k] > 0 {
				active = true
			}
		}
		if !active {
			continue
		}
		for _, k := range g {
			putStat(out, k, byName[k], details)
		}
	}
	return out
}

// Groups of message_stats keys.
var (
	publishGroup  = []string{"publish", "confirm", "return_unroutable", "drop_unroutable"}
	deliverGroup  = []string{"deliver", "deliver_no_ack", "get", "get_no_ack", "get_empty", "redeliver", "ack", "deliver_get"}
	queuePubGroup = []string{"publish"}
	queueDelGroup = []string{"deliver_get", "ack", "redeliver"}
	exchangeGroup = []string{"publish_in", "publish_out"}
)
