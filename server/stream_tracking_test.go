package server

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/msgstore"
)

func TestStreamTrackingEncoding(t *testing.T) {
	long := strings.Repeat("n", maxTrackingNameLen)
	for _, c := range []struct {
		m     map[string]uint64
		last  uint64
		exact bool
	}{
		{map[string]uint64{}, 0, true},
		{map[string]uint64{"a": 0, "b": 1 << 40, long: 7}, 12, false},
	} {
		snap, err := decodeTracking(encodeTracking(c.m, c.last, c.exact))
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(snap.offsets, c.m) || snap.lastMsg != c.last || snap.exact != c.exact {
			t.Fatalf("round trip of %v: %+v", c.m, snap)
		}
	}
	good := encodeTracking(map[string]uint64{"a": 1, "b": 2}, 3, true)
	for name, b := range map[string][]byte{
		"short":     good[:5],
		"version":   append([]byte{9}, good[1:]...),
		"flags":     append([]byte{good[0], 0x80}, good[2:]...),
		"truncated": good[:len(good)-1],
		"trailing":  append(append([]byte(nil), good...), 0),
		"unsorted":  encodeUnsorted(),
		"too many":  append(append([]byte(nil), good[:10]...), 0xff, 0xff),
	} {
		if _, err := decodeTracking(b); !errors.Is(err, ErrStreamCorrupt) {
			t.Errorf("%s: %v, want ErrStreamCorrupt", name, err)
		}
	}
}

// encodeUnsorted is a snapshot whose names are out of order (a decoder must
// refuse it: a repeated name would be ambiguous).
func encodeUnsorted() []byte {
	b := encodeTracking(map[string]uint64{"a": 1, "b": 2}, 0, false)
	i := trackingHeaderSize
	b[i+1], b[i+1+1+8+1] = 'b', 'a'
	return b
}

func FuzzStreamTracking(f *testing.F) {
	f.Add(encodeTracking(map[string]uint64{}, 0, true))
	f.Add(encodeTracking(map[string]uint64{"app": 42, "other": 7}, 99, false))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		snap, err := decodeTracking(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to the same bytes.
		if again := encodeTracking(snap.offsets, snap.lastMsg, snap.exact); string(again) != string(b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", b, again)
		}
	})
}

// trackingRecord is a tracking snapshot found in a stream's log.
type trackingRecord struct {
	offset uint64
	snap   trackingSnapshot
}

