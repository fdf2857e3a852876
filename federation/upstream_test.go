package federation

import (
	"encoding/json"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func params(t *testing.T, raw string) []Param {
	t.Helper()
	var ps []Param
	if err := json.Unmarshal([]byte(raw), &ps); err != nil {
		t.Fatal(err)
	}
	return ps
}

// A set member's keys override its upstream's, a member naming no upstream
// is skipped, "all" is every upstream by name, a pattern matches names,
// and what names nothing that exists says so.
func TestResolveUpstreams(t *testing.T) {
	vp := indexParams(params(t, `[
		{"Component":"federation-upstream","Vhost":"/","Name":"b","Value":{"uri":"amqp://b","max-hops":3,"prefetch-count":10}},
		{"Component":"federation-upstream","Vhost":"/","Name":"a","Value":{"uri":["amqp://a1","amqp://a2"],"ack-mode":"no-ack"}},
		{"Component":"federation-upstream-set","Vhost":"/","Name":"s","Value":[{"upstream":"b","max-hops":2,"exchange":"other"},{"upstream":"gone"}]}
	]`))["/"]
	ups, reason := resolve(vp, map[string]any{"federation-upstream-set": "s"})
	if reason != "" || len(ups) != 1 {
		t.Fatalf("set s: %v %q", ups, reason)
	}
	if u := ups[0]; u.name != "b" || u.maxHops != 2 || u.exchange != "other" || u.prefetch != 10 || u.uris[0] != "amqp://b" {
		t.Errorf("member b = %+v", u)
	}
	ups, _ = resolve(vp, map[string]any{"federation-upstream-set": "all"})
	if len(ups) != 2 || ups[0].name != "a" || ups[1].name != "b" {
		t.Fatalf("all = %+v", ups)
	}
	if a := ups[0]; a.ackMode != "no-ack" || a.maxHops != 1 || a.prefetch != defaultPrefetch ||
		a.reconnectDelay != 5*time.Second || a.consumerTag != "federation-link-a" || len(a.uris) != 2 {
		t.Errorf("a with defaults = %+v", a)
	}
	if ups, _ := resolve(vp, map[string]any{"federation-upstream-pattern": "^b"}); len(ups) != 1 || ups[0].name != "b" {
		t.Errorf("pattern ^b = %+v", ups)
	}
	if _, reason := resolve(vp, map[string]any{"federation-upstream-set": "nope"}); reason != `upstream set "nope" not found` {
		t.Errorf("missing set: %q", reason)
	}
	if _, reason := resolve(vp, map[string]any{"federation-upstream": "nope"}); reason != `upstream "nope" not found` {
		t.Errorf("missing upstream: %q", reason)
	}
}

// The upstream queue is named as upstream_queue_name/3 names it.
func TestUpstreamQueueName(t *testing.T) {
	for _, c := range []struct{ upX, upVh, downX, downVh, want string }{
		{"x", "/", "x", "/", "federation: x -> c"},
		{"up", "/", "x", "/", "federation: up -> c:x"},
		{"x", "v1", "x", "v2", "federation: x -> c:v2:x"},
	} {
		if got := upstreamQueueName(c.upX, c.upVh, c.downX, c.downVh, "c"); got != c.want {
			t.Errorf("%+v: %q", c, got)
		}
	}
}

// The link drops what an upstream without x-federation-upstream routes to
// it anyway: past max-hops or been here already.
func TestShouldForward(t *testing.T) {
	hop := func(cluster, vhost string) amqp.Table { return amqp.Table{"cluster-name": cluster, "vhost": vhost} }
	for _, c := range []struct {
		h    amqp.Table
		max  int
		want bool
	}{
		{nil, 1, true},
		{amqp.Table{"x-received-from": []any{hop("a", "/")}}, 1, false},
		{amqp.Table{"x-received-from": []any{hop("a", "/")}}, 2, true},
		{amqp.Table{"x-received-from": []any{hop("me", "/")}}, 5, false},
		{amqp.Table{"x-received-from": "not an array"}, 1, true},
	} {
		if got := shouldForward(c.h, c.max, "me", "/"); got != c.want {
			t.Errorf("%v max-hops %d: %v", c.h, c.max, got)
		}
	}
}
