package route

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/warrenmq/warren/amqp"
)

// topicWords splits a key or pattern as RabbitMQ does: "" has no words,
// otherwise every "." separates two (possibly empty) words.
func topicWords(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ".")
}

// refTopicMatch is the textbook definition, evaluated by dynamic programming
// over (pattern word, key word) so that many "#" cannot make it slow.
// ok[i][j] says whether pattern words i.. match key words j...
func refTopicMatch(pattern, key string) bool {
	p, k := topicWords(pattern), topicWords(key)
	ok := make([][]bool, len(p)+1)
	for i := range ok {
		ok[i] = make([]bool, len(k)+1)
	}
	ok[len(p)][len(k)] = true
	for i := len(p) - 1; i >= 0; i-- {
		for j := len(k); j >= 0; j-- {
			switch {
			case p[i] == "#":
				// zero words, or one word and stay on the "#"
				ok[i][j] = ok[i+1][j] || (j < len(k) && ok[i][j+1])
			case j == len(k):
				ok[i][j] = false
			case p[i] == "*" || p[i] == k[j]:
				ok[i][j] = ok[i+1][j+1]
			}
		}
	}
	return ok[0][0]
}

var topicCases = []struct {
	pattern, key string
	want         bool
}{
	// "#" alone matches everything, including the empty key.
	{"#", "", true},
	{"#", "a", true},
	{"#", "a.b.c", true},
	{"#", ".", true},
	{"#", "..", true},
	// The empty pattern has no words: it matches only the empty key.
	{"", "", true},
	{"", "a", false},
	{"", ".", false},
	{"a", "", false},
	// "*" is exactly one word, which may be empty.
	{"*", "", false},
	{"*", "a", true},
	{"*", "a.b", false},
	{"*", ".", false},
	{"*.*", ".", true},
	{"*.*.*", "..", true},
	{"a.*", "a.", true},
	{"a.*", "a", false},
	{"*.", "a.", true},
	{"*.", "a", false},
	{"a.*.b", "a..b", true},
	// Empty words are words.
	{"a..b", "a..b", true},
	{"a.b", "a..b", false},
	{"a..b", "a.b", false},
	// Trailing "#".
	{"a.#", "a", true},
	{"a.#", "a.b", true},
	{"a.#", "a.b.c", true},
	{"a.#", "a.", true},
	{"a.#", "b", false},
	{"a.#", "", false},
	{"a.#", "ab", false},
	// Leading "#".
	{"#.a", "a", true},
	{"#.a", "x.y.a", true},
	{"#.a", ".a", true},
	{"#.a", "a.x", false},
	{"#.a", "", false},
	// "#" in the middle.
	{"a.#.b", "a.b", true},
	{"a.#.b", "a..b", true},
	{"a.#.b", "a.x.y.b", true},
	{"a.#.b", "a.b.b", true},
	{"a.#.b", "a.x.y", false},
	{"a.#.b", "b.a.b", false},
	// "*" followed by "#": at least one word.
	{"a.*.#", "a", false},
	{"a.*.#", "a.b", true},
	{"a.*.#", "a.b.c.d", true},
	{"*.#", "a.b.c", true},
	{"*.#", "", false},
	{"#.*", "", false},
	{"#.*", "a", true},
	{"#.*.#", "", false},
	{"#.*.#", "x", true},
	// Consecutive "#" behave as one.
	{"#.#", "", true},
	{"#.#", "a", true},
	{"#.#", "a.b", true},
	{"a.#.#.b", "a.b", true},
	{"a.#.#.b", "a.x.y.z.b", true},
	{"#.#.a", "a", true},
	{"#.#.a", "b", false},
	// Several "#".
	{"#.b.#", "b", true},
	{"#.b.#", "a.b.c", true},
	{"#.b.#", "a.c", false},
	{"#.a.#.a.#", "a.a", true},
	{"#.a.#.a.#", "a", false},
	{"#.a.#.a.#", "x.a.y.z.a.w", true},
	// Plain words.
	{"a.b.c", "a.b.c", true},
	{"a.b.c", "a.b", false},
	{"a.b", "a.b.c", false},
	{"*.b.*", "a.b.c", true},
	{"*.b.*", "b.c", false},
	{"A", "a", false},
	// Wildcard characters inside a word are literal; in a key they are words.
	{"a*", "ab", false},
	{"a*", "a*", true},
	{"a#", "a", false},
	{"a.b", "a.*", false},
	{"a.*", "a.*", true},
	{"a", "#", false},
	{"stock.*.nyse", "stock.ibm.nyse", true},
	{"stock.*.nyse", "stock.nyse", false},
}

