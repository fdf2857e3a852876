package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
)

// legacyDirName is layout 1's directory name for a vhost or queue name:
// percent-encoded and cut at 200 bytes. It is neither safe (".", "..") nor
// injective (the cut), which is why layout 2 replaced it; it is kept only to
// find layout 1's directories.
func legacyDirName(name string) string {
	esc := url.PathEscape(name)
	if name == "" {
		esc = "%00"
	}
	if len(esc) > 200 {
		esc = esc[:200]
	}
	return esc
}

// migrateLayout moves a layout 1 or 2 data directory to layout 3. From
// layouts 1 and 2 meta.db's keys move to metaKey's encoding, in one
// transaction (migrateMetaKeys). From layout 1 the files move too
// (migrateLayout1Dirs). data/layout is written last, so a start that dies
// before it does the remaining steps again, and each step does nothing the
// second time.
func migrateLayout(dataDir string, meta *metaStore, log *slog.Logger) error {
	have, err := readLayout(dataDir)
	switch {
	case err != nil:
		return fmt.Errorf("server: reading the data directory's layout: %w", err)
	case have == layoutVersion:
		return nil
	case have != "" && have != "2":
		return fmt.Errorf("server: %s: unknown layout %q (this broker knows layout %s)", filepath.Join(dataDir, "layout"), have, layoutVersion)
	}
	moved, err := migrateMetaKeys(meta)
	if err != nil {
		return fmt.Errorf("%w: moving the keys of meta.db to layout %s: %w", ErrMetaUnreadable, layoutVersion, err)
	}
	if moved > 0 {
		log.Info("meta.db keys moved to layout "+layoutVersion, "records", moved)
	}
	if have == "" {
		if err := migrateLayout1Dirs(dataDir, meta, log); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dataDir, "layout"), []byte(layoutVersion+"\n"), true)
}

// migrateLayout1Dirs moves a layout 1 data directory's files to their
// layout 2 (and 3) paths, driven by the definitions in meta.db: for each
// vhost its message store, and for each durable queue its index or stream
// log, is renamed from its percent-encoded directory to its hashed one.
// Every step is one rename, done only while the old path exists and the new
// one does not: a crash in the middle leaves every file at one of its two
// paths, and the next start finishes the move. Directories no definition
// names are left where they are and logged.
func migrateLayout1Dirs(dataDir string, meta *metaStore, log *slog.Logger) error {
	vhostsDir := filepath.Join(dataDir, "vhosts")
	if _, err := os.Stat(vhostsDir); err == nil {
		queues, err := durableQueueNames(meta)
		if err != nil {
			return err
		}
		moved := 0
		for vhost, names := range queues {
			n, err := migrateVhost(vhostsDir, vhost, names)
			if err != nil {
				return fmt.Errorf("server: moving the files of vhost %q out of layout 1: %w", vhost, err)
			}
			moved += n
		}
		if err := syncDir(vhostsDir); err != nil {
			return err
		}
		logLegacyLeftovers(vhostsDir, log)
		log.Info("data directory files moved from layout 1", "vhosts", len(queues), "directories_moved", moved)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// durableQueueNames maps every vhost in meta.db to its durable queues' names.
func durableQueueNames(meta *metaStore) (map[string][]string, error) {
	out := make(map[string][]string)
	err := metaEach(meta, bucketVhosts, func(v metaVhost) error {
		out[v.Name] = nil
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMetaUnreadable, err)
	}
	err = metaEach(meta, bucketQueues, func(q metaQueue) error {
		if _, ok := out[q.Vhost]; ok {
			out[q.Vhost] = append(out[q.Vhost], q.Name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMetaUnreadable, err)
	}
	return out, nil
}

// migrateVhost moves one vhost's store and queue directories and returns how
// many it moved. Layout 1 put vhost "." at data/vhosts itself and ".." at
// data; only the vhost's own subdirectories are moved from there, and the
// old directory is removed only when it is a plain, now empty, child of
// data/vhosts.
func migrateVhost(vhostsDir, vhost string, queues []string) (int, error) {
	legacy := legacyDirName(vhost)
	oldDir := filepath.Join(vhostsDir, legacy)
	newDir := filepath.Join(vhostsDir, nameDir(vhost))
	if _, err := os.Stat(oldDir); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err := makeNamedDir(newDir, vhost); err != nil {
		return 0, err
	}
	moved := 0
	move := func(from, to string) error {
		ok, err := moveIfPresent(from, to)
		if ok {
			moved++
		}
		return err
	}
	if err := move(filepath.Join(oldDir, "msgstore"), filepath.Join(newDir, "msgstore")); err != nil {
		return moved, err
	}
	for _, sub := range []string{"queues", "streams"} {
		if err := os.MkdirAll(filepath.Join(newDir, sub), 0o755); err != nil {
			return moved, err
		}
		for _, q := range queues {
			if err := move(filepath.Join(oldDir, sub, legacyDirName(q)), filepath.Join(newDir, sub, nameDir(q))); err != nil {
				return moved, err
			}
		}
		if err := syncDir(filepath.Join(newDir, sub)); err != nil {
			return moved, err
		}
	}
	if err := syncDir(newDir); err != nil {
		return moved, err
	}
	for _, p := range []string{filepath.Join(oldDir, "queues"), filepath.Join(oldDir, "streams")} {
		if err := removeIfEmpty(p); err != nil {
			return moved, err
		}
	}
	if legacy == "." || legacy == ".." {
		return moved, nil // data/vhosts or data itself, holding other vhosts' files
	}
	// The transient store is wiped at every start; layout 2 starts a new one.
	if err := os.RemoveAll(filepath.Join(oldDir, "transient")); err != nil {
		return moved, err
	}
	return moved, removeIfEmpty(oldDir)
}

// moveIfPresent renames from to to when from exists. It refuses to run when
// both exist: that is no state a move leaves, so a person must look.
func moveIfPresent(from, to string) (bool, error) {
	if _, err := os.Lstat(from); errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if _, err := os.Lstat(to); err == nil {
		return false, fmt.Errorf("both %s and %s exist; move one aside", from, to)
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	if err := os.Rename(from, to); err != nil {
		return false, err
	}
	if testHookLayoutMove != nil {
		if err := testHookLayoutMove(); err != nil {
			return true, err
		}
	}
	return true, syncDir(filepath.Dir(from))
}

// testHookLayoutMove, when set by a test, runs after each rename of the
// layout move; an error stops the move there, as a crash would.
var testHookLayoutMove func() error

// removeIfEmpty removes dir if it is an empty directory; anything still in
// it is no definition's, so not the broker's to delete (logLegacyLeftovers
// names it).
func removeIfEmpty(dir string) error {
	err := os.Remove(dir)
	if err == nil || errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		return nil
	}
	return err
}

// logLegacyLeftovers warns about every entry of data/vhosts that is not a
// layout 2 vhost directory: layout 1 files no definition names any more.
func logLegacyLeftovers(vhostsDir string, log *slog.Logger) {
	ents, err := os.ReadDir(vhostsDir)
	if err != nil {
		log.Warn("listing the vhosts directory after the layout move", "err", err)
		return
	}
	for _, e := range ents {
		if !isNameDir(e.Name()) {
			log.Warn("left in place: no vhost or queue in meta.db owns it (layout 1 leftover)", "path", filepath.Join(vhostsDir, e.Name()))
		}
	}
}

// isNameDir reports whether s has the form of a nameDir result.
func isNameDir(s string) bool {
	if len(s) != 2*32 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
