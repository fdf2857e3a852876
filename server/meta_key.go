package server

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// meta.db keys are tuples of names: (vhost, queue), (user, vhost,
// exchange), (vhost, source, kind, destination, routing key, arguments).
// Names are bytes and may hold NUL (RabbitMQ accepts "q\x00x" as a queue
// name), and binding arguments are an encoded table full of NULs, so joining
// the parts with NUL (as layout 2 and earlier did) gave two definitions the
// same key when they differed only in where a NUL fell. metaKey encodes a
// tuple injectively instead, as FoundationDB's tuple layer does:
//
//   - every NUL inside a part is written as NUL 0xFF;
//   - parts are separated by NUL 0x01.
//
// So a NUL in a key is always followed by 0xFF (a byte of the name) or 0x01
// (the end of a part), and the parts can be read back exactly. A key of
// names without NUL is still the names in order, readable in a dump; keys
// sort as their tuples do, part by part, since 0x01 sorts below 0xFF
// and a part's end below any byte that could continue it; and the keys of
// every tuple starting with given parts are the keys with metaKeyPrefix of
// those parts as a prefix, which is how a vhost's or a user's definitions are
// deleted.
const (
	keyEscape     = 0x00
	keyEscapedNUL = 0xFF
	keySeparator  = 0x01
)

// metaKey returns the meta.db key of the tuple parts.
func metaKey(parts ...string) []byte {
	n := len(parts)
	for _, p := range parts {
		n += len(p) + 1
	}
	b := make([]byte, 0, n)
	for i, p := range parts {
		if i > 0 {
			b = append(b, keyEscape, keySeparator)
		}
		b = appendKeyPart(b, p)
	}
	return b
}

// metaKeyPrefix returns the prefix of the keys of every tuple that starts
// with parts and has more parts after them.
func metaKeyPrefix(parts ...string) []byte {
	return append(metaKey(parts...), keyEscape, keySeparator)
}

func appendKeyPart(b []byte, p string) []byte {
	for {
		i := strings.IndexByte(p, 0)
		if i < 0 {
			return append(b, p...)
		}
		b = append(b, p[:i]...)
		b = append(b, keyEscape, keyEscapedNUL)
		p = p[i+1:]
	}
}

// errKeyEncoding means a key is not a metaKey encoding: a NUL followed by
// neither 0xFF nor 0x01.
var errKeyEncoding = errors.New("key is not an encoded tuple")

// splitMetaKey returns the parts of a key metaKey made.
func splitMetaKey(k []byte) ([]string, error) {
	var parts []string
	var part []byte
	for i := 0; i < len(k); i++ {
		if k[i] != keyEscape {
			part = append(part, k[i])
			continue
		}
		if i+1 == len(k) {
			return nil, errKeyEncoding
		}
		i++
		switch k[i] {
		case keyEscapedNUL:
			part = append(part, 0)
		case keySeparator:
			parts = append(parts, string(part))
			part = part[:0]
		default:
			return nil, errKeyEncoding
		}
	}
	return append(parts, string(part)), nil
}

// splitMetaKeyN is splitMetaKey for a key of n parts.
func splitMetaKeyN(k []byte, n int) ([]string, error) {
	parts, err := splitMetaKey(k)
	if err != nil {
		return nil, err
	}
	if len(parts) != n {
		return nil, fmt.Errorf("key has %d parts, not %d", len(parts), n)
	}
	return parts, nil
}

// nulJoinedParts splits a key of layout 2 and earlier, its n parts joined
// with NUL, as those layouts' readers did: at the first n-1 NULs (the last
// part of a binding's key, its encoded arguments, holds NULs of its own).
func nulJoinedParts(k []byte, n int) ([]string, bool) {
	raw := bytes.SplitN(k, []byte{0}, n)
	if len(raw) != n {
		return nil, false
	}
	parts := make([]string, n)
	for i, p := range raw {
		parts[i] = string(p)
	}
	return parts, true
}

// keyedBuckets are the buckets of meta.db with, for each, the number of
// parts of its keys and the parts a record's fields make.
var keyedBuckets = []struct {
	bucket []byte
	n      int
	parts  func(key, val []byte) ([]string, error)
}{
	{bucketVhosts, 1, recordParts(func(v *metaVhost) ([]string, error) { return []string{v.Name}, nil })},
	{bucketUsers, 1, recordParts(func(u *metaUser) ([]string, error) { return []string{u.Name}, nil })},
	{bucketPermissions, 2, recordParts(func(p *metaPermission) ([]string, error) { return []string{p.User, p.Vhost}, nil })},
	{bucketTopicPermissions, 3, recordParts(func(tp *TopicPermission) ([]string, error) {
		return []string{tp.User, tp.Vhost, tp.Exchange}, nil
	})},
	{bucketExchanges, 2, recordParts(func(e *metaExchange) ([]string, error) { return []string{e.Vhost, e.Name}, nil })},
	{bucketQueues, 2, recordParts(func(q *metaQueue) ([]string, error) { return []string{q.Vhost, q.Name}, nil })},
	{bucketBindings, 6, recordParts(func(b *metaBinding) ([]string, error) {
		args, err := bytesTable(b.Arguments)
		if err != nil {
			return nil, fmt.Errorf("binding arguments: %w", err)
		}
		return []string{b.Vhost, b.Source, b.DestinationType, b.Destination, b.RoutingKey, canonicalArgs(args)}, nil
	})},
	{bucketPolicies, 3, recordParts(func(p *metaPolicy) ([]string, error) {
		return splitMetaKey(policyMetaKey(p.Vhost, p.Name, p.Operator))
	})},
	{bucketParameters, 3, recordParts(func(p *metaParameter) ([]string, error) {
		return []string{p.Vhost, p.Component, p.Name}, nil
	})},
	{bucketGlobals, 1, recordParts(func(p *metaParameter) ([]string, error) { return []string{p.Name}, nil })},
}

