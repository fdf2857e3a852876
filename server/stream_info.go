package server

import (
	"sort"
	"time"

	"github.com/warrenmq/warren/msgstore"
)

// StreamInfo describes a stream queue's log and its consumers, for the
// management API (RabbitMQ and LavinMQ show the same figures).
type StreamInfo struct {
	// FirstOffset is the offset of the oldest record retention kept.
	FirstOffset uint64
	// LastOffset is the newest committed offset: durable as the stream's flush
	// policy defines it, so a confirm for it was or can be sent. It is a log
	// offset, which may be a tracking snapshot's rather than a message's. It
	// is meaningful only when Committed is set.
	LastOffset uint64
	// Committed reports whether any record is committed yet.
	Committed bool
	// NextOffset is the offset the next publish gets.
	NextOffset uint64
	// Segments is the number of segment files.
	Segments int
	// Bytes is the total size of the segment files.
	Bytes int64
	// MaxLengthBytes is the effective max-length-bytes retention (argument
	// or policy; the policy wins); 0 is unlimited.
	MaxLengthBytes int64
	// MaxAge is the effective max-age retention; 0 is unlimited.
	MaxAge time.Duration
	// SegmentSize is the effective stream-max-segment-size-bytes: the size
	// at which the next segment starts.
	SegmentSize int64
	// TrackingNames is the number of x-stream-offset-tracking-name values
	// whose offsets the stream keeps.
	TrackingNames int
	// Consumers lists the stream's consumers, sorted by tag.
	Consumers []StreamConsumerInfo
}

// StreamConsumerInfo is one stream consumer's position.
type StreamConsumerInfo struct {
	// Tag is the consumer tag.
	Tag string
	// Channel is the consumer's channel number on its connection.
	Channel uint16
	// ConnName names the consumer's connection.
	ConnName string
	// Offset is the next offset the consumer will be delivered.
	Offset uint64
	// InFlight counts deliveries not yet acknowledged.
	InFlight int
	// TrackingName is the x-stream-offset-tracking-name, or "".
	TrackingName string
}

// StreamInfo reports q's stream figures; ok is false when q is not a stream
// queue (or its stream is closed). It reads counters only, no segment data.
func (q *Queue) StreamInfo() (info StreamInfo, ok bool) {
	s := q.vhost.streams.get(q)
	if s == nil {
		return StreamInfo{}, false
	}
	st := s.log.Stats()
	r := s.ret.Load()
	info = StreamInfo{FirstOffset: st.FirstOffset, NextOffset: st.NextOffset, Segments: st.Segments, Bytes: st.Bytes,
		MaxLengthBytes: r.maxBytes, MaxAge: r.maxAge, SegmentSize: r.segmentSize}
	s.tmu.Lock()
	info.TrackingNames = len(s.tracking)
	s.tmu.Unlock()
	committed := st.NextOffset // FlushOS, FlushInterval, FlushMessages: written is committed
	if st.FlushPolicy == msgstore.FlushFsync {
		committed = st.SyncedOffset
	}
	if committed > st.FirstOffset {
		info.LastOffset, info.Committed = committed-1, true
	}
	s.mu.Lock()
	for c, sc := range s.consumers {
		o := c.sink.owner()
		info.Consumers = append(info.Consumers, StreamConsumerInfo{
			Tag: c.tag, Channel: o.Channel, ConnName: o.ConnName, Offset: sc.offset.Load(),
			InFlight: int(sc.inflight.Load()), TrackingName: sc.track,
		})
	}
	s.mu.Unlock()
	sort.Slice(info.Consumers, func(i, j int) bool { return info.Consumers[i].Tag < info.Consumers[j].Tag })
	return info, true
}
