package route

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/warrenmq/warren/amqp"
)

// benchDest stands in for the broker's *Queue: a pointer destination.
type benchDest struct{ name string }

func benchDests(n int) []*benchDest {
	out := make([]*benchDest, n)
	for i := range out {
		out[i] = &benchDest{name: fmt.Sprintf("q%d", i)}
	}
	return out
}

var sink int

// topicBench builds a topic matcher with n bindings shaped like a typical
// deployment: region.service.event.severity keys; 60% exact patterns, 25%
// with one "*", 15% ending in "#" and a few "#.severity" catch-alls, spread
// over 2,000 queues.
func topicBench(n int) (*Topic[*benchDest], []string) {
	rng := rand.New(rand.NewPCG(1, 2))
	regions := []string{"eu", "us", "ap", "sa", "af"}
	words := func(prefix string, k int) []string {
		out := make([]string, k)
		for i := range out {
			out[i] = fmt.Sprintf("%s%d", prefix, i)
		}
		return out
	}
	services, events, sev := words("svc", 200), words("ev", 50), []string{"debug", "info", "warn", "error"}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	dests := benchDests(2000)
	m := NewTopic[*benchDest]()
	for m.Len() < n {
		w := []string{pick(regions), pick(services), pick(events), pick(sev)}
		switch r := rng.IntN(1000); {
		case r < 600: // exact
		case r < 850:
			w[rng.IntN(4)] = "*"
		case r < 998:
			w = append(w[:2+rng.IntN(2)], "#")
		default: // a few catch-alls such as "#.error"
			w = []string{"#", w[3]}
		}
		m.Add(Binding[*benchDest]{Dest: dests[rng.IntN(len(dests))], Key: strings.Join(w, ".")})
	}
	keys := make([]string, 256)
	for i := range keys {
		keys[i] = strings.Join([]string{pick(regions), pick(services), pick(events), pick(sev)}, ".")
	}
	return m, keys
}

func BenchmarkTopicMatch(b *testing.B) {
	m, keys := topicBench(10000)
	visit := func(*benchDest) { sink++ }
	matched := 0
	countVisit := func(*benchDest) { matched++ }
	for _, k := range keys {
		m.Match(k, nil, countVisit)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.Match(keys[i&255], nil, visit)
		i++
	}
	b.ReportMetric(float64(matched)/float64(len(keys)), "dests/op")
}

func BenchmarkTopicMatchParallel(b *testing.B) {
	m, keys := topicBench(10000)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		n, i := 0, 0
		visit := func(*benchDest) { n++ }
		for pb.Next() {
			m.Match(keys[i&255], nil, visit)
			i++
		}
	})
}

func BenchmarkTopicAddRemove(b *testing.B) {
	m, keys := topicBench(10000)
	d := &benchDest{name: "extra"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		bd := Binding[*benchDest]{Dest: d, Key: keys[i&255]}
		m.Add(bd)
		m.Remove(bd)
		i++
	}
}

func BenchmarkDirectMatch(b *testing.B) {
	dests := benchDests(1000)
	m := NewDirect[*benchDest]()
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = fmt.Sprintf("orders.created.%d", i)
		m.Add(Binding[*benchDest]{Dest: dests[i%len(dests)], Key: keys[i]})
		if i%10 == 0 { // some keys reach two queues
			m.Add(Binding[*benchDest]{Dest: dests[(i+1)%len(dests)], Key: keys[i]})
		}
	}
	visit := func(*benchDest) { sink++ }
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.Match(keys[i%len(keys)], nil, visit)
		i++
	}
}

func BenchmarkFanoutMatch(b *testing.B) {
	m := NewFanout[*benchDest]()
	for _, d := range benchDests(10) {
		m.Add(Binding[*benchDest]{Dest: d})
	}
	visit := func(*benchDest) { sink++ }
	b.ReportAllocs()
	for b.Loop() {
		m.Match("", nil, visit)
	}
}

// BenchmarkHeadersMatch routes a message with eight headers through 1,000
// headers bindings of two or three arguments each, in all four x-match modes.
func BenchmarkHeadersMatch(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	dests := benchDests(500)
	modes := []string{"all", "any", "all-with-x", "any-with-x"}
	m := NewHeaders[*benchDest]()
	for m.Len() < 1000 {
		args := amqp.Table{"x-match": modes[rng.IntN(len(modes))]}
		for range 2 + rng.IntN(2) {
			args[fmt.Sprintf("h%d", rng.IntN(12))] = fmt.Sprintf("v%d", rng.IntN(3))
		}
		if rng.IntN(4) == 0 {
			args["x-tenant"] = "acme"
		}
		m.Add(Binding[*benchDest]{Dest: dests[rng.IntN(len(dests))], Args: args})
	}
	headers := amqp.Table{"x-tenant": "acme", "n": int32(7)}
	for i := range 8 {
		headers[fmt.Sprintf("h%d", i)] = fmt.Sprintf("v%d", i%3)
	}
	matched := 0
	m.Match("", headers, func(*benchDest) { matched++ })
	visit := func(*benchDest) { sink++ }
	b.ReportAllocs()
	for b.Loop() {
		m.Match("", headers, visit)
	}
	b.ReportMetric(float64(matched), "dests/op")
}

// BenchmarkConsistentHashPick is the routing step of an x-consistent-hash
// exchange (phash2 of the routing key, the jump over exs1024 draws, the ring
// lookup), over ten queues of weights 1 to 10, for 1,000 keys that repeat (the
// bucket memo answers) and for keys that never repeat; compare
// BenchmarkDirectMatch.
func BenchmarkConsistentHashPick(b *testing.B) {
	for _, nkeys := range []int{1000, 1 << 20} {
		b.Run(fmt.Sprintf("keys=%d", nkeys), func(b *testing.B) {
			dests := benchDests(10)
			m := NewConsistentHash[*benchDest](HashSource{})
			for i, d := range dests {
				m.Add(Binding[*benchDest]{Dest: d, Key: strconv.Itoa(i + 1)})
			}
			keys := make([]string, nkeys)
			for i := range keys {
				keys[i] = fmt.Sprintf("orders.created.%d", i)
			}
			visit := func(*benchDest) { sink++ }
			var d Delivery
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				d.RoutingKey = keys[i%len(keys)]
				m.Pick(&d, visit)
				i++
			}
		})
	}
}
