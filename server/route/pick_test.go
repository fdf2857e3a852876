package route

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/warrenmq/warren/amqp"
)

func pickOne[D comparable](t *testing.T, m Picker[D], d *Delivery) (D, bool) {
	t.Helper()
	var got D
	n := 0
	m.Pick(d, func(x D) { got = x; n++ })
	if n > 1 {
		t.Fatalf("Pick visited %d destinations", n)
	}
	return got, n == 1
}

func ringOf(m *ConsistentHash[string]) string {
	var s []string
	for _, b := range m.Ring() {
		s = append(s, b.Dest+":"+b.Key)
	}
	return fmt.Sprint(s)
}

// TestConsistentHashRing follows the plugin's ring bookkeeping: one segment
// per destination in binding order, a second binding to a destination
// ignored, removal of any binding to it dropping its segment.
func TestConsistentHashRing(t *testing.T) {
	m := NewConsistentHash[string](HashSource{})
	m.Add(Binding[string]{Dest: "a", Key: "3"})
	m.Add(Binding[string]{Dest: "b", Key: "10"})
	m.Add(Binding[string]{Dest: "c", Key: "2"})
	m.Add(Binding[string]{Dest: "a", Key: "7"})   // a is in the ring already
	m.Add(Binding[string]{Dest: "d", Key: "abc"}) // stored, not in the ring
	if got, want := ringOf(m), "[a:3 b:10 c:2]"; got != want || m.Buckets() != 15 || m.Len() != 5 {
		t.Fatalf("ring %s (%d buckets, %d bindings), want %s, 15, 5", got, m.Buckets(), m.Len(), want)
	}
	for i := range 1000 { // bucket b of 15 belongs to a for 0-2, b for 3-12, c for 13-14
		key := fmt.Sprintf("k%d", i)
		bucket := jumpBucket(phash2Binary(key), 15)
		want := map[bool]string{true: "a", false: "b"}[bucket < 3]
		if bucket >= 13 {
			want = "c"
		}
		if got, _ := pickOne[string](t, m, &Delivery{RoutingKey: key}); got != want {
			t.Fatalf("%s: bucket %d picked %s, want %s", key, bucket, got, want)
		}
	}
	m.Remove(Binding[string]{Dest: "a", Key: "7"}) // the ignored one: a still leaves
	if got, want := ringOf(m), "[b:10 c:2]"; got != want {
		t.Fatalf("after removing a's second binding: %s, want %s", got, want)
	}
	m.Rebuild(func(x, y Binding[string]) bool { return x.Key < y.Key })
	if got, want := ringOf(m), "[b:10 c:2 a:3]"; got != want { // keys "10" < "2" < "3" < "abc"
		t.Fatalf("rebuilt ring %s, want %s", got, want)
	}
	if n := m.RemoveDest("b"); n != 1 {
		t.Fatalf("RemoveDest(b) = %d", n)
	}
	if got, want := ringOf(m), "[c:2 a:3]"; got != want || m.Buckets() != 5 {
		t.Fatalf("after RemoveDest: %s (%d buckets), want %s", got, m.Buckets(), want)
	}
	m.RemoveDest("a")
	m.RemoveDest("c")
	if _, ok := pickOne[string](t, m, &Delivery{RoutingKey: "x"}); ok || m.Len() != 1 {
		t.Fatalf("empty ring picked a destination (Len %d)", m.Len())
	}
}

// TestConsistentHashAddMovesOnlyItsShare: adding a destination takes keys only
// from the others to itself; jump consistent hash moves no key between the
// existing ones.
func TestConsistentHashAddMovesOnlyItsShare(t *testing.T) {
	m := NewConsistentHash[string](HashSource{})
	for i, w := range []string{"1", "2", "3"} {
		m.Add(Binding[string]{Dest: fmt.Sprint("q", i), Key: w})
	}
	before := make(map[string]string)
	for i := range 10000 {
		k := fmt.Sprint("key-", i)
		before[k], _ = pickOne[string](t, m, &Delivery{RoutingKey: k})
	}
	m.Add(Binding[string]{Dest: "new", Key: "6"})
	moved := 0
	for k, was := range before {
		now, _ := pickOne[string](t, m, &Delivery{RoutingKey: k})
		if now != was {
			if now != "new" {
				t.Fatalf("%s moved from %s to %s", k, was, now)
			}
			moved++
		}
	}
	if moved < 4500 || moved > 5500 { // half the buckets are new's
		t.Fatalf("%d of 10000 keys moved, want about 5000", moved)
	}
}

func TestConsistentHashPickAllocatesNothing(t *testing.T) {
	for _, src := range []HashSource{{}, {kind: hashHeader, name: "h"}, {kind: hashProperty, name: "timestamp"}} {
		m := NewConsistentHash[int](src)
		for i := range 10 {
			m.Add(Binding[int]{Dest: i, Key: fmt.Sprint(i + 1)})
		}
		d := &Delivery{RoutingKey: "orders.eu.1234", Headers: amqp.Table{"h": "v"},
			Properties: &amqp.Properties{Flags: amqp.FlagTimestamp, Timestamp: 1700000000}}
		visit := func(int) {}
		if n := testing.AllocsPerRun(100, func() { m.Pick(d, visit) }); n != 0 {
			t.Errorf("%+v: Pick allocates %v times", src, n)
		}
	}
}

