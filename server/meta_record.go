package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// meta.db keeps each definition as a JSON object. JSON strings are UTF-8,
// and encoding/json replaces each invalid byte with U+FFFD, but names are
// bytes: the management API accepts a vhost "%FF%FE" as RabbitMQ does, and
// that vhost must come back from a restart under its own name, not renamed
// and cut off from its files. So a record whose string fields are not all
// valid UTF-8 carries their exact bytes as well, base64-encoded in a "_raw"
// object keyed by the fields' JSON names. Records of valid names are as they
// always were.

// A record ends with a newline and the CRC-32C of its key and its JSON, in
// 8 hex digits: bbolt sums only its meta pages, and a flipped byte in a
// record that still decodes would load a wrong definition. Records written
// before the sum existed have none and are read as they are; a flip cannot
// make a summed record look like one of those, as the JSON would then end
// in a stray word.
const sumLen = 1 + 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func recordSum(key, js []byte) uint32 {
	return crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, js)
}

// hasSum reports whether a stored record ends in a sum.
func hasSum(val []byte) bool {
	n := len(val) - sumLen
	return n >= 0 && val[n] == '\n'
}

// sumLegacyRecords gives every record written before records had sums its
// sum, in one transaction, so the definitions of an older data directory
// are guarded from then on. Only a record that is valid JSON is summed: a
// damaged summed record never is, and stays damaged.
func sumLegacyRecords(db *bolt.DB) error {
	type record struct{ k, v []byte }
	var legacy map[string][]record
	err := db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				if v != nil && !hasSum(v) && json.Valid(v) {
					if legacy == nil {
						legacy = make(map[string][]record)
					}
					js := append([]byte(nil), v...)
					legacy[string(name)] = append(legacy[string(name)], record{append([]byte(nil), k...), fmt.Appendf(js, "\n%08x", recordSum(k, js))})
				}
				return nil
			})
		})
	})
	if err != nil || legacy == nil {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		for name, recs := range legacy {
			b := tx.Bucket([]byte(name))
			for _, r := range recs {
				if err := b.Put(r.k, r.v); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// rawField is the JSON member that holds the exact bytes of invalid UTF-8
// string fields.
const rawField = "_raw"

// encodeRecord encodes a record struct for meta.db under key.
func encodeRecord(key []byte, v any) ([]byte, error) {
	js, err := recordJSON(v)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(js, "\n%08x", recordSum(key, js)), nil
}

func recordJSON(v any) ([]byte, error) {
	val, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	raw := make(map[string][]byte)
	rv := reflect.Indirect(reflect.ValueOf(v))
	if rv.Kind() != reflect.Struct {
		return val, nil
	}
	for i := range rv.NumField() {
		f, fv := rv.Type().Field(i), rv.Field(i)
		if f.IsExported() && !f.Anonymous && fv.Kind() == reflect.String && !utf8.ValidString(fv.String()) {
			raw[jsonName(f)] = []byte(fv.String())
		}
	}
	if len(raw) == 0 {
		return val, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(val, &obj); err != nil {
		return nil, err
	}
	if obj[rawField], err = json.Marshal(raw); err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

// decodeRecord checks the sum of a meta.db record and decodes it into the
// struct t points to, restoring the exact bytes of its invalid UTF-8 fields.
func decodeRecord(key, val []byte, t any) error {
	if n := len(val) - sumLen; hasSum(val) {
		want, err := strconv.ParseUint(string(val[n+1:]), 16, 32)
		if err != nil {
			return fmt.Errorf("record checksum %q: %w", val[n+1:], err)
		}
		if got := recordSum(key, val[:n]); got != uint32(want) {
			return fmt.Errorf("record checksum mismatch (%08x, stored %08x): the record is damaged", got, want)
		}
		val = val[:n]
	}
	if err := json.Unmarshal(val, t); err != nil {
		return err
	}
	if !bytes.Contains(val, []byte(`"`+rawField+`"`)) {
		return nil
	}
	var side struct {
		Raw map[string][]byte `json:"_raw"`
	}
	if err := json.Unmarshal(val, &side); err != nil {
		return err
	}
	rv := reflect.ValueOf(t).Elem()
	for name, b := range side.Raw {
		f, ok := fieldByJSONName(rv, name)
		if !ok {
			return fmt.Errorf("%s names no string field %q", rawField, name)
		}
		f.SetString(string(b))
	}
	return nil
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

func fieldByJSONName(rv reflect.Value, name string) (reflect.Value, bool) {
	if rv.Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	for i := range rv.NumField() {
		f := rv.Type().Field(i)
		if f.IsExported() && !f.Anonymous && rv.Field(i).Kind() == reflect.String && jsonName(f) == name {
			return rv.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// keyedRecord is a record whose meta.db key is metaKey of some of its
// fields. Checking the two against each other finds damage that still
// decodes, and the key restores names stored before "_raw" existed.
type keyedRecord interface {
	keyFields() []*string
}

func (v *metaVhost) keyFields() []*string      { return []*string{&v.Name} }
func (u *metaUser) keyFields() []*string       { return []*string{&u.Name} }
func (p *metaPermission) keyFields() []*string { return []*string{&p.User, &p.Vhost} }
func (e *metaExchange) keyFields() []*string   { return []*string{&e.Vhost, &e.Name} }
func (q *metaQueue) keyFields() []*string      { return []*string{&q.Vhost, &q.Name} }

// checkKey verifies that r's fields make its key. A record whose names JSON
// made lossy (U+FFFD for each invalid byte) takes them from the key.
func checkKey(key []byte, r keyedRecord) error {
	fields := r.keyFields()
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = *f
	}
	if bytes.Equal(key, metaKey(parts...)) {
		return nil
	}
	exact, err := splitMetaKeyN(key, len(fields))
	if err != nil || !partsMatch(exact, parts) {
		return fmt.Errorf("record does not match its key")
	}
	for i, p := range exact {
		*fields[i] = p
	}
	return nil
}

// partsMatch reports whether a key's exact parts are the record's fields,
// each as it is or as JSON made it lossy.
func partsMatch(exact, fields []string) bool {
	if len(exact) != len(fields) {
		return false
	}
	for i, p := range exact {
		if p != fields[i] && lossyJSON(p) != fields[i] {
			return false
		}
	}
	return true
}

// lossyJSON is s as a JSON string round trip returns it.
func lossyJSON(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		return s
	}
	var out string
	if err := json.Unmarshal(b, &out); err != nil {
		return s
	}
	return out
}
