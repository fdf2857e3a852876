package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Event is one line of history.jsonl. An operation is an invoke event and
// one completion (ok, fail or unknown) with the same Op; observations such as
// a delivery are a single ok or info event.
type Event struct {
	T           int64    `json:"t"` // Unix nanoseconds
	Proc        string   `json:"proc"`
	Type        string   `json:"type"` // invoke, ok, fail, unknown, info
	F           string   `json:"f"`    // publish, deliver, get, ack, commit, declare, ...
	Op          int64    `json:"op,omitempty"`
	Node        string   `json:"node,omitempty"`
	Q           string   `json:"q,omitempty"`
	Key         string   `json:"key,omitempty"`
	ID          string   `json:"id,omitempty"`
	IDs         []string `json:"ids,omitempty"`
	Keys        []string `json:"keys,omitempty"`
	Redelivered bool     `json:"redelivered,omitempty"`
	Err         string   `json:"err,omitempty"`
	Reason      string   `json:"reason,omitempty"` // the broker's text of a definite failure
}

// Event types.
const (
	evInvoke  = "invoke"
	evOK      = "ok"
	evFail    = "fail"
	evUnknown = "unknown"
	evInfo    = "info"
)

// jsonLog appends JSON lines to one file from many goroutines. The lock
// covers a buffered write only; the buffer is flushed when it fills and on
// Close, so a harness goroutine never waits on the disk for long.
type jsonLog struct {
	mu        sync.Mutex
	f         *os.File
	w         *bufio.Writer
	err       error
	flushEach bool // a log read while the run goes on (nemesis.log)
}

func createJSONLog(path string) (*jsonLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &jsonLog{f: f, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

func (l *jsonLog) write(v any) {
	b, err := json.Marshal(v)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		_, err = l.w.Write(append(b, '\n'))
	}
	if err == nil && l.flushEach {
		err = l.w.Flush()
	}
	if err != nil && l.err == nil {
		l.err = err
	}
}

// Close flushes and closes the file and returns the first error of any write.
func (l *jsonLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.w.Flush(); err != nil && l.err == nil {
		l.err = err
	}
	if err := l.f.Close(); err != nil && l.err == nil {
		l.err = err
	}
	return l.err
}

// history records the workload's operations.
type history struct {
	log    *jsonLog
	nextOp atomic.Int64
	ops    atomic.Int64 // operations invoked, bounded by maxOps
	maxOps int64
}

// invoke records the start of an operation and returns its number, or 0
// when the run's operation budget is spent (the caller stops).
func (h *history) invoke(e Event) int64 {
	if h.ops.Add(1) > h.maxOps {
		return 0
	}
	e.Op = h.nextOp.Add(1)
	e.Type = evInvoke
	h.record(e)
	return e.Op
}

// complete records the outcome of operation op.
func (h *history) complete(op int64, typ string, e Event) {
	e.Op, e.Type = op, typ
	h.record(e)
}

func (h *history) record(e Event) {
	if e.T == 0 {
		e.T = time.Now().UnixNano()
	}
	h.log.write(e)
}

// readJSONLines decodes every line of path into a T.
func readJSONLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for line := 1; sc.Scan(); line++ {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}
