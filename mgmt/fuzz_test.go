package mgmt

import (
	"net/url"
	"strings"
	"testing"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/server"
)

// FuzzSplitPath checks that escaped paths split into the segments that
// escaping them again produces.
func FuzzSplitPath(f *testing.F) {
	for _, s := range []string{"/api/queues/%2F/q1", "/api/queues/rabbit%2Fhole/a%2Bb", "/api", "/api/", "/api/x/%25", "/api/%ZZ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		segs, err := splitPath(path)
		if err != nil {
			return
		}
		for _, s := range segs {
			if s == "" {
				continue // "/api//x": an empty name, which no route accepts
			}
			again, err := splitPath("/api/" + url.PathEscape(s))
			if err != nil || len(again) != 1 || again[0] != s {
				t.Fatalf("segment %q does not round-trip: %q %v", s, again, err)
			}
		}
	})
}

// FuzzDecodeObject feeds request bodies through the JSON decoder and the
// JSON → AMQP table → JSON conversion; tables must encode on the wire.
func FuzzDecodeObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"arguments":{"x-max-length":10,"f":1.5,"s":"x","n":null,"a":[1,{"b":true}]}}`, `{"durable":`, `[]`, `{"a":1e400}`, `{"a":-9223372036854775809}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeObject(data, "not_json")
		if err != nil {
			return
		}
		tab, err := body(m).table("arguments")
		if err != nil || tab == nil {
			return
		}
		wire := amqp.AppendTable(nil, tab)
		back, err := amqp.DecodeTable(wire)
		if err != nil {
			t.Fatalf("table from JSON does not decode: %v", err)
		}
		_ = tableJSON(back)
	})
}

// FuzzParseDefinitions checks that no definitions file makes the parser panic.
func FuzzParseDefinitions(f *testing.F) {
	f.Add([]byte(`{"users":[{"name":"u","password_hash":"","tags":"a,b"}],"vhosts":[{"name":"/"}],"queues":[{"name":"q","vhost":"/","arguments":{}}]}`))
	f.Add([]byte(`{"parameters":[{"component":"operator_policy","vhost":"/","name":"p","value":{"pattern":".*","definition":{"max-length":1}}}]}`))
	f.Add([]byte(`{"bindings":[{"source":1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeObject(data, "failed_to_parse_json")
		if err != nil {
			return
		}
		if _, err := parseDefinitions(m); err != nil && err.Error() == "" {
			t.Fatal("empty error")
		}
	})
}

// FuzzParseProperties checks that accepted publish properties encode and
// decode on the wire with the same flags.
func FuzzParseProperties(f *testing.F) {
	f.Add([]byte(`{"delivery_mode":2,"headers":{"h":1},"expiration":"100","priority":3}`))
	f.Add([]byte(`{"expiration":60000,"timestamp":5,"content_type":"text/plain"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeObject(data, "not_json")
		if err != nil {
			return
		}
		p, err := parseProperties(m)
		if err != nil {
			return
		}
		var back amqp.Properties
		if err := back.Decode(p.AppendTo(nil)); err != nil {
			t.Fatalf("properties do not decode: %v", err)
		}
		if back.Flags != p.Flags {
			t.Fatalf("flags %x became %x", p.Flags, back.Flags)
		}
	})
}

// FuzzPropertiesKey checks that a binding is found by its properties_key
// and by the Location form of it, whatever its routing key.
func FuzzPropertiesKey(f *testing.F) {
	for _, k := range []string{"", "a.#", "with space", "tilde~", "100%", "a/b+c"} {
		f.Add(k, false)
		f.Add(k, true)
	}
	f.Fuzz(func(t *testing.T, key string, withArgs bool) {
		b := server.BindingInfo{RoutingKey: key}
		if withArgs {
			b.Arguments = amqp.Table{"x": key}
		}
		pk := propertiesKey(key, b.Arguments)
		if !matchProps(pk, b) {
			t.Fatalf("properties_key %q does not match key %q", pk, key)
		}
		loc, err := url.QueryUnescape(url.QueryEscape(pk))
		if err != nil || !matchProps(loc, b) {
			t.Fatalf("Location form of %q does not match", pk)
		}
		if strings.Count(pk, "~") > 1 {
			t.Fatalf("properties_key %q has more than one separator", pk)
		}
	})
}
