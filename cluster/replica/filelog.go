package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/msgstore"
)

// FileLog is a Log on msgstore's segment log, in a directory of its own:
//
//	log/        the msgstore.Log; replica offset o is msgstore offset o
//	storage.id  this copy's StorageID, created with the directory
//	epochs      the epoch history (CRC-protected, replaced atomically)
//
// Each record is a msgstore.Record with the Kind in Flags, the epoch as 8
// bytes in Properties and the data as Body. A new log's msgstore offset 0
// holds a header record (Flags 0) so that replica offsets start at 1.
//
// The epoch history is written (fsynced) before the first record of a new
// epoch, so the file is never behind the log; Open drops the entries that
// start above the recovered LastOffset (records a crash lost), and rebuilds
// the history by scanning the log when the file is missing, damaged or does
// not end with the last record's epoch.
//
// Sync follows the msgstore configuration's flush policy (Config.Flush):
// under fsync (the default) it fsyncs, so DurableOffset is on stable
// storage; under interval, messages and os it only makes sure everything
// appended is written to the OS (msgstore's own flusher fsyncs on its
// schedule), so "durable" means "survives a process crash". One exception
// keeps the epoch fence of a restarted leader (ErrRestartedLeader) under
// every policy: a Sync after a record that starts a new epoch fsyncs.
type FileLog struct {
	dir   string
	ml    *msgstore.Log
	id    string
	flush msgstore.FlushPolicy

	// newEpoch: a record starting an epoch was appended since the last
	// fsync (goroutine-owned, as Append and Sync are).
	newEpoch bool

	// Written only by the replica's goroutine (the Log contract); atomics so
	// Read, LastOffset and friends may run on other goroutines.
	last, first, durable atomic.Uint64

	mu     sync.Mutex // guards epochs for Epochs() from other goroutines
	epochs []EpochStart

	recs []msgstore.Record // Append scratch
	locs []msgstore.Loc
}

const (
	fileLogSub    = "log"
	storageIDFile = "storage.id"
	epochsFile    = "epochs"
	flagHeader    = 0
)

// OpenFileLog opens or creates the log in cfg.Dir (cfg is msgstore's
// configuration for the directory; its Dir is replaced by the log's
// subdirectory). A directory without a storage.id gets a new StorageID:
// it is a new or re-created copy.
func OpenFileLog(cfg msgstore.Config) (*FileLog, error) {
	dir := cfg.Dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("replica: create %s: %w", dir, err)
	}
	id, err := loadStorageID(dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = filepath.Join(dir, fileLogSub)
	ml, err := msgstore.OpenLog(cfg)
	if err != nil {
		return nil, fmt.Errorf("replica: open log %s: %w", cfg.Dir, err)
	}
	l := &FileLog{dir: dir, ml: ml, id: id, flush: cfg.Flush}
	if err := l.recover(); err != nil {
		ml.Close()
		return nil, err
	}
	return l, nil
}

// loadStorageID reads dir's storage.id, creating it when absent.
func loadStorageID(dir string) (string, error) {
	p := filepath.Join(dir, storageIDFile)
	b, err := os.ReadFile(p)
	if err == nil && len(b) > 0 {
		return string(b), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("replica: read %s: %w", p, err)
	}
	// A log without its id is treated as a new copy: it must earn its way
	// back into the in-sync set, never be trusted as the old one.
	id := newStorageID()
	if err := writeDurable(dir, storageIDFile, []byte(id)); err != nil {
		return "", err
	}
	return id, nil
}

