package msgstore

import (
	"bytes"
	"errors"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestMsgStoreRecordRoundTrip(t *testing.T) {
	cases := []Record{
		{},
		{Offset: 1<<63 + 5, Timestamp: -1, Flags: 0xff},
		{Exchange: bytes.Repeat([]byte("e"), 255), RoutingKey: bytes.Repeat([]byte("r"), 255)},
		mkRecord(3, 0),
		mkRecord(4, 1),
		mkRecord(5, 100_000),
	}
	for i, r := range cases {
		b, err := AppendRecord([]byte("prefix"), &r)
		if err != nil {
			t.Fatalf("case %d: encode: %v", i, err)
		}
		enc := b[len("prefix"):]
		if len(enc) != r.EncodedSize() {
			t.Fatalf("case %d: encoded %d bytes, EncodedSize %d", i, len(enc), r.EncodedSize())
		}
		got, n, err := DecodeRecord(append(enc, "trailing"...))
		if err != nil {
			t.Fatalf("case %d: decode: %v", i, err)
		}
		if n != len(enc) || got.Offset != r.Offset || !sameRecord(got, r) {
			t.Fatalf("case %d: round trip gave %+v (n=%d), want %+v", i, got, n, r)
		}
		for cut := 0; cut < len(enc); cut += 1 + len(enc)/50 {
			if _, _, err := DecodeRecord(enc[:cut]); !errors.Is(err, ErrTruncated) {
				t.Fatalf("case %d: decode of %d/%d bytes: %v, want ErrTruncated", i, cut, len(enc), err)
			}
		}
	}
}

func TestMsgStoreRecordDetectsEveryFlippedByte(t *testing.T) {
	r := mkRecord(9, 40)
	enc, err := AppendRecord(nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	for i := range enc {
		bad := bytes.Clone(enc)
		bad[i] ^= 0x10
		if _, _, err := DecodeRecord(bad); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
			t.Fatalf("flipping byte %d: decode returned %v", i, err)
		}
	}
}

func TestMsgStoreRecordLimits(t *testing.T) {
	r := Record{Exchange: make([]byte, 256)}
	if _, err := AppendRecord(nil, &r); !errors.Is(err, ErrFieldTooLong) {
		t.Fatalf("256-byte exchange: %v", err)
	}
	r = Record{RoutingKey: make([]byte, 256)}
	if _, err := AppendRecord(nil, &r); !errors.Is(err, ErrFieldTooLong) {
		t.Fatalf("256-byte routing key: %v", err)
	}
	// A length word below the fixed part, or beyond the format limit, is impossible.
	for _, n := range []uint32{0, recordFixedSize - 1, MaxRecordLimit} {
		hdr := []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n), 0, 0, 0, 0}
		if _, _, err := DecodeRecord(hdr); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("length %d: %v, want ErrCorrupt", n, err)
		}
	}
}

func TestMsgStoreConfigValidate(t *testing.T) {
	good := DefaultConfig(t.TempDir())
	if err := good.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := []func(*Config){
		func(c *Config) { c.Dir = "" },
		func(c *Config) { c.SegmentSize = 10 },
		func(c *Config) { c.SegmentSize = MaxSegmentSize + 1 },
		func(c *Config) { c.MaxRecordSize = 1 },
		func(c *Config) { c.IndexInterval = 1 },
		func(c *Config) { c.Flush = 9 },
		func(c *Config) { c.Flush, c.FlushInterval = FlushInterval, 0 },
		func(c *Config) { c.Flush, c.FlushMessages = FlushMessages, 0 },
		func(c *Config) { c.CompactDeadRatio = 0 },
		func(c *Config) { c.CompactDeadRatio = 1.5 },
		func(c *Config) { c.CompactBytesPerSec = -1 },
		func(c *Config) { c.Logger = nil },
	}
	for i, mut := range bad {
		c := good
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("case %d: Validate = %v, want ErrInvalidConfig", i, err)
		}
		if _, err := OpenLog(c); err == nil {
			t.Errorf("case %d: OpenLog accepted an invalid config", i)
		}
	}
	for _, p := range []FlushPolicy{FlushFsync, FlushInterval, FlushMessages, FlushOS} {
		txt, err := p.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var q FlushPolicy
		if err := q.UnmarshalText(txt); err != nil || q != p {
			t.Fatalf("policy %v: text %q parsed as %v, %v", p, txt, q, err)
		}
	}
	if _, err := ParseFlushPolicy("sometimes"); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("ParseFlushPolicy accepted a bad name: %v", err)
	}
}

// TestMsgStoreImportsOnlyStdlib keeps the package a leaf: no module imports.
func TestMsgStoreImportsOnlyStdlib(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s; msgstore must import only the standard library", name, path)
			}
		}
	}
}