func TestTopicCases(t *testing.T) {
	if len(topicCases) < 40 {
		t.Fatalf("only %d cases", len(topicCases))
	}
	for _, tc := range topicCases {
		// The reference must agree with the table, or the property test below
		// would be checking against the wrong thing.
		if got := refTopicMatch(tc.pattern, tc.key); got != tc.want {
			t.Errorf("reference: %q vs key %q = %v, want %v", tc.pattern, tc.key, got, tc.want)
		}
		m := NewTopic[string]()
		m.Add(Binding[string]{Dest: "q", Key: tc.pattern})
		got := len(collect(t, Matcher[string](m), tc.key, nil)) == 1
		if got != tc.want {
			t.Errorf("pattern %q vs key %q = %v, want %v", tc.pattern, tc.key, got, tc.want)
		}
	}
}

// TestTopicCasesTogether binds every pattern of the table at once, each to its
// own destination, so that matches must not leak between trie branches.
func TestTopicCasesTogether(t *testing.T) {
	m := NewTopic[string]()
	patterns := map[string]bool{}
	for _, tc := range topicCases {
		patterns[tc.pattern] = true
	}
	for p := range patterns {
		m.Add(Binding[string]{Dest: "p:" + p, Key: p})
	}
	for _, tc := range topicCases {
		var want []string
		for p := range patterns {
			if refTopicMatch(p, tc.key) {
				want = append(want, "p:"+p)
			}
		}
		slices.Sort(want)
		if got := collect(t, Matcher[string](m), tc.key, nil); !slices.Equal(got, want) {
			t.Errorf("key %q: got %v, want %v", tc.key, got, want)
		}
	}
}

func randTopic(rng *rand.Rand, words []string, maxWords int) string {
	n := rng.IntN(maxWords + 1)
	w := make([]string, n)
	for i := range w {
		w[i] = words[rng.IntN(len(words))]
	}
	return strings.Join(w, ".")
}

// TestTopicProperty compares the trie with the reference over random patterns
// and keys, while bindings are added and removed, and checks that removing
// every binding prunes the trie back to its root.
func TestTopicProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 7))
	patternWords := []string{"a", "b", "", "*", "#", "*", "#"}
	keyWords := []string{"a", "b", "c", ""}
	m := NewTopic[int]()
	var live []Binding[int]
	for round := range 30 {
		for range 60 {
			b := Binding[int]{Dest: rng.IntN(40), Key: randTopic(rng, patternWords, 5)}
			if rng.IntN(4) == 0 {
				b.Args = amqp.Table{"r": int32(rng.IntN(2))}
			}
			if m.Add(b) {
				live = append(live, b)
			}
		}
		for range 30 {
			if len(live) == 0 {
				break
			}
			i := rng.IntN(len(live))
			if !m.Remove(live[i]) {
				t.Fatalf("Remove(%v) = false", live[i])
			}
			live = slices.Delete(live, i, i+1)
		}
		for range 200 {
			key := randTopic(rng, keyWords, 6)
			var want []int
			for _, b := range live {
				if refTopicMatch(b.Key, key) && !slices.Contains(want, b.Dest) {
					want = append(want, b.Dest)
				}
			}
			slices.Sort(want)
			if got := collect(t, Matcher[int](m), key, nil); !slices.Equal(got, want) {
				t.Fatalf("round %d, key %q: got %v, want %v", round, key, got, want)
			}
		}
	}
	for _, b := range live {
		m.Remove(b)
	}
	if !m.root.unused() || m.Len() != 0 {
		t.Fatalf("trie not empty after removing every binding: len %d", m.Len())
	}
	if m.nodeIDs.limit()-len(m.nodeIDs.free) != 1 {
		t.Fatalf("%d node ids still in use, want 1 (the root)", m.nodeIDs.limit()-len(m.nodeIDs.free))
	}
}

