package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The data directory (layout 3):
//
//	data/meta.db                               definitions (bbolt), keyed by metaKey
//	data/layout                                "3": the layout of data/vhosts and meta.db's keys
//	data/vhosts/<h>/.name                      the vhost's name, byte for byte
//	data/vhosts/<h>/msgstore/                  the vhost's message store
//	data/vhosts/<h>/queues/<h>/.name, <n>.qi   a durable queue's index
//	data/vhosts/<h>/streams/<h>/.name, ...     a stream's log
//	data/vhosts/<h>/transient/                 paged transient queues, wiped at start
//
// where <h> is nameDir of the vhost's or the queue's name: the lowercase hex
// SHA-256 of its bytes. AMQP names are not file names: ".", "..", "/", names
// longer than a file name may be, names equal but for case on a
// case-insensitive file system, invalid UTF-8. A name never becomes a path
// step, so none can address another object's files or the layout's own
// directories, and every name, whatever its length, gets a fixed 64-byte
// directory of digits and lowercase letters. SHA-256 makes two names sharing
// a directory as unlikely as a collision of the hash; the .name file inside
// (as RabbitMQ keeps a .vhost file in its hashed vhost directories) lets a
// person see whose directory it is, and is checked at every open so a
// directory moved under another name is refused instead of mixed up.
// Layout 1 percent-encoded the names, and layouts 1 and 2 joined the parts
// of meta.db's keys with NUL, which two names could share (meta_key.go);
// migrateLayout moves both to layout 3. A broker that knows only layout 2
// refuses a layout 3 directory instead of misreading its keys.

// layoutVersion is what data/layout holds once the vhosts directory is in
// the layout nameDir defines and meta.db's keys are metaKey's.
const layoutVersion = "3"

// nameFile is the file in every hashed directory that records its name.
const nameFile = ".name"

// nameDir is the directory name of a vhost, queue or stream name.
func nameDir(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}

// vhostDir is where vhost's files live.
func vhostDir(dataDir, vhost string) string {
	return filepath.Join(dataDir, "vhosts", nameDir(vhost))
}

// makeNamedDir creates dir (and its parents) for name, records the name in
// it, and refuses a directory that records another name. The record is not
// synced: it is rewritten whenever it is missing, or cut short (a prefix of
// the name, as a crash may leave it on some file systems), and what it
// guards against (a directory moved by hand, a SHA-256 collision) does not
// come from a crash.
func makeNamedDir(dir, name string) error {
	path := filepath.Join(dir, nameFile)
	got, err := os.ReadFile(path)
	switch {
	case err == nil && string(got) == name:
		return nil
	case err == nil && !strings.HasPrefix(name, string(got)):
		return fmt.Errorf("directory %s belongs to %q, not %q (see its %s file)", dir, got, name, nameFile)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return writeFileAtomic(path, []byte(name), false)
}

// writeFileAtomic writes data to path through a temporary file and a
// rename, so readers see the old file or the new one; with sync set the new
// file and the rename are durable when it returns.
func writeFileAtomic(path string, data []byte, sync bool) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return errors.Join(err, removeIfExists(tmp))
	}
	if !sync {
		return nil
	}
	return syncDir(filepath.Dir(path))
}

// syncDir makes the creations, renames and removals in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// readLayout returns the layout data/layout records: "" when it is missing.
func readLayout(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "layout"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return string(bytes.TrimSpace(b)), err
}
