package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecondBrokerOnDataDirExitsAtOnce: a second broker on a directory a
// running broker holds stops at once with ErrDataDirInUse naming the holder's
// pid, without touching meta.db (which bbolt's lock would have made it call
// unreadable after a wait). Once the first broker closes, the directory is
// free again.
func TestSecondBrokerOnDataDirExitsAtOnce(t *testing.T) {
	ts := startServer(t)
	dir := ts.cfg.DataDir
	cfg := ts.cfg
	cfg.AMQPListen = "127.0.0.1:0"
	began := time.Now()
	s2, err := New(cfg)
	took := time.Since(began)
	if err == nil {
		s2.Close()
		t.Fatal("a second broker opened a data directory in use")
	}
	if !errors.Is(err, ErrDataDirInUse) || errors.Is(err, ErrMetaUnreadable) {
		t.Fatalf("want ErrDataDirInUse, got %v", err)
	}
	if want := fmt.Sprintf("pid %d", os.Getpid()); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("error %q does not name %s and %s", err, dir, want)
	}
	if took > time.Second {
		t.Fatalf("the second broker took %s to give up", took)
	}
	b, err := os.ReadFile(filepath.Join(dir, lockFileName))
	if err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(os.Getpid()) {
		t.Fatalf("lock file holds %q (%v), want the pid", b, err)
	}
	must(t, ts.Close())
	s3, err := New(cfg)
	if err != nil {
		t.Fatalf("after the first broker closed: %v", err)
	}
	must(t, s3.Close())
}