// writeDurable replaces dir/name with data: temporary file, fsync, rename,
// directory fsync.
func writeDurable(dir, name string, data []byte) error {
	p := filepath.Join(dir, name)
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("replica: write %s: %w", p, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replica: write %s: %w", p, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// recover sets the offsets from the msgstore log, writes the header of a
// new log, makes what a crash left in the OS durable and loads the history.
func (l *FileLog) recover() error {
	st := l.ml.Stats()
	if st.NextOffset == 0 {
		if _, err := l.ml.Append(msgstore.Record{Flags: flagHeader, Body: []byte(l.id)}); err != nil {
			return fmt.Errorf("replica: write header of %s: %w", l.dir, err)
		}
		st.NextOffset = 1
	}
	if err := l.ml.Sync(); err != nil {
		return fmt.Errorf("replica: sync %s: %w", l.dir, err)
	}
	last := st.NextOffset - 1
	l.last.Store(last)
	l.durable.Store(last)
	l.first.Store(max(1, st.FirstOffset))
	if l.first.Load() > last+1 {
		l.first.Store(last + 1)
	}
	h, ok := l.loadEpochs(last)
	if !ok {
		var err error
		if h, err = l.scanEpochs(); err != nil {
			return err
		}
		if err := l.saveEpochs(h); err != nil {
			return err
		}
	}
	l.epochs = h
	return nil
}

// loadEpochs reads the epochs file, drops entries above last and reports
// whether the result agrees with the last record.
func (l *FileLog) loadEpochs(last uint64) ([]EpochStart, bool) {
	b, err := os.ReadFile(filepath.Join(l.dir, epochsFile))
	if err != nil || len(b) < 4 || (len(b)-4)%16 != 0 ||
		crc32.Checksum(b[4:], crcTable) != binary.BigEndian.Uint32(b) {
		return nil, last == 0 && errors.Is(err, os.ErrNotExist)
	}
	var h []EpochStart
	for p := b[4:]; len(p) > 0; p = p[16:] {
		h = append(h, EpochStart{Epoch: binary.BigEndian.Uint64(p), Start: binary.BigEndian.Uint64(p[8:])})
	}
	h = truncateEpochs(h, last)
	if last < l.first.Load() {
		return h, true // no record to check against
	}
	var lastEpoch uint64
	found := false
	err = l.Read(last, 0, func(r Record) bool { lastEpoch, found = r.Epoch, true; return false })
	if err != nil || !found || len(h) == 0 || h[len(h)-1].Epoch != lastEpoch {
		return nil, false
	}
	return h, true
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// scanEpochs rebuilds the history from the records (a missing or stale file).
func (l *FileLog) scanEpochs() ([]EpochStart, error) {
	var h []EpochStart
	for from := l.first.Load(); from <= l.last.Load(); {
		n := 0
		err := l.Read(from, 4<<20, func(r Record) bool {
			h = noteEpochs(h, []Record{r})
			from, n = r.Offset+1, n+1
			return true
		})
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
	}
	return h, nil
}

func (l *FileLog) saveEpochs(h []EpochStart) error {
	b := make([]byte, 4, 4+16*len(h))
	for _, e := range h {
		b = binary.BigEndian.AppendUint64(b, e.Epoch)
		b = binary.BigEndian.AppendUint64(b, e.Start)
	}
	binary.BigEndian.PutUint32(b, crc32.Checksum(b[4:], crcTable))
	return writeDurable(l.dir, epochsFile, b)
}

// Append writes recs; a record that starts a new epoch has the history
// saved first.
func (l *FileLog) Append(recs ...Record) error {
	if len(recs) == 0 {
		return nil
	}
	last := l.last.Load()
	empty := last+1 == l.first.Load()
	l.mu.Lock()
	h := l.epochs
	l.mu.Unlock()
	if err := checkAppend(last, empty, h, recs); err != nil {
		return err
	}
	if nh := noteEpochs(h, recs); len(nh) > len(h) {
		nh = append([]EpochStart(nil), nh...)
		if err := l.saveEpochs(nh); err != nil {
			return err
		}
		l.mu.Lock()
		l.epochs = nh
		l.mu.Unlock()
		l.newEpoch = true
	}
	if recs[0].Offset > last+1 {
		if err := l.skipTo(recs[0].Offset); err != nil {
			return err
		}
	}
	l.recs, l.locs = l.recs[:0], l.locs[:0]
	for i := range recs {
		r := &recs[i]
		var ep [8]byte
		binary.BigEndian.PutUint64(ep[:], r.Epoch)
		l.recs = append(l.recs, msgstore.Record{Flags: uint8(r.Kind), Properties: ep[:], Body: r.Data})
		l.locs = append(l.locs, msgstore.Loc{})
	}
	n, err := l.ml.AppendBatch(l.recs, l.locs)
	clear(l.recs) // do not pin the caller's data
	if n > 0 {
		l.last.Store(l.locs[n-1].Offset)
	}
	if err != nil {
		return fmt.Errorf("replica: append to %s: %w", l.dir, err)
	}
	if got := l.locs[n-1].Offset; got != recs[n-1].Offset {
		return fmt.Errorf("replica: %s: record %d stored at offset %d", l.dir, recs[n-1].Offset, got)
	}
	return nil
}

// skipTo starts an empty log at off and removes the segments before it,
// which hold no replica records (at most the header), so a reopened log's
// FirstOffset is off too.
func (l *FileLog) skipTo(off uint64) error {
	if err := l.ml.SkipTo(off); err != nil {
		return fmt.Errorf("replica: start %s at %d: %w", l.dir, off, err)
	}
	segs, err := l.ml.Segments()
	if err != nil {
		return fmt.Errorf("replica: %s: %w", l.dir, err)
	}
	for _, s := range segs {
		if s.Base < off && !s.Active {
			if err := l.ml.RemoveSegment(s.Base); err != nil {
				return fmt.Errorf("replica: %s: drop segment %d: %w", l.dir, s.Base, err)
			}
		}
	}
	l.first.Store(off)
	return nil
}

// Sync makes everything appended durable as the flush policy defines it
// (see FileLog): fsynced under fsync and after a new epoch's first record,
// written to the OS otherwise.
func (l *FileLog) Sync() error {
	last := l.last.Load()
	if l.flush == msgstore.FlushFsync || l.newEpoch {
		if err := l.ml.Sync(); err != nil {
			return fmt.Errorf("replica: sync %s: %w", l.dir, err)
		}
		l.newEpoch = false
	} else if err := l.whenWritten(last); err != nil {
		return fmt.Errorf("replica: sync %s: %w", l.dir, err)
	}
	l.durable.Store(last)
	return nil
}

// whenWritten waits until msgstore reports off written to the OS: Append
// has written it already, but a log that failed since (a failed fsync of
// its flusher) must not have its records counted durable.
func (l *FileLog) whenWritten(off uint64) error {
	ch := make(chan error, 1)
	l.ml.WhenDurable(off, func(err error) { ch <- err })
	return <-ch
}

// FlushPolicy is the policy Sync follows.
func (l *FileLog) FlushPolicy() msgstore.FlushPolicy { return l.flush }

func (l *FileLog) LastOffset() uint64    { return l.last.Load() }
func (l *FileLog) FirstOffset() uint64   { return l.first.Load() }
func (l *FileLog) DurableOffset() uint64 { return l.durable.Load() }
func (l *FileLog) StorageID() string     { return l.id }

func (l *FileLog) Epochs() []EpochStart {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]EpochStart(nil), l.epochs...)
}

// Read iterates the msgstore log from from. Data is copied: the iterator's
// buffer is reused.
func (l *FileLog) Read(from uint64, maxBytes int, fn func(Record) bool) error {
	if from < l.first.Load() {
		return fmt.Errorf("%w: offset %d, first is %d", ErrCompacted, from, l.first.Load())
	}
	last := l.last.Load()
	it := l.ml.Iterate(from)
	n := 0
	for it.Next() {
		mr := it.Record()
		if mr.Offset > last || (n > 0 && n+len(mr.Body) > maxBytes) {
			break
		}
		if mr.Flags == flagHeader || len(mr.Properties) != 8 {
			if mr.Offset == 0 {
				continue
			}
			return fmt.Errorf("replica: %s: record %d is not a replica record", l.dir, mr.Offset)
		}
		n += len(mr.Body)
		r := Record{Offset: mr.Offset, Epoch: binary.BigEndian.Uint64(mr.Properties), Kind: Kind(mr.Flags),
			Data: append([]byte(nil), mr.Body...)}
		if !fn(r) {
			return nil
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("replica: read %s from %d: %w", l.dir, from, err)
	}
	return nil
}

// TruncateAfter cuts the msgstore log (durably), then saves the shortened
// history; a crash in between is repaired by Open, which drops history
// entries above the last record.
func (l *FileLog) TruncateAfter(off uint64) error {
	if off >= l.last.Load() {
		return nil
	}
	if err := l.ml.TruncateAfter(off); err != nil {
		return fmt.Errorf("replica: truncate %s after %d: %w", l.dir, off, err)
	}
	l.last.Store(off)
	l.durable.Store(min(l.durable.Load(), off))
	if l.first.Load() > off+1 {
		l.first.Store(off + 1)
	}
	l.mu.Lock()
	h := truncateEpochs(append([]EpochStart(nil), l.epochs...), off)
	l.epochs = h
	l.mu.Unlock()
	return l.saveEpochs(h)
}

// DropBefore removes whole segments whose records are all below off; the
// segment holding off and the active one stay, so FirstOffset may stay
// below off.
func (l *FileLog) DropBefore(off uint64) error {
	if off > l.durable.Load()+1 {
		return fmt.Errorf("replica: drop before %d above durable offset %d", off, l.durable.Load())
	}
	segs, err := l.ml.Segments()
	if err != nil {
		return fmt.Errorf("replica: %s: %w", l.dir, err)
	}
	for i := 0; i+1 < len(segs) && segs[i+1].Base <= off; i++ {
		if err := l.ml.RemoveSegment(segs[i].Base); err != nil {
			return fmt.Errorf("replica: %s: drop segment %d: %w", l.dir, segs[i].Base, err)
		}
		l.first.Store(max(1, segs[i+1].Base))
	}
	return nil
}

func (l *FileLog) Close() error { return l.ml.Close() }

// Stats is the msgstore log's counters (fsyncs, bytes), for benchmarks and
// the management API.
func (l *FileLog) Stats() msgstore.LogStats { return l.ml.Stats() }
