package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// definitionsJSON is what s exports.
func definitionsJSON(t *testing.T, s *Server) string {
	t.Helper()
	d, err := s.ExportDefinitions("")
	must(t, err)
	b, err := json.Marshal(d)
	must(t, err)
	return string(b)
}

// TestDamagedMetadataStopsStartup flips bytes of a meta.db, one at a time:
// every page header byte and every byte of every record. bbolt panics on
// some of these and loads others as different definitions. A broker must
// either refuse to start, naming the file, or start with the definitions it
// had (a flip in space bbolt does not use, or in the older of its two meta
// pages).
func TestDamagedMetadataStopsStartup(t *testing.T) {
	src := t.TempDir()
	ts := startServer(t, withDataDir(src))
	_, ch := ts.channel(t)
	must(t, ch.ExchangeDeclare("dx", "topic", true, false, false, false, amqp091.Table{"alternate-exchange": "ae"}))
	_, err := ch.QueueDeclare("dq", true, false, false, false, amqp091.Table{"x-max-length": int32(5)})
	must(t, err)
	must(t, ch.QueueBind("dq", "a.#", "dx", false, nil))
	ts.addUser(t, "app", "pw", "management")
	ts.grant(t, "app", "/", Permission{Configure: "^app", Write: ".*", Read: ".*"})
	must(t, ts.Close())
	ref, err := New(metaTestConfig(src))
	must(t, err)
	want := definitionsJSON(t, ref)
	must(t, ref.Close())
	orig, err := os.ReadFile(filepath.Join(src, "meta.db"))
	must(t, err)

	page := os.Getpagesize()
	var offsets []int
	for p := 2 * page; p < len(orig); p += page {
		for i := range 16 { // id, flags, count, overflow
			offsets = append(offsets, p+i)
		}
	}
	for _, rec := range []string{`"dq"`, `"dx"`, `"app"`, `"^app"`, `"a.#"`, "dq\x00", "app\x00"} {
		for at := 0; at < len(orig); {
			i := indexFrom(orig, rec, at)
			if i < 0 {
				break
			}
			for j := range len(rec) + 12 {
				offsets = append(offsets, i+j)
			}
			at = i + len(rec)
		}
	}
	detected := 0
	dir := t.TempDir()
	for _, off := range offsets {
		damaged := append([]byte(nil), orig...)
		damaged[off] ^= 0x5a
		must(t, os.WriteFile(filepath.Join(dir, "meta.db"), damaged, 0o600))
		s, err := New(metaTestConfig(dir))
		if err != nil {
			if !errorsIs(err, ErrMetaUnreadable) {
				t.Fatalf("byte %d flipped: error %v does not wrap ErrMetaUnreadable", off, err)
			}
			detected++
			continue
		}
		got := definitionsJSON(t, s)
		must(t, s.Close())
		if got != want {
			t.Fatalf("byte %d flipped: the broker started with other definitions:\n%s\nwant\n%s", off, got, want)
		}
	}
	if detected == 0 {
		t.Fatalf("none of %d flips was detected", len(offsets))
	}
	t.Logf("%d of %d flips stopped start-up; the rest hit bytes bbolt does not use", detected, len(offsets))
}

func indexFrom(b []byte, s string, from int) int {
	for i := from; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}
