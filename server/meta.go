package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/cluster/replica"
)

// ErrMetaUnreadable means data/meta.db could not be opened or read; the broker
// refuses to start rather than run with half its definitions.
var ErrMetaUnreadable = errors.New("server: metadata store unreadable")

// Buckets of meta.db. Every key is metaKey of the definition's names
// (meta_key.go).
var (
	bucketVhosts      = []byte("vhosts")
	bucketUsers       = []byte("users")
	bucketPermissions = []byte("permissions")
	bucketExchanges   = []byte("exchanges")
	bucketQueues      = []byte("queues")
	bucketBindings    = []byte("bindings")
	bucketPolicies    = []byte("policies")
	// bucketTopicPermissions holds TopicPermission values by user, vhost, exchange.
	bucketTopicPermissions = []byte("topic_permissions")
	// bucketParameters holds runtime parameters by vhost, component, name.
	bucketParameters = []byte("parameters")
	// bucketGlobals holds global parameters, cluster_name among them, by name.
	bucketGlobals = []byte("global_parameters")
	allBuckets    = [][]byte{bucketVhosts, bucketUsers, bucketPermissions, bucketExchanges, bucketQueues, bucketBindings,
		bucketPolicies, bucketTopicPermissions, bucketParameters, bucketGlobals, bucketState}
)

// metaStore keeps durable definitions — vhosts, users, permissions, durable
// exchanges and queues, bindings between durable objects, policies,
// parameters — in bbolt. Every change (a Command) is one fsynced
// transaction; definitions change rarely.
type metaStore struct {
	db *bolt.DB
}

// metaVhost is a vhost with its metadata; a vhost without metadata is
// stored as {"name": ...} alone, as before metadata was kept.
type metaVhost struct {
	Name             string   `json:"name"`
	Description      string   `json:"description,omitempty"`
	Tags             []string `json:"tags,omitempty"`
	DefaultQueueType string   `json:"default_queue_type,omitempty"`
	Tracing          bool     `json:"tracing,omitempty"`
}

func newMetaVhost(name string, m VhostMeta) metaVhost {
	return metaVhost{Name: name, Description: m.Description, Tags: m.Tags, DefaultQueueType: m.DefaultQueueType, Tracing: m.Tracing}
}

func (v metaVhost) vhostMeta() VhostMeta {
	return VhostMeta{Description: v.Description, Tags: v.Tags, DefaultQueueType: v.DefaultQueueType, Tracing: v.Tracing}
}

// metaParameter is a runtime parameter (key vhost, component, name) or,
// with Component and Vhost empty, a global one (key name). Value is its
// JSON, decoded with numbers kept exact.
type metaParameter struct {
	Vhost     string          `json:"vhost,omitempty"`
	Component string          `json:"component,omitempty"`
	Name      string          `json:"name"`
	Value     json.RawMessage `json:"value"`
}

type metaUser struct {
	Name         string   `json:"name"`
	PasswordHash string   `json:"password_hash"`
	Tags         []string `json:"tags"`
	LoopbackOnly bool     `json:"loopback_only"`
	// Limits are the user limits (user_limits.go); absent in files written
	// before Warren had them.
	Limits map[string]int64 `json:"limits,omitempty"`
}

type metaPermission struct {
	User       string `json:"user"`
	Vhost      string `json:"vhost"`
	Permission `json:"permission"`
}

