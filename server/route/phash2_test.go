package route

import (
	"bufio"
	"encoding/hex"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// termCases builds, for each Erlang term in testdata/phash2_terms.tsv, the same
// term through termHash. The expected hashes in the file were recorded from
// RabbitMQ's node (see testdata/README.md).
var termCases = map[string]func(t *termHash){
	"undefined":                         func(t *termHash) { t.atom(atomUndefined) },
	"true":                              func(t *termHash) { t.atom(atomTrue) },
	"false":                             func(t *termHash) { t.atom(atomFalse) },
	"[]":                                func(t *termHash) { t.nil() },
	"{}":                                func(t *termHash) { t.tuple(0) },
	"<<>>":                              func(t *termHash) { t.binary("") },
	"0":                                 func(t *termHash) { t.int(0) },
	"1":                                 func(t *termHash) { t.int(1) },
	"-1":                                func(t *termHash) { t.int(-1) },
	"134217727":                         func(t *termHash) { t.int(134217727) },
	"134217728":                         func(t *termHash) { t.int(134217728) },
	"-134217728":                        func(t *termHash) { t.int(-134217728) },
	"-134217729":                        func(t *termHash) { t.int(-134217729) },
	"2147483647":                        func(t *termHash) { t.int(2147483647) },
	"-2147483648":                       func(t *termHash) { t.int(-2147483648) },
	"4294967295":                        func(t *termHash) { t.int(4294967295) },
	"1099511627776":                     func(t *termHash) { t.int(1 << 40) },
	"-1099511627776":                    func(t *termHash) { t.int(-1 << 40) },
	"576460752303423487":                func(t *termHash) { t.int(1<<59 - 1) },
	"576460752303423488":                func(t *termHash) { t.int(1 << 59) },
	"9223372036854775807":               func(t *termHash) { t.int(math.MaxInt64) },
	"-9223372036854775808":              func(t *termHash) { t.int(math.MinInt64) },
	"18446744073709551615":              func(t *termHash) { t.uint(math.MaxUint64) },
	"1.5":                               func(t *termHash) { t.float(1.5) },
	"-2.25":                             func(t *termHash) { t.float(-2.25) },
	"0.0":                               func(t *termHash) { t.float(0) },
	"-0.0":                              func(t *termHash) { t.float(math.Copysign(0, -1)) },
	"3.4028234663852886e38":             func(t *termHash) { t.float(math.MaxFloat32) },
	"1.0e-300":                          func(t *termHash) { t.float(1.0e-300) },
	`{longstr, <<"v">>}`:                func(t *termHash) { t.field("v") },
	`{longstr, <<"customer-42">>}`:      func(t *termHash) { t.field("customer-42") },
	"{signedint, 5}":                    func(t *termHash) { t.field(int32(5)) },
	"{signedint, -7}":                   func(t *termHash) { t.field(int32(-7)) },
	"{long, 1099511627776}":             func(t *termHash) { t.field(int64(1 << 40)) },
	"{long, -9223372036854775808}":      func(t *termHash) { t.field(int64(math.MinInt64)) },
	"{byte, -3}":                        func(t *termHash) { t.field(int8(-3)) },
	"{unsignedbyte, 200}":               func(t *termHash) { t.field(uint8(200)) },
	"{short, -300}":                     func(t *termHash) { t.field(int16(-300)) },
	"{unsignedshort, 65535}":            func(t *termHash) { t.field(uint16(65535)) },
	"{unsignedint, 4294967295}":         func(t *termHash) { t.field(uint32(math.MaxUint32)) },
	"{bool, true}":                      func(t *termHash) { t.field(true) },
	"{bool, false}":                     func(t *termHash) { t.field(false) },
	"{double, 1.5}":                     func(t *termHash) { t.field(1.5) },
	"{float, 0.10000000149011612}":      func(t *termHash) { t.field(float32(0.1)) },
	"{decimal, {2, 314}}":               func(t *termHash) { t.field(amqp.Decimal{Scale: 2, Value: 314}) },
	"{decimal, {0, 4294967295}}":        func(t *termHash) { t.field(amqp.Decimal{Value: -1}) },
	"{timestamp, 1700000000}":           func(t *termHash) { t.field(time.Unix(1700000000, 0).UTC()) },
	"{timestamp, 18446744073709551615}": func(t *termHash) { t.field(time.Unix(-1, 0).UTC()) },
	"{binary, <<1,2,3>>}":               func(t *termHash) { t.field([]byte{1, 2, 3}) },
	"{void, undefined}":                 func(t *termHash) { t.field(nil) },
	"{array, []}":                       func(t *termHash) { t.field([]any{}) },
	`{array, [{longstr, <<"a">>}, {signedint, 1}]}`: func(t *termHash) { t.field([]any{"a", int32(1)}) },
	"{table, []}": func(t *termHash) { t.field(amqp.Table{}) },
	`{table, [{<<"k">>, longstr, <<"v">>}, {<<"n">>, long, 3}]}`: func(t *termHash) {
		t.field(amqp.Table{"k": "v", "n": int64(3)})
	},
	`{array, [{array, [{bool, true}]}, {table, [{<<"x">>, void, undefined}]}]}`: func(t *termHash) {
		t.field([]any{[]any{true}, amqp.Table{"x": nil}})
	},
	`[<<"rk">>]`: func(t *termHash) { t.binary("rk"); t.nil() },
	`[<<"rk">>, <<"cc1">>, <<"bcc">>]`: func(t *termHash) {
		t.binary("rk")
		t.binary("cc1")
		t.binary("bcc")
		t.nil()
	},
	`<<"1700000000">>`: func(t *termHash) { t.binary("1700000000") },
	"correlation_id":   func(t *termHash) { t.atom(atomHash("correlation_id")) },
	"message_id":       func(t *termHash) { t.atom(atomHash("message_id")) },
	"longstr":          func(t *termHash) { t.atom(atomLongstr) },
	"signedint":        func(t *termHash) { t.atom(atomSignedint) },
	"x_abcdefghijklmnopqrstuvwxyz_0123456789": func(t *termHash) { t.atom(atomHash("x_abcdefghijklmnopqrstuvwxyz_0123456789")) },
}

func TestPhash2MatchesRecordedTerms(t *testing.T) {
	f, err := os.Open("testdata/phash2_terms.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		term, want, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			t.Fatalf("bad line %q", sc.Text())
		}
		build := termCases[term]
		if build == nil {
			t.Errorf("no Go construction for %s", term)
			continue
		}
		var h termHash
		build(&h)
		if got := strconv.FormatUint(uint64(h.sum()), 10); got != want {
			t.Errorf("phash2(%s) = %s, RabbitMQ's node says %s", term, got, want)
		}
		seen++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != len(termCases) {
		t.Errorf("checked %d terms, have %d constructions", seen, len(termCases))
	}
}

// TestJumpBucketMatchesRecordedKeys checks phash2 of 1,006 routing keys and the
// bucket the plugin picks for each among 2 to 100,000 buckets.
func TestJumpBucketMatchesRecordedKeys(t *testing.T) {
	f, err := os.Open("testdata/chash_jump.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sizes := []int64{2, 3, 5, 6, 10, 100, 1000, 100000}
	lines := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), " ") // the empty key is an empty first field
		if len(fields) != 2+len(sizes) {
			t.Fatalf("bad line %q", sc.Text())
		}
		key, err := hex.DecodeString(fields[0])
		if err != nil {
			t.Fatal(err)
		}
		h := phash2Binary(string(key))
		if want := fields[1]; strconv.FormatUint(uint64(h), 10) != want {
			t.Fatalf("phash2(%q) = %d, RabbitMQ's node says %s", key, h, want)
		}
		for i, n := range sizes {
			if got, want := strconv.FormatInt(jumpBucket(h, n), 10), fields[2+i]; got != want {
				t.Errorf("key %q, %d buckets: bucket %s, RabbitMQ's node says %s", key, n, got, want)
			}
		}
		lines++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if lines != 1006 {
		t.Errorf("read %d keys, want 1006", lines)
	}
}
