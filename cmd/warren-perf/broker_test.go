package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func TestTimestampRoundTrip(t *testing.T) {
	const ts = int64(1_700_000_000_123_456_789)
	for _, size := range []int{0, 1, 7, 8, 9, 1024} {
		msg := amqp.Publishing{Body: make([]byte, size)}
		stampTimestamp(&msg, ts)
		got, ok := decodeTimestamp(msg.Body, msg.Headers)
		if !ok || got != ts {
			t.Errorf("size %d: decoded %d, %t; want %d", size, got, ok, ts)
		}
		if size >= 8 && msg.Headers != nil {
			t.Errorf("size %d: header set although the body holds the time", size)
		}
	}
}

func TestDecodeTimestampRejectsForeignMessages(t *testing.T) {
	if _, ok := decodeTimestamp([]byte("short"), nil); ok {
		t.Error("short body without header decoded")
	}
	if _, ok := decodeTimestamp(nil, amqp.Table{tsHeader: "soon"}); ok {
		t.Error("string header decoded")
	}
	if _, ok := decodeTimestamp(make([]byte, 8), nil); ok {
		t.Error("zero timestamp decoded")
	}
	if got, ok := decodeTimestamp(nil, amqp.Table{tsHeader: int32(5)}); !ok || got != 5 {
		t.Errorf("int32 header: %d %t", got, ok)
	}
}

// FuzzDecodeTimestamp feeds arbitrary bodies and header values to the
// decoder: it must not panic, and a positive time it accepts from a body
// must be the body's first 8 bytes.
func FuzzDecodeTimestamp(f *testing.F) {
	f.Add([]byte{}, int64(0), uint8(0))
	f.Add(binary.BigEndian.AppendUint64(nil, 1_700_000_000_000_000_000), int64(0), uint8(0))
	f.Add([]byte{1, 2, 3}, int64(42), uint8(1))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, int64(-1), uint8(2))
	f.Fuzz(func(t *testing.T, body []byte, hv int64, kind uint8) {
		headers := amqp.Table{}
		switch kind % 4 {
		case 0:
			headers[tsHeader] = hv
		case 1:
			headers[tsHeader] = int32(hv)
		case 2:
			headers[tsHeader] = string(body)
		}
		ts, ok := decodeTimestamp(body, headers)
		if ok && ts <= 0 {
			t.Fatalf("accepted non-positive time %d", ts)
		}
		if ok && len(body) >= 8 && ts != int64(binary.BigEndian.Uint64(body)) {
			t.Fatalf("time %d is not the body's first 8 bytes", ts)
		}
	})
}

// closingListener accepts TCP connections on 127.0.0.1 and closes them at
// once, like a broker that refuses clients before the handshake.
func closingListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // listener closed by cleanup
			}
			if err := c.Close(); err != nil {
				t.Errorf("close accepted conn: %v", err)
			}
		}
	}()
	t.Cleanup(func() {
		if err := ln.Close(); err != nil {
			t.Errorf("close listener: %v", err)
		}
		wg.Wait()
	})
	return ln.Addr().String()
}

// closedPort returns a 127.0.0.1 address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func TestRunFailsClearlyWhenBrokerRefuses(t *testing.T) {
	for name, addr := range map[string]string{
		"connection refused": closedPort(t),
		"handshake refused":  closingListener(t),
	} {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.URL = "amqp://guest:secret@" + addr + "/"
			cfg.Duration = time.Second
			sum, err := run(context.Background(), cfg)
			if !errors.Is(err, ErrConnect) {
				t.Fatalf("err = %v, want ErrConnect", err)
			}
			if sum.ran() {
				t.Fatalf("summary of a run that never started: %+v", sum)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("error leaks the password: %v", err)
			}

			var stdout, stderr bytes.Buffer
			code := realMain([]string{"--url", cfg.URL, "--duration", "1s"}, &stdout, &stderr)
			if code != exitFail {
				t.Fatalf("exit %d, want %d", code, exitFail)
			}
			if !strings.Contains(stderr.String(), "cannot connect to broker") || stdout.Len() != 0 {
				t.Fatalf("stdout %q, stderr %q", stdout.String(), stderr.String())
			}
		})
	}
}

func TestMainUsageErrors(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := realMain([]string{"-h"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("-h: exit %d", code)
	}
	if !strings.Contains(stderr.String(), "--publishers") {
		t.Fatalf("-h printed %q", stderr.String())
	}
	stderr.Reset()
	if code := realMain([]string{"--size", "-3"}, &stdout, &stderr); code != exitUsage {
		t.Fatalf("--size -3: exit %d, want %d", code, exitUsage)
	}
	if !strings.Contains(stderr.String(), "--size") {
		t.Fatalf("--size -3 printed %q", stderr.String())
	}
	if code := realMain([]string{"--bogus"}, &stdout, &stderr); code != exitUsage {
		t.Fatalf("--bogus: exit %d, want %d", code, exitUsage)
	}
}

// BenchmarkConsumerObserve is the consumer's per-delivery cost: decode the
// publish time, record the latency under the consumer's lock, count.
func BenchmarkConsumerObserve(b *testing.B) {
	c := &consumer{interval: newHistogram(), spare: newHistogram()}
	msg := amqp.Publishing{Body: make([]byte, 1024)}
	stampTimestamp(&msg, time.Now().UnixNano())
	b.ReportAllocs()
	for b.Loop() {
		c.observe(msg.Body, nil)
	}
}

// BenchmarkStampTimestamp is the publisher's per-message cost of carrying
// the publish time in the body.
func BenchmarkStampTimestamp(b *testing.B) {
	msg := amqp.Publishing{Body: make([]byte, 16)}
	b.ReportAllocs()
	for b.Loop() {
		stampTimestamp(&msg, time.Now().UnixNano())
	}
}