// TestTopicCollapsesHashes checks that repeated "#" share one trie node, the
// property that keeps a "#" node from ever having a "#" child.
func TestTopicCollapsesHashes(t *testing.T) {
	m := NewTopic[string]()
	m.Add(Binding[string]{Dest: "q", Key: "a.#.#.#.b"})
	m.Add(Binding[string]{Dest: "r", Key: "a.#.b"})
	m.Add(Binding[string]{Dest: "s", Key: "#.#"})
	m.Add(Binding[string]{Dest: "t", Key: "#"})
	// root, a, a.#, a.#.b, #
	if inUse := m.nodeIDs.limit() - len(m.nodeIDs.free); inUse != 5 {
		t.Fatalf("%d trie nodes in use, want 5", inUse)
	}
	if got := collect(t, Matcher[string](m), "a.x.b", nil); !slices.Equal(got, []string{"q", "r", "s", "t"}) {
		t.Fatalf("got %v", got)
	}
}

// TestTopicManyHashes checks that a pattern made of many "#" separated by
// words, against a long key, matches correctly; a backtracking matcher would
// take exponential time here.
func TestTopicManyHashes(t *testing.T) {
	pattern := strings.Repeat("#.a.", 12) + "#"
	keyYes := strings.Repeat("a.", 59) + "a"
	keyNo := strings.Repeat("a.", 10) + "b"
	m := NewTopic[string]()
	m.Add(Binding[string]{Dest: "q", Key: pattern})
	if got := collect(t, Matcher[string](m), keyYes, nil); len(got) != 1 {
		t.Fatalf("%q should match %q", pattern, keyYes)
	}
	if got := collect(t, Matcher[string](m), keyNo, nil); len(got) != 0 {
		t.Fatalf("%q should not match %q", pattern, keyNo)
	}
}

// TestTopicReentrantMatch matches from inside visit, as routing through an
// exchange-to-exchange binding back into the same exchange would.
func TestTopicReentrantMatch(t *testing.T) {
	m := NewTopic[string]()
	m.Add(Binding[string]{Dest: "outer", Key: "a.#"})
	m.Add(Binding[string]{Dest: "inner", Key: "b.*"})
	var got []string
	m.Match("a.x", nil, func(d string) {
		got = append(got, d)
		m.Match("b.y", nil, func(d string) { got = append(got, d) })
	})
	if !slices.Equal(got, []string{"outer", "inner"}) {
		t.Fatalf("got %v", got)
	}
}

func FuzzTopicMatch(f *testing.F) {
	for _, tc := range topicCases {
		f.Add(tc.pattern, tc.key)
	}
	f.Add("#.#.*.#", "a..b.")
	f.Add("a.#.*", "a")
	f.Fuzz(func(t *testing.T, pattern, key string) {
		// Bound the input as AMQP does (short strings) and the reference's
		// table to something quick.
		if len(pattern) > 255 || len(key) > 255 {
			t.Skip()
		}
		m := NewTopic[int]()
		m.Add(Binding[int]{Dest: 1, Key: pattern})
		// A second binding sharing a prefix exercises branching and pruning.
		other := pattern + ".#"
		m.Add(Binding[int]{Dest: 2, Key: other})
		want := map[int]bool{1: refTopicMatch(pattern, key), 2: refTopicMatch(other, key)}
		got := map[int]int{}
		m.Match(key, nil, func(d int) { got[d]++ })
		for d, w := range want {
			if (got[d] == 1) != w || got[d] > 1 {
				t.Fatalf("pattern %q key %q dest %d: visited %d times, want match %v", pattern, key, d, got[d], w)
			}
		}
		m.Remove(Binding[int]{Dest: 2, Key: other})
		m.Remove(Binding[int]{Dest: 1, Key: pattern})
		if !m.root.unused() {
			t.Fatalf("trie not pruned after removing %q and %q", pattern, other)
		}
	})
}

func ExampleTopic() {
	m := NewTopic[string]()
	m.Add(Binding[string]{Dest: "all-stocks", Key: "stock.#"})
	m.Add(Binding[string]{Dest: "nyse", Key: "stock.*.nyse"})
	m.Add(Binding[string]{Dest: "nyse", Key: "#.nyse"})
	var got []string
	m.Match("stock.ibm.nyse", nil, func(d string) { got = append(got, d) })
	slices.Sort(got)
	fmt.Println(got)
	// Output: [all-stocks nyse]
}