// recordParts decodes a record into a T and returns the key parts fields
// makes of it.
func recordParts[T any](fields func(*T) ([]string, error)) func(key, val []byte) ([]string, error) {
	return func(key, val []byte) ([]string, error) {
		var t T
		if err := decodeRecord(key, val, &t); err != nil {
			return nil, err
		}
		return fields(&t)
	}
}

// testHookMetaKeys, when set by a test, runs inside the transaction that
// moves meta.db's keys (committed false; an error rolls it back, as a crash
// would) and after it commits (committed true; an error stops the start
// before data/layout records the move).
var testHookMetaKeys func(committed bool) error

// migrateMetaKeys moves every record of meta.db from its layout 2 key (its
// parts joined with NUL) to its metaKey, in one transaction: a crash leaves
// meta.db wholly as it was or wholly moved. A record already under its
// metaKey stays, so a start that dies after the commit and before
// data/layout says so moves nothing the next time. It returns how many
// records moved. A record that matches neither of its keys is damaged, as
// loadDefinitions would find.
func migrateMetaKeys(m *metaStore) (int, error) {
	moved := 0
	err := m.db.Update(func(tx *bolt.Tx) error {
		for _, kb := range keyedBuckets {
			n, err := migrateBucketKeys(tx.Bucket(kb.bucket), kb.n, kb.parts)
			if err != nil {
				return fmt.Errorf("%s %w", kb.bucket, err)
			}
			moved += n
		}
		if testHookMetaKeys != nil {
			return testHookMetaKeys(false)
		}
		return nil
	})
	if err == nil && testHookMetaKeys != nil {
		err = testHookMetaKeys(true)
	}
	return moved, err
}

// migrateBucketKeys moves one bucket's records to their metaKeys. The old
// keys are all deleted before the new ones are written: a new key may be
// another record's old one (("a", "x") is "a\x00\x01x", as ("a", "\x01x")
// was).
func migrateBucketKeys(b *bolt.Bucket, n int, fields func(key, val []byte) ([]string, error)) (int, error) {
	type move struct{ from, to, val []byte }
	var moves []move
	err := b.ForEach(func(k, v []byte) error {
		to, err := newMetaKey(k, v, n, fields)
		if err != nil {
			return fmt.Errorf("%q: %w", k, err)
		}
		if !bytes.Equal(to, k) {
			moves = append(moves, move{bytes.Clone(k), to, resumRecord(to, v)})
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, mv := range moves {
		if err := b.Delete(mv.from); err != nil {
			return 0, err
		}
	}
	for _, mv := range moves {
		if b.Get(mv.to) != nil {
			return 0, fmt.Errorf("%q: its new key %q is taken", mv.from, mv.to)
		}
		if err := b.Put(mv.to, mv.val); err != nil {
			return 0, err
		}
	}
	return len(moves), nil
}

// newMetaKey returns the metaKey of the record val stored under key: key
// itself when it is one already, else the tuple the NUL-joined key and the
// record's fields agree on. The fields are exact unless the record was
// written before "_raw" (then names JSON made lossy come from the key).
func newMetaKey(key, val []byte, n int, fields func(key, val []byte) ([]string, error)) ([]byte, error) {
	f, err := fields(key, val)
	if err != nil {
		return nil, err
	}
	if parts, err := splitMetaKeyN(key, n); err == nil && partsMatch(parts, f) {
		return key, nil
	}
	if bytes.Equal(key, nulJoin(f)) {
		return metaKey(f...), nil
	}
	if parts, ok := nulJoinedParts(key, n); ok && partsMatch(parts, f) {
		return metaKey(parts...), nil
	}
	return nil, errors.New("record does not match its key")
}

// nulJoin is the layout 2 key of parts.
func nulJoin(parts []string) []byte {
	return []byte(strings.Join(parts, "\x00"))
}

// resumRecord returns a summed record with the sum of its JSON under key.
func resumRecord(key, val []byte) []byte {
	js := val
	if hasSum(val) {
		js = val[:len(val)-sumLen]
	}
	return fmt.Appendf(bytes.Clone(js), "\n%08x", recordSum(key, js))
}
