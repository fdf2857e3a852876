package replica

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
)

// MemLog is a Log in memory, for tests and for the property tests' replicas.
// It models a disk that loses un-fsynced writes: PowerCut drops every record
// above DurableOffset, as a power cut drops what the page cache held, while
// truncations and DropBefore take effect at once (FileLog makes them durable
// before returning too).
type MemLog struct {
	mu      sync.Mutex
	first   uint64 // offset of recs[0]
	recs    []Record
	durable uint64
	epochs  []EpochStart
	id      string
	failErr error // FailAppends: the error Append and Sync return
	closed  bool
	stall   chan struct{} // StallSyncs: Sync waits until it is closed
}

// NewMemLog returns an empty log with a new StorageID.
func NewMemLog() *MemLog { return &MemLog{first: 1, id: newStorageID()} }

func newStorageID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand never fails on the supported platforms; a fixed ID would
		// make two wiped copies look alike, so refuse to go on.
		panic(fmt.Sprintf("replica: storage id: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// checkAppend validates that recs continue a log whose last offset is last
// and whose history is epochs. An empty log (empty true) may start at any
// offset above last: a mirror catching up from a leader that already
// reclaimed its prefix starts where the leader's log starts.
func checkAppend(last uint64, empty bool, epochs []EpochStart, recs []Record) error {
	var lastEpoch uint64
	if len(epochs) > 0 {
		lastEpoch = epochs[len(epochs)-1].Epoch
	}
	for i, r := range recs {
		want := last + 1
		if i == 0 && empty && r.Offset > last {
			want = r.Offset
		}
		if r.Offset != want {
			return fmt.Errorf("%w: record offset %d, want %d", ErrOffsetGap, r.Offset, want)
		}
		if r.Epoch < lastEpoch {
			return fmt.Errorf("%w: record %d of epoch %d after epoch %d", ErrOffsetGap, r.Offset, r.Epoch, lastEpoch)
		}
		if r.Kind != KindData && r.Kind != KindEpochStart {
			return fmt.Errorf("replica: record %d has unknown kind %d", r.Offset, r.Kind)
		}
		last, lastEpoch = r.Offset, r.Epoch
	}
	return nil
}

// noteEpochs extends the epoch history h with the epochs recs start.
func noteEpochs(h []EpochStart, recs []Record) []EpochStart {
	for _, r := range recs {
		if len(h) == 0 || r.Epoch > h[len(h)-1].Epoch {
			h = append(h, EpochStart{Epoch: r.Epoch, Start: r.Offset})
		}
	}
	return h
}

// truncateEpochs drops the history entries of epochs that start above off.
func truncateEpochs(h []EpochStart, off uint64) []EpochStart {
	i := len(h)
	for i > 0 && h[i-1].Start > off {
		i--
	}
	return h[:i]
}

func (m *MemLog) lastLocked() uint64 { return m.first + uint64(len(m.recs)) - 1 }

func (m *MemLog) Append(recs ...Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if m.failErr != nil {
		return m.failErr
	}
	if err := checkAppend(m.lastLocked(), len(m.recs) == 0, m.epochs, recs); err != nil {
		return err
	}
	if len(m.recs) == 0 && len(recs) > 0 {
		m.first = recs[0].Offset
		if m.durable < m.first-1 {
			m.durable = m.first - 1
		}
	}
	for _, r := range recs {
		r.Data = append([]byte(nil), r.Data...)
		m.recs = append(m.recs, r)
	}
	m.epochs = noteEpochs(m.epochs, recs)
	return nil
}

func (m *MemLog) Sync() error {
	m.mu.Lock()
	stall := m.stall
	m.mu.Unlock()
	if stall != nil {
		<-stall // outside the lock: a stuck fsync does not stop readers
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if m.failErr != nil {
		return m.failErr
	}
	m.durable = m.lastLocked()
	return nil
}

func (m *MemLog) LastOffset() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastLocked()
}

func (m *MemLog) FirstOffset() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.first
}

func (m *MemLog) DurableOffset() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.durable
}

// Read copies the records it hands to fn under the lock, then calls fn
// without it, so fn may call the log.
func (m *MemLog) Read(from uint64, maxBytes int, fn func(Record) bool) error {
	m.mu.Lock()
	if from < m.first {
		m.mu.Unlock()
		return fmt.Errorf("%w: offset %d, first is %d", ErrCompacted, from, m.first)
	}
	var out []Record
	n := 0
	for i := from - m.first; i < uint64(len(m.recs)); i++ {
		r := m.recs[i]
		if len(out) > 0 && n+len(r.Data) > maxBytes {
			break
		}
		n += len(r.Data)
		out = append(out, r)
	}
	m.mu.Unlock()
	for _, r := range out {
		if !fn(r) {
			return nil
		}
	}
	return nil
}

func (m *MemLog) TruncateAfter(off uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if off >= m.lastLocked() {
		return nil
	}
	if off+1 < m.first {
		// Nothing this log holds is at or below off: it keeps no records and
		// its next record may start anywhere above off.
		m.recs, m.first = m.recs[:0], off+1
	} else {
		clear(m.recs[off+1-m.first:])
		m.recs = m.recs[:off+1-m.first]
	}
	m.durable = min(m.durable, off)
	m.epochs = truncateEpochs(m.epochs, off)
	return nil
}

func (m *MemLog) DropBefore(off uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if off <= m.first {
		return nil
	}
	if off > m.durable+1 {
		return fmt.Errorf("replica: drop before %d above durable offset %d", off, m.durable)
	}
	n := min(off-m.first, uint64(len(m.recs)))
	m.recs = append(m.recs[:0:0], m.recs[n:]...)
	m.first = off
	return nil
}

func (m *MemLog) Epochs() []EpochStart {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]EpochStart(nil), m.epochs...)
}

func (m *MemLog) StorageID() string { return m.id }

// Close makes the log refuse further use; Reopen undoes it, as a restart
// finds the disk's contents again.
func (m *MemLog) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// Reopen makes a closed log usable again with what it holds.
func (m *MemLog) Reopen() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = false
}

// PowerCut drops every record above DurableOffset and the epoch history
// that started there: what a disk holds after losing power.
func (m *MemLog) PowerCut() {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.durable
	if d+1 < m.first {
		d = m.first - 1
	}
	m.recs = m.recs[:d+1-m.first]
	m.epochs = truncateEpochs(m.epochs, d)
}

// FailAppends makes Append and Sync return err (a full or failed disk);
// nil lets them work again.
func (m *MemLog) FailAppends(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failErr = err
}

// StallSyncs makes Sync block (a disk whose fsync hangs) until release is
// called; release may be called more than once.
func (m *MemLog) StallSyncs() (release func()) {
	ch := make(chan struct{})
	m.mu.Lock()
	m.stall = ch
	m.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			if m.stall == ch {
				m.stall = nil
			}
			m.mu.Unlock()
			close(ch)
		})
	}
}

// Wipe empties the log and gives it a new StorageID, like a replica whose
// directory was deleted and re-created.
func (m *MemLog) Wipe() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs, m.first, m.durable, m.epochs, m.id = nil, 1, 0, nil, newStorageID()
}
