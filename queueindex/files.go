package queueindex

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// FileCache bounds the number of files the indexes sharing it hold open, like
// RabbitMQ's file handle cache: an index opens a segment file or its
// directory when a call needs it and hands it back afterwards; a file nobody
// is using stays open for the next call until the cache is full, and then the
// least recently used one is closed. So the number of queues a broker can keep
// is bounded by the disk, not by the process's descriptor limit.
//
// The bound is soft in one way only: files in use at the same moment (a
// segment being read or written, a directory being synced) are never closed,
// so if more than Limit of them are in use the cache goes over for as long as
// they are. Each call of an index uses at most two files at once (a segment
// or the checkpoint, and the directory), so the excess is bounded by the
// number of concurrent calls.
//
// Closing a file loses nothing: a file in the cache is written only by Flush,
// which with Config.Sync fdatasyncs it before giving it back; without Sync the
// index remembers which segments have writes not yet synced and Sync syncs
// them, reopening any the cache closed meanwhile.
//
// FileCache.mu is a leaf lock: it is taken under the index locks and nothing
// else is taken, and no file is opened, closed or synced, while it is held.
// A FileCache is safe for concurrent use. The zero value is not usable; call
// NewFileCache.
type FileCache struct {
	limit int
	log   *slog.Logger

	mu   sync.Mutex
	open int        // files open, or being opened, by this cache
	idle handleList // open files nobody is using, least recently used first

	opens     atomic.Uint64
	evictions atomic.Uint64
}

// MinFileCacheLimit is the smallest Limit NewFileCache accepts: one file for a
// call's segment and one for its directory.
const MinFileCacheLimit = 2

// NewFileCache returns a cache that keeps at most limit files open (limit 0:
// no bound, files are still closed when their index lets them go). log
// receives close errors of evicted files, which have no caller to return to;
// nil means slog.Default().
func NewFileCache(limit int, log *slog.Logger) (*FileCache, error) {
	if limit != 0 && limit < MinFileCacheLimit {
		return nil, fmt.Errorf("%w: file cache limit %d below %d", ErrInvalidConfig, limit, MinFileCacheLimit)
	}
	if log == nil {
		log = slog.Default()
	}
	return &FileCache{limit: limit, log: log}, nil
}

// FileCacheStats is a point-in-time view of a FileCache.
type FileCacheStats struct {
	// Limit is the bound on open files (0: none).
	Limit int
	// Open is the number of files open now; Idle of those are not in use.
	Open, Idle int
	// Opens counts files opened, Evictions files closed to make room.
	Opens, Evictions uint64
}

// Stats returns the cache's counters.
func (c *FileCache) Stats() FileCacheStats {
	c.mu.Lock()
	st := FileCacheStats{Limit: c.limit, Open: c.open, Idle: c.idle.n}
	c.mu.Unlock()
	st.Opens = c.opens.Load()
	st.Evictions = c.evictions.Load()
	return st
}

// handle is a file the cache may close while nobody uses it and reopen by
// path. The owner (an index) keeps the handle; f is nil while it is closed.
type handle struct {
	path string
	// flag is what the file is opened with. Changed only by the owner while
	// no other call can use the handle (see page).
	flag int

	// Under FileCache.mu:
	f          *os.File
	pins       int     // calls using f; a pinned handle is never closed
	prev, next *handle // in FileCache.idle while open and not pinned
	listed     bool
}

// acquire returns h's file, opening it if the cache closed it (or never opened
// it), and pins it until release. Opening first closes least recently used
// idle files if the cache is full.
func (c *FileCache) acquire(h *handle) (*os.File, error) {
	c.mu.Lock()
	if h.f != nil {
		c.pinLocked(h)
		f := h.f
		c.mu.Unlock()
		return f, nil
	}
	c.open++ // reserved for the file opened below
	victims := c.victimsLocked()
	c.mu.Unlock()
	c.closeVictims(victims)

	f, err := os.OpenFile(h.path, h.flag, 0o644)
	c.mu.Lock()
	if err != nil {
		c.open--
		c.mu.Unlock()
		return nil, err
	}
	c.opens.Add(1)
	if h.f != nil {
		// Another call opened h meanwhile: use its file, drop ours.
		c.open--
		c.pinLocked(h)
		mine := f
		f = h.f
		c.mu.Unlock()
		_ = mine.Close() // read-only use so far: nothing to lose
		return f, nil
	}
	h.f = f
	h.pins++
	c.mu.Unlock()
	return f, nil
}

