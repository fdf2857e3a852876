package msgstore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testConfig returns DefaultConfig for dir with a quiet logger and small
// segments so tests roll over quickly.
func testConfig(dir string) Config {
	cfg := DefaultConfig(dir)
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.SegmentSize = 64 << 10
	cfg.IndexInterval = 512
	return cfg
}

// mkRecord returns a deterministic record whose content depends on i.
func mkRecord(i, bodySize int) Record {
	body := make([]byte, bodySize)
	for j := range body {
		body[j] = byte(i*31 + j)
	}
	return Record{
		Timestamp:  int64(1_700_000_000_000_000_000 + i),
		Flags:      uint8(i),
		Exchange:   []byte(fmt.Sprintf("ex-%d", i%7)),
		RoutingKey: []byte(fmt.Sprintf("rk.%d", i)),
		Properties: []byte{byte(i), 0x80, 0x00},
		Body:       body,
	}
}

func sameRecord(a, b Record) bool {
	return a.Timestamp == b.Timestamp && a.Flags == b.Flags &&
		bytes.Equal(a.Exchange, b.Exchange) && bytes.Equal(a.RoutingKey, b.RoutingKey) &&
		bytes.Equal(a.Properties, b.Properties) && bytes.Equal(a.Body, b.Body)
}

func mustOpenLog(t testing.TB, cfg Config) *Log {
	t.Helper()
	l, err := OpenLog(cfg)
	if err != nil {
		t.Fatalf("OpenLog: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func mustOpenStore(t testing.TB, cfg Config) *Store {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustAppend(t testing.TB, l *Log, r Record) Loc {
	t.Helper()
	loc, err := l.Append(r)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return loc
}

// checkRead reads loc and compares the record with want.
func checkRead(t testing.TB, read func(Loc) (Record, error), loc Loc, want Record) {
	t.Helper()
	got, err := read(loc)
	if err != nil {
		t.Fatalf("read %+v: %v", loc, err)
	}
	if got.Offset != loc.Offset || !sameRecord(got, want) {
		t.Fatalf("read %+v: got offset %d %+v, want %+v", loc, got.Offset, got, want)
	}
}

// copyDir copies the files of src into a new directory, skipping LOCK. It
// captures what a process crash leaves: everything written to the OS.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	return copyDirWith(t, src, func(name string, data []byte) []byte { return data })
}

// copyDirWith copies src through edit, which may change or drop (nil) a file's content.
func copyDirWith(t testing.TB, src string, edit func(name string, data []byte) []byte) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == "LOCK" || e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // removed while copying
		}
		if err != nil {
			t.Fatal(err)
		}
		if data = edit(e.Name(), data); data == nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// listFiles returns the names in dir with the given suffix.
func listFiles(t testing.TB, dir, suffix string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), suffix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// waitFor polls cond until it returns nil or the deadline passes.
func waitFor(t testing.TB, d time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %v: %v", d, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// readAll iterates the whole log.
func readAll(t testing.TB, l *Log, from uint64) ([]Record, []Loc) {
	t.Helper()
	it := l.Iterate(from)
	var recs []Record
	var locs []Loc
	for it.Next() {
		r := it.Record()
		r.Body = bytes.Clone(r.Body)
		r.Exchange, r.RoutingKey, r.Properties = bytes.Clone(r.Exchange), bytes.Clone(r.RoutingKey), bytes.Clone(r.Properties)
		recs = append(recs, r)
		locs = append(locs, it.Loc())
	}
	if err := it.Err(); err != nil {
		t.Fatalf("iterate: %v", err)
	}
	return recs, locs
}
