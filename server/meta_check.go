package server

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bbolt trusts its pages: a damaged branch or leaf page makes it panic (an
// assertion, or a fault reading past the mapping), or loop for as many pages
// as a flipped overflow count says, and it sums only its two meta pages. So
// meta.db is checked before the broker uses it: checkBoltFile walks the
// file's page tree as bbolt's format defines it, with every offset bounded,
// before bbolt reads a byte of it; then bolt.Open and a read of every key and
// value run with faults turned into panics and every panic recovered.
// Damage inside a record is caught by the record's checksum
// (meta_record.go). A damaged file stops start-up with ErrMetaUnreadable
// naming it; it is never rewritten.

// errMetaEmpty is a meta.db of zero bytes. bbolt would take it for a new file
// and write an empty store, and the broker would start as on first boot,
// with guest/guest as administrator again.
var errMetaEmpty = errors.New("the file is empty (0 bytes): it was truncated, or its first write never completed; remove it only if this data directory holds no definitions")

// openCheckedBolt opens and checks the bbolt file at path.
func openCheckedBolt(path string) (*bolt.DB, error) {
	if fi, err := os.Stat(path); err == nil && fi.Size() == 0 {
		return nil, errMetaEmpty
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := checkBoltFile(path); err != nil {
		return nil, err
	}
	var db *bolt.DB
	err := guardBolt(func() (err error) {
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
		return err
	})
	if err != nil {
		// A panic inside bolt.Open leaves its file open; start-up stops anyway.
		return nil, err
	}
	if err := guardBolt(func() error { return db.View(readEveryRecord) }); err != nil {
		return nil, errors.Join(err, db.Close()) // View rolled its transaction back
	}
	return db, nil
}

// guardBolt runs f with memory faults turned into panics, and turns a panic
// into an error.
func guardBolt(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the file is damaged (bbolt: %v)", r)
		}
	}()
	return f()
}

// readEveryRecord reads every key and value of every bucket, so each page
// in use is read once under guardBolt before anything else reads it.
func readEveryRecord(tx *bolt.Tx) error {
	return tx.ForEach(func(_ []byte, b *bolt.Bucket) error { return readBucket(b) })
}

func readBucket(b *bolt.Bucket) error {
	c := b.Cursor()
	var sum uint32 // only makes the reads happen
	for k, v := c.First(); k != nil; k, v = c.Next() {
		sum = crc32.Update(sum, crc32.IEEETable, k)
		if v != nil {
			sum = crc32.Update(sum, crc32.IEEETable, v)
			continue
		}
		if child := b.Bucket(k); child != nil {
			if err := readBucket(child); err != nil {
				return err
			}
		}
	}
	_ = sum
	return nil
}
