package route

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp"
)

var allKinds = []string{KindDirect, KindFanout, KindTopic, KindHeaders}

// collect runs Match and returns the visited destinations sorted, failing the
// test if any destination is visited more than once.
func collect[D cmp.Ordered](t testing.TB, m Matcher[D], key string, h amqp.Table) []D {
	t.Helper()
	seen := map[D]int{}
	m.Match(key, h, func(d D) { seen[d]++ })
	out := make([]D, 0, len(seen))
	for d, n := range seen {
		if n != 1 {
			t.Errorf("Match(%q, %v): destination %v visited %d times", key, h, d, n)
		}
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

func mustNew[D comparable](t testing.TB, kind string) Matcher[D] {
	t.Helper()
	m, err := New[D](kind, nil, nil)
	if err != nil {
		t.Fatalf("New(%q): %v", kind, err)
	}
	return m
}

func TestNewUnknownKind(t *testing.T) {
	_, err := New[string]("x-no-such-type", nil, nil)
	if !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("New(x-no-such-type) error = %v, want ErrUnknownKind", err)
	}
}

func TestAddRemoveIdentity(t *testing.T) {
	for _, kind := range allKinds {
		t.Run(kind, func(t *testing.T) {
			m := mustNew[string](t, kind)
			b := Binding[string]{Dest: "q", Key: "k", Args: amqp.Table{"a": "1", "n": amqp.Table{"x": []any{int32(1), []byte("b")}}}}
			if !m.Add(b) {
				t.Fatal("first Add returned false")
			}
			// A deep copy of the same arguments is the same binding.
			same := Binding[string]{Dest: "q", Key: "k", Args: amqp.Table{"a": "1", "n": amqp.Table{"x": []any{int32(1), []byte("b")}}}}
			if m.Add(same) {
				t.Fatal("Add of an identical binding returned true")
			}
			// Same destination and key, different arguments: new bindings.
			for _, args := range []amqp.Table{nil, {"a": "2"}, {"a": []byte("1")}, {"a": "1", "n": amqp.Table{"x": []any{int64(1), []byte("b")}}}} {
				if !m.Add(Binding[string]{Dest: "q", Key: "k", Args: args}) {
					t.Fatalf("Add with args %v returned false", args)
				}
			}
			if m.Add(Binding[string]{Dest: "q", Key: "k", Args: amqp.Table{}}) {
				t.Fatal("empty Args must equal nil Args")
			}
			if got := m.Len(); got != 5 {
				t.Fatalf("Len = %d, want 5", got)
			}
			if !m.Remove(same) {
				t.Fatal("Remove of an existing binding returned false")
			}
			if m.Remove(same) {
				t.Fatal("second Remove returned true")
			}
			if m.Remove(Binding[string]{Dest: "q", Key: "other"}) {
				t.Fatal("Remove of a binding never added returned true")
			}
			if got := m.Len(); got != 4 {
				t.Fatalf("Len = %d, want 4", got)
			}
		})
	}
}

func TestBindingsOrder(t *testing.T) {
	for _, kind := range allKinds {
		t.Run(kind, func(t *testing.T) {
			m := mustNew[string](t, kind)
			var want []Binding[string]
			for i := range 20 {
				b := Binding[string]{Dest: fmt.Sprintf("q%d", i%3), Key: fmt.Sprintf("k%d", i%7), Args: amqp.Table{"i": int64(i)}}
				m.Add(b)
				want = append(want, b)
			}
			for _, i := range []int{19, 0, 7, 8} {
				if !m.Remove(want[i]) {
					t.Fatalf("Remove(%v) = false", want[i])
				}
			}
			want = slices.Delete(want, 19, 20)
			want = slices.Delete(want, 7, 9)
			want = slices.Delete(want, 0, 1)
			extra := Binding[string]{Dest: "q9", Key: "late"}
			m.Add(extra)
			want = append(want, extra)
			checkBindings(t, m, want)
		})
	}
}

func checkBindings(t *testing.T, m Matcher[string], want []Binding[string]) {
	t.Helper()
	got := m.Bindings()
	if len(got) != len(want) || m.Len() != len(want) {
		t.Fatalf("Bindings has %d, Len %d, want %d", len(got), m.Len(), len(want))
	}
	for i := range got {
		if got[i].Dest != want[i].Dest || got[i].Key != want[i].Key || !argsEqual(got[i].Args, want[i].Args) {
			t.Fatalf("Bindings[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestRemoveDest(t *testing.T) {
	for _, kind := range allKinds {
		t.Run(kind, func(t *testing.T) {
			m := mustNew[string](t, kind)
			keys := []string{"a", "a.b", "#", "*.b"}
			for _, k := range keys {
				m.Add(Binding[string]{Dest: "gone", Key: k})
				m.Add(Binding[string]{Dest: "gone", Key: k, Args: amqp.Table{"v": nil}})
				m.Add(Binding[string]{Dest: "kept", Key: k})
			}
			if !m.HasDest("gone") || !m.HasDest("kept") || m.HasDest("never") {
				t.Fatal("HasDest wrong before RemoveDest")
			}
			if n := m.RemoveDest("gone"); n != 2*len(keys) {
				t.Fatalf("RemoveDest = %d, want %d", n, 2*len(keys))
			}
			if m.HasDest("gone") || !m.HasDest("kept") {
				t.Fatal("HasDest wrong after RemoveDest")
			}
			if n := m.RemoveDest("gone"); n != 0 {
				t.Fatalf("second RemoveDest = %d, want 0", n)
			}
			if m.Len() != len(keys) {
				t.Fatalf("Len = %d, want %d", m.Len(), len(keys))
			}
			for _, b := range m.Bindings() {
				if b.Dest != "kept" {
					t.Fatalf("binding to %q survived RemoveDest", b.Dest)
				}
			}
			for _, k := range keys {
				if got := collect(t, m, k, amqp.Table{"v": "x"}); slices.Contains(got, "gone") {
					t.Fatalf("Match(%q) still reaches a removed destination: %v", k, got)
				}
			}
			if n := m.RemoveDest("kept"); n != len(keys) {
				t.Fatalf("RemoveDest(kept) = %d", n)
			}
			for _, k := range keys {
				if got := collect(t, m, k, nil); len(got) != 0 {
					t.Fatalf("empty matcher matched %v", got)
				}
			}
		})
	}
}

// TestMatchVisitsOnce binds one destination several ways that all match the
// same message and checks it is visited once, and still routed until the last
// of those bindings goes.
func TestMatchVisitsOnce(t *testing.T) {
	tests := []struct {
		kind    string
		key     string
		headers amqp.Table
		binds   []Binding[string]
	}{
		{KindDirect, "k", nil, []Binding[string]{
			{Dest: "q", Key: "k"}, {Dest: "q", Key: "k", Args: amqp.Table{"a": int32(1)}}, {Dest: "q", Key: "k", Args: amqp.Table{"a": int64(1)}},
		}},
		{KindFanout, "whatever", nil, []Binding[string]{
			{Dest: "q", Key: ""}, {Dest: "q", Key: "x"}, {Dest: "q", Key: "x", Args: amqp.Table{"a": "b"}},
		}},
		{KindTopic, "a.b.c", nil, []Binding[string]{
			{Dest: "q", Key: "a.*.c"}, {Dest: "q", Key: "a.#"}, {Dest: "q", Key: "#"}, {Dest: "q", Key: "#.#"},
			{Dest: "q", Key: "#.c"}, {Dest: "q", Key: "a.b.c"}, {Dest: "q", Key: "a.b.c", Args: amqp.Table{"z": true}},
		}},
		{KindHeaders, "", amqp.Table{"a": "1", "b": int32(2)}, []Binding[string]{
			{Dest: "q", Args: amqp.Table{"a": "1"}}, {Dest: "q", Args: amqp.Table{"b": int64(2), "x-match": "any"}},
			{Dest: "q", Args: nil}, {Dest: "q", Key: "rk", Args: amqp.Table{"a": nil}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			m := mustNew[string](t, tc.kind)
			m.Add(Binding[string]{Dest: "other", Key: "nomatch", Args: amqp.Table{"nomatch": "x"}})
			for _, b := range tc.binds {
				if !m.Add(b) {
					t.Fatalf("Add(%v) = false", b)
				}
			}
			for i, b := range tc.binds {
				got := collect(t, m, tc.key, tc.headers)
				if !slices.Contains(got, "q") {
					t.Fatalf("after removing %d of %d bindings, q is not matched (got %v)", i, len(tc.binds), got)
				}
				m.Remove(b)
			}
			if got := collect(t, m, tc.key, tc.headers); slices.Contains(got, "q") {
				t.Fatalf("q still matched after all its bindings were removed")
			}
		})
	}
}

func TestDirectRouting(t *testing.T) {
	m := NewDirect[string]()
	m.Add(Binding[string]{Dest: "q1", Key: "a"})
	m.Add(Binding[string]{Dest: "q2", Key: "a"})
	m.Add(Binding[string]{Dest: "q3", Key: ""})
	m.Add(Binding[string]{Dest: "q4", Key: "a.b"})
	cases := map[string][]string{"a": {"q1", "q2"}, "": {"q3"}, "a.b": {"q4"}, "A": {}, "a.*": {}, "#": {}}
	for key, want := range cases {
		if got := collect(t, Matcher[string](m), key, nil); !slices.Equal(got, want) {
			t.Errorf("Match(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestFanoutRouting(t *testing.T) {
	m := NewFanout[string]()
	for i := range 20 {
		m.Add(Binding[string]{Dest: fmt.Sprintf("q%02d", i), Key: fmt.Sprintf("k%d", i)})
	}
	got := collect(t, Matcher[string](m), "unrelated", amqp.Table{"h": 1})
	if len(got) != 20 {
		t.Fatalf("fanout matched %d destinations, want 20", len(got))
	}
}

// refMatch is an independent statement of each exchange type's rule, used to
// check the matchers against a plain scan of every binding.
func refMatch(kind string, b Binding[string], key string, h amqp.Table) bool {
	switch kind {
	case KindDirect:
		return b.Key == key
	case KindFanout:
		return true
	case KindTopic:
		return refTopicMatch(b.Key, key)
	case KindHeaders:
		return refHeadersMatch(b.Args, h)
	}
	panic(kind)
}

// TestModelChurn applies random adds, removes and RemoveDest calls to every
// matcher kind and, after each batch, compares Len, Bindings, HasDest and Match
// with a plain list of bindings scanned in full.
func TestModelChurn(t *testing.T) {
	keys := []string{"", "a", "b", "a.b", "a.*", "#", "a.#", "*.b", "#.b", "a..b", "*"}
	argsChoices := []amqp.Table{
		nil, {"h": "1"}, {"h": int32(1)}, {"h": int64(1)}, {"h": nil, "x-match": "any", "g": "2"},
		{"x-match": "all", "h": "1", "g": "2"}, {"x-match": "any-with-x", "x-h": "1"}, {"h": []byte("1")},
	}
	headerChoices := []amqp.Table{nil, {"h": "1"}, {"h": int8(1)}, {"g": "2"}, {"h": "1", "g": "2"}, {"x-h": "1"}, {"h": 1.0}}
	for _, kind := range allKinds {
		t.Run(kind, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(kind))))
			m := mustNew[string](t, kind)
			var model []Binding[string]
			find := func(b Binding[string]) int {
				return slices.IndexFunc(model, func(o Binding[string]) bool {
					return o.Dest == b.Dest && o.Key == b.Key && argsEqual(o.Args, b.Args)
				})
			}
			for round := range 60 {
				for range 40 {
					b := Binding[string]{
						Dest: fmt.Sprintf("q%d", rng.IntN(24)),
						Key:  keys[rng.IntN(len(keys))],
						Args: argsChoices[rng.IntN(len(argsChoices))],
					}
					switch op := rng.IntN(10); {
					case op < 6:
						want := find(b) < 0
						if got := m.Add(b); got != want {
							t.Fatalf("round %d: Add(%v) = %v, want %v", round, b, got, want)
						}
						if want {
							model = append(model, b)
						}
					case op < 9:
						i := find(b)
						if got := m.Remove(b); got != (i >= 0) {
							t.Fatalf("round %d: Remove(%v) = %v, want %v", round, b, got, i >= 0)
						}
						if i >= 0 {
							model = slices.Delete(model, i, i+1)
						}
					default:
						before := len(model)
						model = slices.DeleteFunc(model, func(o Binding[string]) bool { return o.Dest == b.Dest })
						if got := m.RemoveDest(b.Dest); got != before-len(model) {
							t.Fatalf("round %d: RemoveDest(%q) = %d, want %d", round, b.Dest, got, before-len(model))
						}
					}
				}
				checkBindings(t, m, model)
				for i := range 24 {
					d := fmt.Sprintf("q%d", i)
					want := slices.ContainsFunc(model, func(o Binding[string]) bool { return o.Dest == d })
					if m.HasDest(d) != want {
						t.Fatalf("round %d: HasDest(%q) = %v, want %v", round, d, !want, want)
					}
				}
				for _, key := range append(keys, "a.b.c", "b.b") {
					for _, h := range headerChoices {
						var want []string
						for _, b := range model {
							if refMatch(kind, b, key, h) && !slices.Contains(want, b.Dest) {
								want = append(want, b.Dest)
							}
						}
						slices.Sort(want)
						if got := collect(t, m, key, h); !slices.Equal(got, want) {
							t.Fatalf("round %d: Match(%q, %v) = %v, want %v", round, key, h, got, want)
						}
					}
				}
			}
		})
	}
}

func TestArgsEqual(t *testing.T) {
	ts := time.Unix(1700000000, 0)
	nan := math.NaN()
	tests := []struct {
		a, b amqp.Table
		want bool
	}{
		{nil, nil, true},
		{nil, amqp.Table{}, true},
		{amqp.Table{"a": nil}, amqp.Table{}, false},
		{amqp.Table{"a": nil}, amqp.Table{"a": nil}, true},
		{amqp.Table{"a": "x"}, amqp.Table{"a": "x"}, true},
		{amqp.Table{"a": "x"}, amqp.Table{"b": "x"}, false},
		{amqp.Table{"a": "x"}, amqp.Table{"a": []byte("x")}, false},
		{amqp.Table{"a": []byte("x")}, amqp.Table{"a": []byte("x")}, true},
		{amqp.Table{"a": []byte("x")}, amqp.Table{"a": []byte("y")}, false},
		{amqp.Table{"a": []byte{}}, amqp.Table{"a": []byte(nil)}, true},
		{amqp.Table{"a": int32(1)}, amqp.Table{"a": int64(1)}, false},
		{amqp.Table{"a": int32(1)}, amqp.Table{"a": int32(2)}, false},
		{amqp.Table{"a": int64(1)}, amqp.Table{"a": 1}, true},                       // int is written as 'l'
		{amqp.Table{"a": int64(-1)}, amqp.Table{"a": uint64(math.MaxUint64)}, true}, // so is uint64
		{amqp.Table{"a": uint8(1)}, amqp.Table{"a": int8(1)}, false},
		{amqp.Table{"a": 1.5}, amqp.Table{"a": float32(1.5)}, false},
		{amqp.Table{"a": nan}, amqp.Table{"a": nan}, true},
		{amqp.Table{"a": 0.0}, amqp.Table{"a": math.Copysign(0, -1)}, false},
		{amqp.Table{"a": true}, amqp.Table{"a": true}, true},
		{amqp.Table{"a": true}, amqp.Table{"a": false}, false},
		{amqp.Table{"a": amqp.Decimal{Scale: 2, Value: 150}}, amqp.Table{"a": amqp.Decimal{Scale: 2, Value: 150}}, true},
		{amqp.Table{"a": amqp.Decimal{Scale: 2, Value: 150}}, amqp.Table{"a": amqp.Decimal{Scale: 1, Value: 15}}, false},
		{amqp.Table{"a": ts}, amqp.Table{"a": ts.Add(300 * time.Millisecond)}, true}, // seconds on the wire
		{amqp.Table{"a": ts}, amqp.Table{"a": ts.Add(time.Second)}, false},
		{amqp.Table{"a": ts}, amqp.Table{"a": int64(1700000000)}, false},
		{amqp.Table{"a": []any{"x", int32(1)}}, amqp.Table{"a": []any{"x", int32(1)}}, true},
		{amqp.Table{"a": []any{"x", int32(1)}}, amqp.Table{"a": []any{int32(1), "x"}}, false},
		{amqp.Table{"a": []any{"x"}}, amqp.Table{"a": []any{"x", "x"}}, false},
		{amqp.Table{"a": []any{[]byte("x")}}, amqp.Table{"a": []any{"x"}}, false},
		{amqp.Table{"a": amqp.Table{"b": amqp.Table{"c": []any{nil}}}}, amqp.Table{"a": map[string]any{"b": amqp.Table{"c": []any{nil}}}}, true},
		{amqp.Table{"a": amqp.Table{"b": amqp.Table{"c": []any{nil}}}}, amqp.Table{"a": amqp.Table{"b": amqp.Table{"c": []any{false}}}}, false},
		{amqp.Table{"a": amqp.Table{"b": 1}}, amqp.Table{"a": amqp.Table{"c": 1}}, false},
		{amqp.Table{"a": amqp.Table{}}, amqp.Table{"a": []any{}}, false},
		{amqp.Table{"a": struct{}{}}, amqp.Table{"a": nil}, true}, // unknown types are written as void
	}
	for i, tc := range tests {
		if got := argsEqual(tc.a, tc.b); got != tc.want {
			t.Errorf("%d: argsEqual(%v, %v) = %v, want %v", i, tc.a, tc.b, got, tc.want)
		}
		if got := argsEqual(tc.b, tc.a); got != tc.want {
			t.Errorf("%d: argsEqual(%v, %v) = %v, want %v (reversed)", i, tc.b, tc.a, got, tc.want)
		}
	}
}

// TestArgsEqualWireRoundTrip checks that identity survives encoding: a table
// and its decoded copy (which may change Go types, e.g. int to int64) are the
// same binding arguments.
func TestArgsEqualWireRoundTrip(t *testing.T) {
	args := amqp.Table{
		"i": 7, "u": uint64(9), "s": "str", "b": []byte{1, 2}, "f": float32(0.25), "d": 0.5,
		"t": time.Unix(1234567890, 0), "n": map[string]any{"a": []any{int16(1), nil, true}},
		"v": nil, "dec": amqp.Decimal{Scale: 3, Value: -12},
	}
	back, err := amqp.DecodeTable(amqp.AppendTable(nil, args))
	if err != nil {
		t.Fatalf("DecodeTable: %v", err)
	}
	if !argsEqual(args, back) {
		t.Fatalf("decoded %v does not equal original %v", back, args)
	}
}

// TestConcurrentMatch runs Match from several goroutines at once, as exchanges
// do under their read lock; run with -race to check that Match only reads
// shared state.
func TestConcurrentMatch(t *testing.T) {
	for _, kind := range allKinds {
		t.Run(kind, func(t *testing.T) {
			m := mustNew[string](t, kind)
			keys := []string{"a.b", "a.*", "#", "a.#", "b"}
			for i, k := range keys {
				m.Add(Binding[string]{Dest: fmt.Sprintf("q%d", i), Key: k, Args: amqp.Table{"h": "1"}})
			}
			h := amqp.Table{"h": "1"}
			want := make(map[string][]string)
			for _, k := range keys {
				want[k] = collect(t, m, k, h)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for g := range 4 {
				wg.Go(func() {
					for i := range 2000 {
						k := keys[(i+g)%len(keys)]
						var got []string
						m.Match(k, h, func(d string) { got = append(got, d) })
						slices.Sort(got)
						if !slices.Equal(got, want[k]) {
							errs <- fmt.Errorf("goroutine %d: Match(%q) = %v, want %v", g, k, got, want[k])
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// New builds every exchange type from its arguments: x-consistent-hash
// refuses arguments its plugin refuses, and x-modulus-hash needs the order it
// counts bindings in.
func TestNewUsesWhatTheKindNeeds(t *testing.T) {
	if _, err := New[string](KindConsistentHash, amqp.Table{"hash-header": "h", "hash-property": "message_id"}, nil); !errors.Is(err, ErrInvalidHashArgs) {
		t.Errorf("x-consistent-hash with both sources: %v, want ErrInvalidHashArgs", err)
	}
	m, err := New[string](KindConsistentHash, amqp.Table{"hash-header": "h"}, nil)
	if err != nil {
		t.Fatalf("x-consistent-hash on a header: %v", err)
	}
	if ch, ok := m.(*ConsistentHash[string]); !ok {
		t.Errorf("x-consistent-hash made a %T", m)
	} else if ch.src != (HashSource{kind: hashHeader, name: "h"}) {
		t.Errorf("x-consistent-hash on header h hashes %+v", ch.src)
	}
	if _, err := New[string](KindModulusHash, nil, nil); err == nil {
		t.Error("x-modulus-hash without a binding order was made")
	}
	less := func(a, b Binding[string]) bool { return a.Dest < b.Dest }
	if m, err := New(KindModulusHash, nil, less); err != nil {
		t.Errorf("x-modulus-hash: %v", err)
	} else if _, ok := m.(*ModulusHash[string]); !ok {
		t.Errorf("x-modulus-hash made a %T", m)
	}
}