func TestParseWeight(t *testing.T) {
	for key, want := range map[string]int64{"1": 1, "+3": 3, "007": 7, "2147483647": 2147483647} {
		if got, err := ParseWeight(key); err != nil || got != want {
			t.Errorf("ParseWeight(%q) = %d, %v; want %d", key, got, err, want)
		}
	}
	for key, text := range map[string]string{
		"abc":                     `The binding key must be an integer: <<"abc">>`,
		"":                        `The binding key must be an integer: <<>>`,
		"-":                       `The binding key must be an integer: <<"-">>`,
		"1e3":                     `The binding key must be an integer: <<"1e3">>`,
		"\"q\"":                   `The binding key must be an integer: <<"\"q\"">>`,
		"\x80":                    `The binding key must be an integer: <<128>>`,
		"0":                       "The binding key must be greater than 0",
		"-5":                      "The binding key must be greater than 0",
		"000":                     "The binding key must be greater than 0",
		"2147483648":              "The binding key must be at most 2147483647",
		"99999999999999999999999": "The binding key must be at most 2147483647",
	} {
		_, err := ParseWeight(key)
		var ae *ArgsError
		if !errors.As(err, &ae) || ae.Text != text || !errors.Is(err, ErrInvalidWeight) {
			t.Errorf("ParseWeight(%q) = %v, want %q", key, err, text)
		}
	}
}

// TestModulusHashOrder: bindings count in less's order, however they were
// added, and each removal takes exactly its binding out.
func TestModulusHashOrder(t *testing.T) {
	less := func(a, b Binding[string]) bool {
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.Dest < b.Dest
	}
	m := NewModulusHash(less)
	for _, b := range []Binding[string]{{Dest: "q1", Key: "b"}, {Dest: "q2", Key: "a"}, {Dest: "q3", Key: "c"}, {Dest: "q1", Key: "a"}} {
		m.Add(b)
	}
	order := []string{"q1", "q2", "q1", "q3"} // a/q1, a/q2, b/q1, c/q3
	for i := range 500 {
		d := &Delivery{RoutingKey: fmt.Sprint("key-", i), CC: []string{"x"}}
		var th termHash
		th.binary(d.RoutingKey)
		th.binary("x")
		th.nil()
		want := order[th.sum()%4]
		if got, _ := pickOne[string](t, m, d); got != want {
			t.Fatalf("%s picked %s, want %s", d.RoutingKey, got, want)
		}
	}
	m.Remove(Binding[string]{Dest: "q1", Key: "a"})
	if n := m.RemoveDest("q3"); n != 1 || len(m.sorted) != 2 || m.sorted[0].Key != "a" || m.sorted[1].Key != "b" {
		t.Fatalf("after removals: %v", m.sorted)
	}
}

// TestRandomBookkeeping: removals keep the pick list exact.
func TestRandomBookkeeping(t *testing.T) {
	m := NewRandom[string]()
	for i := range 30 {
		m.Add(Binding[string]{Dest: fmt.Sprint("q", i%5), Key: fmt.Sprint(i)})
	}
	m.RemoveDest("q0")
	m.Remove(Binding[string]{Dest: "q1", Key: "1"})
	if m.Len() != 23 || len(m.all) != 23 {
		t.Fatalf("Len %d, list %d, want 23", m.Len(), len(m.all))
	}
	for i, e := range m.all {
		if e.x != i || e.b.Dest == "q0" || (e.b.Dest == "q1" && e.b.Key == "1") {
			t.Fatalf("list entry %d: %+v", i, e.b)
		}
	}
	seen := map[string]bool{}
	for range 1000 {
		d, _ := pickOne[string](t, m, nil)
		seen[d] = true
	}
	if got := slices.Sorted(func(yield func(string) bool) {
		for d := range seen {
			if !yield(d) {
				return
			}
		}
	}); fmt.Sprint(got) != "[q1 q2 q3 q4]" {
		t.Fatalf("picked %v", got)
	}
}

// TestConsistentHashConcurrentPicks: Picks share the bucket memo under the
// exchange's read lock; each must still give jumpBucket's answer.
func TestConsistentHashConcurrentPicks(t *testing.T) {
	m := NewConsistentHash[int](HashSource{})
	for i := range 5 {
		m.Add(Binding[int]{Dest: i, Key: fmt.Sprint(i + 1)})
	}
	owner := func(bucket int64) int { // weights 1..5: ends 1, 3, 6, 10, 15
		for i, end := range []int64{1, 3, 6, 10, 15} {
			if bucket < end {
				return i
			}
		}
		return -1
	}
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := range 20000 {
				key := fmt.Sprint("k", (i*7+g)%6000)
				want := owner(jumpBucket(phash2Binary(key), 15))
				got := -1
				m.Pick(&Delivery{RoutingKey: key}, func(d int) { got = d })
				if got != want {
					errs <- fmt.Errorf("%s: picked %d, want %d", key, got, want)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