// pinLocked marks open handle h in use.
func (c *FileCache) pinLocked(h *handle) {
	if h.pins == 0 && h.listed {
		c.idle.remove(h)
	}
	h.pins++
}

// release ends a use of h begun by acquire. h stays open, most recently used,
// unless the cache is over its limit.
func (c *FileCache) release(h *handle) {
	c.mu.Lock()
	h.pins--
	if h.pins == 0 && h.f != nil {
		c.idle.pushBack(h)
	}
	victims := c.victimsLocked()
	c.mu.Unlock()
	c.closeVictims(victims)
}

// victimsLocked takes the least recently used idle files out of the cache
// until it is within its limit, for the caller to close after unlocking.
func (c *FileCache) victimsLocked() []*os.File {
	var victims []*os.File
	for c.limit > 0 && c.open > c.limit && c.idle.n > 0 {
		h := c.idle.popFront()
		victims = append(victims, h.f)
		h.f = nil
		c.open--
	}
	return victims
}

// closeVictims closes evicted files. Their writes were synced or are tracked
// by their index (see FileCache), so a close error loses nothing a caller
// could act on; it is logged.
func (c *FileCache) closeVictims(victims []*os.File) {
	for _, f := range victims {
		c.evictions.Add(1)
		if err := f.Close(); err != nil {
			c.log.Warn("queueindex: close evicted file", "path", f.Name(), "err", err)
		}
	}
}

// forget closes h if it is open and drops it from the cache for good; the
// owner must not use h afterwards without acquiring it again. h must not be in
// use.
func (c *FileCache) forget(h *handle) error {
	c.mu.Lock()
	f := c.detachLocked(h)
	c.mu.Unlock()
	if f == nil {
		return nil
	}
	return f.Close()
}

// closeIdle closes h if it is open and nobody uses it, and reports whether it
// did. An index calls it for its directory from ReleaseIdle.
func (c *FileCache) closeIdle(h *handle) bool {
	c.mu.Lock()
	var f *os.File
	if h.pins == 0 {
		f = c.detachLocked(h)
	}
	c.mu.Unlock()
	if f == nil {
		return false
	}
	if err := f.Close(); err != nil {
		c.log.Warn("queueindex: close idle file", "path", f.Name(), "err", err)
	}
	return true
}

// detachLocked takes h's file out of the cache and returns it (nil if h is
// closed).
func (c *FileCache) detachLocked(h *handle) *os.File {
	if h.pins != 0 {
		panic("queueindex: forgetting a file in use: " + h.path)
	}
	f := h.f
	if f == nil {
		return nil
	}
	if h.listed {
		c.idle.remove(h)
	}
	h.f = nil
	c.open--
	return f
}

// withFile opens path with flag for the duration of fn, counted by the cache
// like any other file: checkpoints and recovery reads use it.
func (c *FileCache) withFile(path string, flag int, fn func(*os.File) error) error {
	h := &handle{path: path, flag: flag}
	f, err := c.acquire(h)
	if err != nil {
		return err
	}
	err = fn(f)
	c.mu.Lock()
	h.pins--
	c.detachLocked(h)
	c.mu.Unlock()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// handleList is an intrusive doubly linked list of handles.
type handleList struct {
	head, tail *handle
	n          int
}

func (l *handleList) pushBack(h *handle) {
	h.prev, h.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = h
	} else {
		l.head = h
	}
	l.tail = h
	h.listed = true
	l.n++
}

func (l *handleList) remove(h *handle) {
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		l.head = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	} else {
		l.tail = h.prev
	}
	h.prev, h.next, h.listed = nil, nil, false
	l.n--
}

func (l *handleList) popFront() *handle {
	h := l.head
	l.remove(h)
	return h
}

// openDirs holds the directories of the indexes open in this process, so two
// never share one even when no directory lock is held (Config.Files set).
var openDirs struct {
	sync.Mutex
	m map[string]struct{}
}

// claimDir records dir as open, failing with ErrLocked if an index of this
// process has it open already. It returns the key to pass to releaseDir.
func claimDir(dir string) (string, error) {
	key, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("queueindex: open %s: %w", dir, err)
	}
	openDirs.Lock()
	defer openDirs.Unlock()
	if _, ok := openDirs.m[key]; ok {
		return "", fmt.Errorf("queueindex: open %s: %w", dir, ErrLocked)
	}
	if openDirs.m == nil {
		openDirs.m = make(map[string]struct{})
	}
	openDirs.m[key] = struct{}{}
	return key, nil
}

func releaseDir(key string) {
	openDirs.Lock()
	delete(openDirs.m, key)
	openDirs.Unlock()
}
