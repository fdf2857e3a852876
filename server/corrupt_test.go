package server

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// lockedBuffer is a log sink the broker's goroutines may write concurrently.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBrokerStartsOverDamagedFiles damages a stopped broker's files the ways
// disks and crashes do (a flipped byte in a message, a segment cut short, a
// lost or garbled checkpoint, a garbled queue-index slot) and restarts it:
// the broker must start, log what it dropped, and deliver every message but
// the ones whose own bytes were destroyed.
func TestBrokerStartsOverDamagedFiles(t *testing.T) {
	const n = 100
	body := func(i int) string { return fmt.Sprintf("damaged-%03d", i) }
	cases := []struct {
		name string
		// damage changes the files under the vhost directory and returns the
		// messages it destroyed.
		damage func(t *testing.T, vhostDir string) map[string]bool
		// warns: the restart must log a warning or an error naming the loss.
		warns bool
	}{
		{"flipped byte in a message body", func(t *testing.T, dir string) map[string]bool {
			seg := onlyFile(t, filepath.Join(dir, "msgstore"), ".seg")
			editFile(t, seg, func(b []byte) []byte {
				i := bytes.Index(b, []byte(body(40)))
				b[i+len(body(40))-1] ^= 0xff
				return b
			})
			return map[string]bool{body(40): true}
		}, true},
		{"segment cut inside the last message", func(t *testing.T, dir string) map[string]bool {
			seg := onlyFile(t, filepath.Join(dir, "msgstore"), ".seg")
			editFile(t, seg, func(b []byte) []byte { return b[:len(b)-3] })
			return map[string]bool{body(n - 1): true}
		}, true},
		{"store checkpoint lost", func(t *testing.T, dir string) map[string]bool {
			must(t, os.Remove(filepath.Join(dir, "msgstore", "checkpoint.dat")))
			return nil
		}, false},
		{"store checkpoint garbled", func(t *testing.T, dir string) map[string]bool {
			editFile(t, filepath.Join(dir, "msgstore", "checkpoint.dat"), func(b []byte) []byte {
				b[len(b)/2] ^= 0x55
				return b
			})
			return nil
		}, false},
		{"queue index checkpoint garbled", func(t *testing.T, dir string) map[string]bool {
			editFile(t, filepath.Join(dir, "queues", nameDir("damaged"), "checkpoint"), func(b []byte) []byte {
				b[len(b)-1] ^= 0x55
				return b
			})
			return nil
		}, false},
		{"queue index slot garbled", func(t *testing.T, dir string) map[string]bool {
			editFile(t, filepath.Join(dir, "queues", nameDir("damaged"), "00000000.qi"), func(b []byte) []byte {
				b[7*32+10] ^= 0x55 // slot 7: the 8th message
				return b
			})
			return map[string]bool{body(7): true}
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ts := startServer(t, withDataDir(dir))
			_, ch := ts.channel(t)
			_, err := ch.QueueDeclare("damaged", true, false, false, false, nil)
			must(t, err)
			publishConfirmedBodies(t, ch, "damaged", n, body)
			ts.Close()

			lost := tc.damage(t, vhostDir(dir, "/"))
			var logs lockedBuffer
			ts = startServer(t, withDataDir(dir), func(c *Config) {
				c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			})
			_, ch = ts.channel(t)
			got := map[string]bool{}
			for {
				d, ok, err := ch.Get("damaged", true)
				must(t, err)
				if !ok {
					break
				}
				if got[string(d.Body)] {
					t.Fatalf("%q delivered twice", d.Body)
				}
				got[string(d.Body)] = true
			}
			for i := range n {
				if b := body(i); !got[b] && !lost[b] {
					t.Errorf("%s missing after restart (lost %d of %d; damage destroyed %v)", b, n-len(got), n, lost)
				}
			}
			if len(got)+len(lost) < n || len(got) > n {
				t.Errorf("delivered %d, destroyed %d, published %d", len(got), len(lost), n)
			}
			out := logs.String()
			if tc.warns && !strings.Contains(out, "level=WARN") && !strings.Contains(out, "level=ERROR") {
				t.Errorf("restart logged no warning about the damage:\n%s", out)
			}
			if strings.Contains(out, "no reference left") {
				t.Errorf("restart logged a follow-on release error:\n%s", out)
			}
		})
	}
}

// publishConfirmedBodies publishes n persistent messages with body(i) and
// waits for every confirm.
func publishConfirmedBodies(t *testing.T, ch *amqp091.Channel, queue string, n int, body func(int) string) {
	t.Helper()
	must(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, n))
	for i := range n {
		must(t, ch.Publish("", queue, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(body(i))}))
	}
	for range n {
		if cf := nextConfirm(t, confirms); !cf.Ack {
			t.Fatalf("publish %d nacked", cf.DeliveryTag)
		}
	}
}

// onlyFile returns the one file in dir with the suffix.
func onlyFile(t *testing.T, dir, suffix string) string {
	t.Helper()
	var found []string
	ents, err := os.ReadDir(dir)
	must(t, err)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), suffix) {
			found = append(found, filepath.Join(dir, e.Name()))
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d files ending in %s: %v", dir, len(found), suffix, found)
	}
	return found[0]
}

// editFile rewrites path with edit's result.
func editFile(t *testing.T, path string, edit func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	must(t, os.WriteFile(path, edit(b), 0o644))
}
