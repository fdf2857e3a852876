package replica

import (
	"time"

	"testing"

	"github.com/warrenmq/warren/msgstore"
)

// Under the os and interval policies Sync counts what is written to the OS
// as durable without an fsync, except after a record starting an epoch
// (the restarted-leader fence needs it on disk); under fsync every Sync
// with data to sync fsyncs.
func TestReplicaFileLogFlushPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy    msgstore.FlushPolicy
		dataFsync bool
	}{{msgstore.FlushFsync, true}, {msgstore.FlushOS, false}, {msgstore.FlushInterval, false}} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			cfg := fileLogConfig(t.TempDir())
			cfg.SegmentSize = 64 << 20 // no segment seals, whose fsyncs would hide Sync's
			cfg.Flush = tc.policy
			cfg.FlushInterval = time.Hour
			l, err := OpenFileLog(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.FlushPolicy() != tc.policy {
				t.Fatalf("policy %v, want %v", l.FlushPolicy(), tc.policy)
			}
			syncCounted := func(recs ...Record) uint64 {
				t.Helper()
				before := l.Stats().Fsyncs
				if err := l.Append(recs...); err != nil {
					t.Fatal(err)
				}
				if err := l.Sync(); err != nil {
					t.Fatal(err)
				}
				if d := l.DurableOffset(); d != recs[len(recs)-1].Offset {
					t.Fatalf("durable %d after Sync, want %d", d, recs[len(recs)-1].Offset)
				}
				return l.Stats().Fsyncs - before
			}
			if n := syncCounted(Record{Offset: 1, Epoch: 1, Kind: KindEpochStart}); n == 0 {
				t.Fatal("a new epoch's first record was not fsynced")
			}
			n := syncCounted(dataRecs(2, 10, 1)...)
			if tc.dataFsync && n == 0 {
				t.Fatal("fsync policy: Sync did not fsync")
			}
			if !tc.dataFsync && n != 0 {
				t.Fatalf("%v policy: Sync fsynced %d times", tc.policy, n)
			}
		})
	}
}
