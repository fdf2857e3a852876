package route

import (
	"errors"
	"testing"

	"github.com/warrenmq/warren/amqp"
)

// An x-federation-upstream exchange routes as a fanout, but not a message
// that has made x-max-hops hops or has been through its downstream, and
// refuses a missing or non-long x-max-hops with the plugin's texts.
func TestFederationUpstreamMatch(t *testing.T) {
	m, err := New[int](KindFederationUpstream, amqp.Table{"x-max-hops": int64(2), "x-downstream-name": "down", "x-downstream-vhost": "/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Add(Binding[int]{Dest: 1})
	m.Add(Binding[int]{Dest: 2, Key: "k"})
	hop := func(cluster, vhost string) amqp.Table { return amqp.Table{"cluster-name": cluster, "vhost": vhost} }
	for _, c := range []struct {
		name    string
		headers amqp.Table
		want    int
	}{
		{"no header", nil, 2},
		{"one hop from elsewhere", amqp.Table{"x-received-from": []any{hop("other", "/")}}, 2},
		{"max-hops reached", amqp.Table{"x-received-from": []any{hop("a", "/"), hop("b", "/")}}, 0},
		{"been downstream", amqp.Table{"x-received-from": []any{hop("down", "/")}}, 0},
		{"downstream's cluster, other vhost", amqp.Table{"x-received-from": []any{hop("down", "v")}}, 2},
	} {
		n := 0
		m.Match("x", c.headers, func(int) { n++ })
		if n != c.want {
			t.Errorf("%s: routed to %d, want %d", c.name, n, c.want)
		}
	}
	for want, args := range map[string]amqp.Table{
		"Argument x-max-hops missing":              {},
		"Argument x-max-hops must be of type long": {"x-max-hops": "1"},
	} {
		_, err := New[int](KindFederationUpstream, args, nil)
		var ae *ArgsError
		if !errors.As(err, &ae) || ae.Text != want || !errors.Is(err, ErrFederationArgs) {
			t.Errorf("args %v: %v, want %q", args, err, want)
		}
	}
}
