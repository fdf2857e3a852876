package server

import (
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp"
)

func TestParseStreamInterval(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"30m": 30 * time.Minute, "1h": time.Hour, "7D": 7 * 24 * time.Hour, "2s": 2 * time.Second,
		"1M": 30 * 24 * time.Hour, "1Y": 365 * 24 * time.Hour,
	} {
		got, err := parseStreamInterval(in)
		if err != nil || got != want {
			t.Errorf("parseStreamInterval(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	// RabbitMQ takes any length; Warren caps it at 146 years.
	for _, in := range []string{"99999999999Y", "184467440737095516150000s"} {
		if got, err := parseStreamInterval(in); err != nil || got != maxStreamInterval {
			t.Errorf("parseStreamInterval(%q) = %v, %v; want the cap", in, got, err)
		}
	}
	for _, in := range []string{"", "m", "10", "10x", "-1h", "1.5h", "+1h"} {
		if _, err := parseStreamInterval(in); err == nil {
			t.Errorf("parseStreamInterval(%q) accepted", in)
		}
	}
}

func TestParseStreamOffset(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	at := time.Unix(1_700_000_000, 0)
	cases := []struct {
		in   any
		want streamStart
	}{
		{nil, streamStart{kind: streamStartNext}},
		{"first", streamStart{kind: streamStartFirst}},
		{"last", streamStart{kind: streamStartLast}},
		{"next", streamStart{kind: streamStartNext}},
		{int64(42), streamStart{kind: streamStartOffset, offset: 42}},
		{int16(7), streamStart{kind: streamStartOffset, offset: 7}},
		{at, streamStart{kind: streamStartTime, at: at}},
		{"30m", streamStart{kind: streamStartTime, at: now.Add(-30 * time.Minute)}},
		// As RabbitMQ: a negative offset starts at the first record, and
		// first, last and next may come as binaries.
		{int64(-1), streamStart{kind: streamStartOffset, offset: 0}},
		{int8(-5), streamStart{kind: streamStartOffset, offset: 0}},
		{[]byte("first"), streamStart{kind: streamStartFirst}},
		{[]byte("last"), streamStart{kind: streamStartLast}},
	}
	for _, c := range cases {
		got, err := parseStreamOffset(c.in, now)
		if err != nil || got.kind != c.want.kind || got.offset != c.want.offset || !got.at.Equal(c.want.at) {
			t.Errorf("parseStreamOffset(%v) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, in := range []any{"yesterday", 1.5, true, []byte("30m")} {
		if _, err := parseStreamOffset(in, now); err == nil {
			t.Errorf("parseStreamOffset(%v) accepted", in)
		}
	}
}

func FuzzParseStreamOffset(f *testing.F) {
	for _, s := range []string{"first", "last", "next", "30m", "7D", "1Y", "", "0s", "18446744073709551615h"} {
		f.Add(s)
	}
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, s string) {
		st, err := parseStreamOffset(s, now)
		if err != nil {
			return
		}
		if st.kind == streamStartTime && st.at.After(now) {
			t.Fatalf("interval %q starts in the future: %v", s, st.at)
		}
		d, derr := parseStreamInterval(s)
		if st.kind == streamStartTime && (derr != nil || d < 0) {
			t.Fatalf("interval %q accepted by the offset parser but not the interval parser: %v", s, derr)
		}
	})
}

// Stream retention from a policy replaces the declared argument (RabbitMQ's
// policy_precedence for streams); other policy keys leave streams alone.
func TestEffectiveStreamArgs(t *testing.T) {
	declared, aerr := parseStreamArgs("s", "/", amqp.Table{
		"x-queue-type": "stream", "x-max-length-bytes": int64(1 << 20), "x-max-age": "1h", "x-stream-flush": "os",
	})
	if aerr != nil {
		t.Fatal(aerr)
	}
	got, err := effectiveStreamArgs("s", "/", declared, map[string]any{
		"max-length-bytes": int64(4096), "stream-max-segment-size-bytes": int64(2048),
		"message-ttl": int64(5), "max-length": int64(3), "expires": int64(100000),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.maxBytes != 4096 || got.segmentSize != 2048 || got.maxAge != time.Hour || !got.hasFlush {
		t.Fatalf("effective: %+v", got)
	}
	// A larger policy value wins too: it is precedence, not the minimum.
	got, _ = effectiveStreamArgs("s", "/", declared, map[string]any{"max-length-bytes": int64(1 << 30), "max-age": "2D"})
	if got.maxBytes != 1<<30 || got.maxAge != 48*time.Hour {
		t.Fatalf("larger policy values: %+v", got)
	}
	// No stream keys: the declared arguments.
	if got, _ := effectiveStreamArgs("s", "/", declared, map[string]any{"ha-mode": "all"}); got != declared {
		t.Fatalf("unrelated policy changed the stream: %+v", got)
	}
	if _, err := effectiveStreamArgs("s", "/", declared, map[string]any{"max-age": "soon"}); err == nil {
		t.Fatal("bad max-age accepted")
	}
}