// trackingRecords lists the tracking snapshots in s's log.
func trackingRecords(t testing.TB, s *stream) []trackingRecord {
	t.Helper()
	var out []trackingRecord
	it := s.log.Iterate(0)
	for it.Next() {
		if it.Record().Flags&streamFlagTracking == 0 {
			continue
		}
		snap, err := decodeTracking(it.Record().Body)
		if err != nil {
			t.Fatalf("snapshot at %d: %v", it.Loc().Offset, err)
		}
		out = append(out, trackingRecord{it.Loc().Offset, snap})
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func streamOf(ts *testServer, name string) *stream {
	vh := ts.Vhost("/")
	return vh.streams.get(vh.queue(name))
}

// Acks of a tracking consumer reach the log as a snapshot without a cancel
// (the maintenance goroutine), snapshots are never delivered, and "last"
// is the newest message even when the log ends with a snapshot.
func TestStreamTrackingSnapshotsInLogNotDelivered(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", nil)
	confirmPublishAll(t, conn, "s", numbered(0, 10)...)
	s := streamOf(ts, "s")
	tch, d := consumeStreamAt(t, conn, "s", amqp091.Table{"x-stream-offset": "first", "x-stream-offset-tracking-name": "app"})
	for i := range 5 {
		recvOffset(t, d, "m"+strconv.Itoa(i), int64(i))
	}
	var snaps []trackingRecord
	waitFor(t, 5*time.Second, "a tracking snapshot with app at 4", func() bool {
		snaps = trackingRecords(t, s)
		return len(snaps) > 0 && snaps[len(snaps)-1].snap.offsets["app"] == 4
	})
	must(t, tch.Close())
	confirmPublishAll(t, conn, "s", numbered(10, 12)...)
	// The snapshot at the log's end (a cancel writes none: nothing changed).
	must(t, s.writeSnapshot(true))
	snaps = trackingRecords(t, s)
	isSnap := map[int64]bool{}
	for _, r := range snaps {
		isSnap[int64(r.offset)] = true
	}

	rch, rd := consumeStreamAt(t, conn, "s", amqp091.Table{"x-stream-offset": "first"})
	defer rch.Close()
	last := int64(-1)
	for i := range 12 {
		off := recvBody(t, rd, "m"+strconv.Itoa(i))
		if off <= last || isSnap[off] {
			t.Fatalf("m%d at offset %d (previous %d, snapshots at %v)", i, off, last, isSnap)
		}
		last = off
	}
	expectNone(t, rd, rch, ch)

	lch, ld := consumeStreamAt(t, conn, "s", amqp091.Table{"x-stream-offset": "last"})
	defer lch.Close()
	if off := recvBody(t, ld, "m11"); off != last {
		t.Fatalf(`"last" delivered m11 at %d, want %d`, off, last)
	}
	// A numeric offset naming a snapshot starts at the next message.
	nch, nd := consumeStreamAt(t, conn, "s", amqp091.Table{"x-stream-offset": int64(snaps[0].offset)})
	defer nch.Close()
	if m := recv(t, nd); m.Headers["x-stream-offset"].(int64) <= int64(snaps[0].offset) {
		t.Fatalf("consumer at snapshot offset %d got offset %v", snaps[0].offset, m.Headers["x-stream-offset"])
	}
}

// A cancel writes the tracking consumer's offset before cancel-ok.
func TestStreamTrackingCancelWritesSnapshot(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", nil)
	confirmPublishAll(t, conn, "s", numbered(0, 5)...)
	s := streamOf(ts, "s")
	cch, err := conn.Channel()
	must(t, err)
	must(t, cch.Qos(10, 0, false))
	d, err := cch.Consume("s", "c1", false, false, false, false, amqp091.Table{"x-stream-offset": "first", "x-stream-offset-tracking-name": "app"})
	must(t, err)
	for i := range 3 {
		recvOffset(t, d, "m"+strconv.Itoa(i), int64(i))
	}
	must(t, cch.Cancel("c1", false)) // waits for cancel-ok
	snaps := trackingRecords(t, s)
	if len(snaps) == 0 || snaps[len(snaps)-1].snap.offsets["app"] != 2 {
		t.Fatalf("after cancel-ok the log's snapshots are %+v, want app at 2", snaps)
	}
}

// Past maxStreamTrackingNames a consume with a new name gets 406; known
// names still work.
func TestStreamTrackingNameLimit(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", nil)
	s := streamOf(ts, "s")
	for i := range maxStreamTrackingNames {
		must(t, s.reserveTracking(fmt.Sprintf("n%d", i)))
	}
	c1, err := conn.Channel()
	must(t, err)
	must(t, c1.Qos(5, 0, false))
	_, err = c1.Consume("s", "", false, false, false, false, amqp091.Table{"x-stream-offset-tracking-name": "one-too-many"})
	expectCode(t, err, 406)
	if !strings.Contains(err.Error(), "1024") {
		t.Fatalf("refusal does not say the limit: %v", err)
	}
	c2, d := consumeStreamAt(t, conn, "s", amqp091.Table{"x-stream-offset-tracking-name": "n7"})
	defer c2.Close()
	_ = d
	c3, err := conn.Channel()
	must(t, err)
	must(t, c3.Qos(5, 0, false))
	_, err = c3.Consume("s", "", false, false, false, false, amqp091.Table{"x-stream-offset-tracking-name": strings.Repeat("x", 256)})
	expectCode(t, err, 406)
}

// Retention removes the segment that held the cancel's snapshot, yet every
// later segment starts with a snapshot, and the open path (findSnapshot)
// still finds app's offset in the newest segment.
func TestStreamTrackingSurvivesRetention(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", amqp091.Table{"x-stream-max-segment-size-bytes": int64(1024), "x-max-length-bytes": int64(4096)})
	confirmPublishAll(t, conn, "s", numbered(0, 5)...)
	s := streamOf(ts, "s")
	cch, d := consumeStreamAt(t, conn, "s", amqp091.Table{"x-stream-offset": "first", "x-stream-offset-tracking-name": "app"})
	for i := range 5 {
		recvOffset(t, d, "m"+strconv.Itoa(i), int64(i))
	}
	must(t, cch.Close()) // the cancel's snapshot
	snaps := trackingRecords(t, s)
	if len(snaps) == 0 {
		t.Fatal("no snapshot after the tracking consumer closed")
	}
	cancelSnap := snaps[len(snaps)-1].offset
	body := strings.Repeat("x", 150)
	bodies := make([]string, 100)
	for i := range bodies {
		bodies[i] = body
	}
	confirmPublishAll(t, conn, "s", bodies...)
	waitFor(t, 5*time.Second, "retention to remove the cancel's snapshot", func() bool {
		st := s.log.Stats()
		return st.FirstOffset > cancelSnap && st.Bytes <= 4096
	})
	infos, err := s.log.Segments()
	must(t, err)
	if len(infos) < 2 {
		t.Fatalf("%d segments", len(infos))
	}
	for _, si := range infos {
		if si.Size == 0 {
			continue
		}
		rec, err := s.log.ReadAt(msgstore.Loc{Offset: si.Base})
		if errors.Is(err, msgstore.ErrNotFound) {
			continue // removed by retention since Segments
		}
		must(t, err)
		snap, derr := decodeTracking(rec.Body)
		if rec.Flags&streamFlagTracking == 0 || derr != nil || snap.offsets["app"] != 4 {
			t.Fatalf("segment %d does not begin with app's snapshot: flags %d, %v, %+v", si.Base, rec.Flags, derr, snap)
		}
	}
	// What an open after a crash would find: the log ends with a message.
	snap, found, err := s.findSnapshot()
	must(t, err)
	if !found || snap.offsets["app"] != 4 {
		t.Fatalf("findSnapshot after retention: %v %+v", found, snap)
	}
	// And a tracking consumer resumes at the first retained message.
	rch, rd := consumeStreamAt(t, conn, "s", amqp091.Table{"x-stream-offset": "next", "x-stream-offset-tracking-name": "app"})
	defer rch.Close()
	m := recv(t, rd)
	if string(m.Body) != body || uint64(m.Headers["x-stream-offset"].(int64)) < s.log.Stats().FirstOffset {
		t.Fatalf("resumed with %q at %v", m.Body, m.Headers["x-stream-offset"])
	}
}

// A stream written by an earlier version keeps its offsets in offsets.json:
// the first open moves them into the log and removes the file.
func TestStreamTrackingMigratesOffsetsJSON(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", nil)
	confirmPublishAll(t, conn, "s", numbered(0, 10)...)
	sdir := streamOf(ts, "s").dir
	must(t, ts.Close())
	file := filepath.Join(sdir, legacyTrackingFile)
	must(t, os.WriteFile(file, []byte(`{"app":3,"other":8}`), 0o644))

	track := amqp091.Table{"x-stream-offset": "first", "x-stream-offset-tracking-name": "app"}
	for run := range 2 {
		ts := startServer(t, withDataDir(dir))
		if _, err := os.Stat(file); !os.IsNotExist(err) {
			t.Fatalf("run %d: offsets.json still there (%v)", run, err)
		}
		conn, _ := ts.channel(t)
		cch, d := consumeStreamAt(t, conn, "s", track)
		if m := recv(t, d); string(m.Body) != "m4" {
			t.Fatalf("run %d: resumed at %q, want m4", run, m.Body)
		}
		must(t, cch.Close())
		if off, ok := streamOf(ts, "s").tracked("other"); !ok || off != 8 {
			t.Fatalf("run %d: other tracked at %d %v", run, off, ok)
		}
		must(t, ts.Close())
	}
}

// The clean-shutdown snapshot is the log's last record and knows the newest
// message: after a restart "last" is right without reading a segment.
func TestStreamTrackingLastAfterRestart(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	conn, ch := ts.channel(t)
	declareStream(t, ch, "s", nil)
	pad := make([]string, 300)
	for i := range pad {
		pad[i] = strings.Repeat("p", 1000)
	}
	confirmPublishAll(t, conn, "s", pad...)
	confirmPublishAll(t, conn, "s", "newest")
	must(t, ts.Close())

	ts2 := startServer(t, withDataDir(dir))
	s := streamOf(ts2, "s")
	if st := s.log.Stats(); st.BytesRead > 16<<10 || st.Bytes < 300_000 {
		t.Fatalf("open read %d of %d bytes, want about one index interval", st.BytesRead, st.Bytes)
	}
	conn2, _ := ts2.channel(t)
	_, d := consumeStreamAt(t, conn2, "s", amqp091.Table{"x-stream-offset": "last"})
	recvOffset(t, d, "newest", 300)
}
