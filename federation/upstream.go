package federation

import (
	"encoding/json"
	"fmt"
	"github.com/warrenmq/warren/internal/paramvalue"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// upstream is one federation-upstream parameter read with the plugin's
// defaults (rabbit_federation_upstream), with an upstream set member's
// keys laid over it. The broker validated the values when they were set,
// so reading them only falls back to defaults.
type upstream struct {
	name           string
	uris           []string
	exchange       string // "" = the downstream exchange's name
	queue          string // "" = the downstream queue's name
	prefetch       int
	reconnectDelay time.Duration
	ackMode        string // on-confirm, on-publish, no-ack
	trustUserID    bool
	maxHops        int
	expires        int64 // x-expires of the upstream queue, ms; 0 = none
	messageTTL     int64 // x-message-ttl of the upstream queue, ms; <0 = none
	consumerTag    string
	queueType      string // x-queue-type of the upstream queue; "" = the upstream's default
	keepUpstream   bool   // resource-cleanup-mode never: a removed link leaves its upstream queue
	haPolicy       string // x-ha-policy of the upstream queue; "" = none
	bindNowait     bool   // bind and unbind upstream without waiting for the answer
	singleChannel  bool   // channel-use-mode single: commands on the consuming channel
}

const (
	defaultPrefetch       = 1000
	defaultReconnectDelay = 5 * time.Second
)

// overlay lays the keys of m over u: an upstream's own keys over the
// defaults, then an upstream set member's over the upstream's.
func (u *upstream) overlay(m map[string]any) {
	if v, ok := m["uri"]; ok {
		u.uris = paramvalue.URIs(v)
	}
	if s, ok := m["exchange"].(string); ok {
		u.exchange = s
	}
	if s, ok := m["queue"].(string); ok {
		u.queue = s
	}
	if s, ok := m["consumer-tag"].(string); ok {
		u.consumerTag = s
	}
	if n, ok := paramvalue.Number(m["prefetch-count"]); ok && n > 0 {
		u.prefetch = int(n)
	}
	if n, ok := paramvalue.Number(m["reconnect-delay"]); ok && n >= 0 {
		u.reconnectDelay = time.Duration(n * float64(time.Second))
	}
	if n, ok := paramvalue.Number(m["max-hops"]); ok && n >= 1 {
		u.maxHops = int(n)
	}
	if n, ok := paramvalue.Number(m["expires"]); ok && n >= 1 {
		u.expires = int64(n)
	}
	if n, ok := paramvalue.Number(m["message-ttl"]); ok && n >= 0 {
		u.messageTTL = int64(n)
	}
	if b, ok := m["trust-user-id"].(bool); ok {
		u.trustUserID = b
	}
	if s, ok := m["ack-mode"].(string); ok {
		u.ackMode = s
	}
	if s, ok := m["queue-type"].(string); ok {
		u.queueType = s
	}
	if s, ok := m["resource-cleanup-mode"].(string); ok {
		u.keepUpstream = s == "never"
	}
	if s, ok := m["ha-policy"].(string); ok {
		u.haPolicy = s
	}
	if b, ok := m["bind-nowait"].(bool); ok {
		u.bindNowait = b
	}
	if s, ok := m["channel-use-mode"].(string); ok {
		u.singleChannel = s == "single"
	}
}

func newUpstream(name string, v any) upstream {
	u := upstream{name: name, prefetch: defaultPrefetch, reconnectDelay: defaultReconnectDelay,
		ackMode: "on-confirm", maxHops: 1, messageTTL: -1, consumerTag: "federation-link-" + name}
	m, _ := v.(map[string]any)
	u.overlay(m)
	return u
}

// vhostParams are one vhost's upstreams and upstream sets.
type vhostParams struct {
	upstreams map[string]any   // name → the parameter's value
	sets      map[string][]any // name → the set's members
}

func indexParams(ps []Param) map[string]*vhostParams {
	out := make(map[string]*vhostParams)
	for _, p := range ps {
		vp := out[p.Vhost]
		if vp == nil {
			vp = &vhostParams{upstreams: map[string]any{}, sets: map[string][]any{}}
			out[p.Vhost] = vp
		}
		switch p.Component {
		case ComponentUpstream:
			vp.upstreams[p.Name] = p.Value
		case ComponentUpstreamSet:
			members, _ := p.Value.([]any)
			vp.sets[p.Name] = members
		}
	}
	return out
}

// resolve is the upstreams a federated object's policy names, in name
// order, as rabbit_federation_upstream:for/1 finds them: the upstream of
// federation-upstream, the members of the set of federation-upstream-set
// (the implicit set "all" being every upstream of the vhost), or the
// upstreams whose name matches federation-upstream-pattern. A set or an
// upstream that does not exist yields a reason instead.
func resolve(vp *vhostParams, policy map[string]any) ([]upstream, string) {
	if vp == nil {
		vp = &vhostParams{}
	}
	if name, ok := policy["federation-upstream"].(string); ok {
		v, found := vp.upstreams[name]
		if !found {
			return nil, fmt.Sprintf("upstream %q not found", name)
		}
		return []upstream{newUpstream(name, v)}, ""
	}
	if pat, ok := policy["federation-upstream-pattern"].(string); ok {
		re, err := regexp.Compile(pat)
		if err != nil {
			return nil, fmt.Sprintf("federation-upstream-pattern: %v", err)
		}
		var out []upstream
		for _, name := range sortedKeys(vp.upstreams) {
			if re.MatchString(name) {
				out = append(out, newUpstream(name, vp.upstreams[name]))
			}
		}
		return out, ""
	}
	set, ok := policy["federation-upstream-set"].(string)
	if !ok {
		return nil, ""
	}
	if set == "all" {
		var out []upstream
		for _, name := range sortedKeys(vp.upstreams) {
			out = append(out, newUpstream(name, vp.upstreams[name]))
		}
		return out, ""
	}
	members, found := vp.sets[set]
	if !found {
		return nil, fmt.Sprintf("upstream set %q not found", set)
	}
	var out []upstream
	for _, m := range members {
		mm, _ := m.(map[string]any)
		name, _ := mm["upstream"].(string)
		v, found := vp.upstreams[name]
		if !found {
			// The plugin skips a member naming no upstream.
			continue
		}
		u := newUpstream(name, v)
		u.overlay(mm)
		out = append(out, u)
	}
	return out, ""
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// uriVhost is the vhost a URI names; a URI without one (amqp://host or
// amqp://host/) means the downstream object's own vhost, as amqp_uri
// parses it with that default.
func uriVhost(uri, downstream string) string {
	u, err := url.Parse(uri)
	if err != nil || u.Path == "" || u.Path == "/" {
		return downstream
	}
	return u.Path[1:]
}

// redactURI is a URI as the status and the x-received-from header show
// it: without its credentials.
func redactURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return ""
	}
	u.User = nil
	if u.Host == "" {
		return u.Scheme + "://" + u.EscapedPath()
	}
	return u.String()
}

// table turns a JSON-ish map into an AMQP table, whole numbers as
// integers, as the broker's arguments carry them.
func table(m map[string]any) amqp.Table {
	if m == nil {
		return nil
	}
	t := make(amqp.Table, len(m))
	for k, x := range m {
		t[k] = amqpValue(x)
	}
	return t
}

func amqpValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		return table(x)
	case amqp.Table:
		return table(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = amqpValue(e)
		}
		return out
	}
	return v
}