type metaExchange struct {
	Vhost      string `json:"vhost"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	AutoDelete bool   `json:"auto_delete"`
	Internal   bool   `json:"internal"`
	Arguments  []byte `json:"arguments"` // an AMQP field table, so types survive exactly
}

type metaQueue struct {
	Vhost      string `json:"vhost"`
	Name       string `json:"name"`
	AutoDelete bool   `json:"auto_delete"`
	Arguments  []byte `json:"arguments"`
	// Node is the queue's home in a cluster when it is not the node
	// holding this meta.db; absent for a queue homed here.
	Node string `json:"node,omitempty"`
	// Placement is a quorum queue's (DeclareQueue.Placement).
	Placement *replica.Placement `json:"placement,omitempty"`
	// Instance is DeclareQueue.Instance.
	Instance string `json:"instance,omitempty"`
}

type metaBinding struct {
	Vhost           string `json:"vhost"`
	Source          string `json:"source"`
	Destination     string `json:"destination"`
	DestinationType string `json:"destination_type"` // "queue" or "exchange"
	RoutingKey      string `json:"routing_key"`
	Arguments       []byte `json:"arguments"`
}

func openMeta(dir string) (*metaStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMetaUnreadable, err)
	}
	path := filepath.Join(dir, "meta.db")
	db, err := openCheckedBolt(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v (if the file is damaged, restore it from a backup or move it aside to start with empty definitions)", ErrMetaUnreadable, path, err)
	}
	err = createBuckets(db)
	if err == nil {
		err = sumLegacyRecords(db)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%w: %s: %v", ErrMetaUnreadable, path, err), db.Close())
	}
	return &metaStore{db: db}, nil
}

// createBuckets creates the buckets a new meta.db lacks; an existing one is
// not written to.
func createBuckets(db *bolt.DB) error {
	missing := false
	err := db.View(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			missing = missing || tx.Bucket(b) == nil
		}
		return nil
	})
	if err != nil || !missing {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
}

func (m *metaStore) close() error { return m.db.Close() }

// metaBatch is the writes of one definition change, committed together by
// metaStore.commit so a crash leaves meta.db with all of them or none: a
// queue delete and the removal of its bindings, a user and its permissions.
type metaBatch struct {
	ops []metaOp
}

// metaOp is one write of a batch: a put (val set), a delete of key, or, with
// prefix, a delete of every key starting with key whose remainder match
// accepts (nil accepts all).
type metaOp struct {
	bucket, key, val []byte
	prefix           bool
	match            func(rest []byte) bool
}

func (b *metaBatch) put(bucket, key []byte, v any) error {
	val, err := encodeRecord(key, v)
	if err != nil {
		return err
	}
	b.ops = append(b.ops, metaOp{bucket: bucket, key: key, val: val})
	return nil
}

func (b *metaBatch) delete(bucket []byte, keys ...[]byte) {
	for _, k := range keys {
		b.ops = append(b.ops, metaOp{bucket: bucket, key: k})
	}
}

// deletePrefix deletes every key of bucket starting with prefix.
func (b *metaBatch) deletePrefix(bucket, prefix []byte) {
	b.ops = append(b.ops, metaOp{bucket: bucket, key: prefix, prefix: true})
}

// deleteMatching deletes every key of bucket starting with prefix whose
// remainder match accepts.
func (b *metaBatch) deleteMatching(bucket, prefix []byte, match func(rest []byte) bool) {
	b.ops = append(b.ops, metaOp{bucket: bucket, key: prefix, prefix: true, match: match})
}

func (b *metaBatch) empty() bool { return b == nil || len(b.ops) == 0 }

// metaCommitHook, when set, runs before every meta.db write transaction; the
// crash tests set it in their broker process to kill it at the n-th write.
var metaCommitHook func()

// commit writes the batch in one fsynced transaction. An empty batch writes
// nothing.
func (m *metaStore) commit(b *metaBatch) error {
	if b.empty() {
		return nil
	}
	if metaCommitHook != nil {
		metaCommitHook()
	}
	return m.db.Update(func(tx *bolt.Tx) error {
		for _, op := range b.ops {
			if err := applyMetaOp(tx.Bucket(op.bucket), op); err != nil {
				return err
			}
		}
		return nil
	})
}

func applyMetaOp(bk *bolt.Bucket, op metaOp) error {
	switch {
	case op.val != nil:
		return bk.Put(op.key, op.val)
	case !op.prefix:
		return bk.Delete(op.key)
	}
	var doomed [][]byte
	c := bk.Cursor()
	k, _ := c.First()
	if len(op.key) > 0 {
		k, _ = c.Seek(op.key)
	}
	for ; k != nil && bytes.HasPrefix(k, op.key); k, _ = c.Next() {
		if op.match == nil || op.match(k[len(op.key):]) {
			doomed = append(doomed, bytes.Clone(k))
		}
	}
	for _, k := range doomed {
		if err := bk.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// put writes one record in its own transaction; definition changes go
// through the apply (apply.go) instead.
func (m *metaStore) put(bucket []byte, key []byte, v any) error {
	var b metaBatch
	if err := b.put(bucket, key, v); err != nil {
		return err
	}
	return m.commit(&b)
}

// each decodes every value of bucket into a fresh T and calls fn.
func metaEach[T any](m *metaStore, bucket []byte, fn func(T) error) error {
	return m.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			var t T
			if err := decodeRecord(k, v, &t); err != nil {
				return fmt.Errorf("%s %q: %w", bucket, k, err)
			}
			if kr, ok := any(&t).(keyedRecord); ok {
				if err := checkKey(k, kr); err != nil {
					return fmt.Errorf("%s %q: %w", bucket, k, err)
				}
			}
			return fn(t)
		})
	})
}

func tableBytes(t amqp.Table) []byte {
	if len(t) == 0 {
		return nil
	}
	return amqp.AppendTable(nil, t)
}

func bytesTable(b []byte) (amqp.Table, error) {
	if len(b) == 0 {
		return nil, nil
	}
	return amqp.DecodeTable(b)
}

// isDurable reports whether a binding endpoint survives restart.
func isDurable(d destination) bool {
	switch d := d.(type) {
	case *Queue:
		return d.durable && !d.exclusive
	case *Exchange:
		return d.durable
	}
	return false
}

// metaFailure is the exception a client gets when a definition cannot be saved.
func metaFailure(method uint32, err error) *amqp.Error {
	return amqp.NewError(amqp.InternalError, method, "could not store the definition durably: %v", err)
}
