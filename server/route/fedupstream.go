package route

import (
	"errors"

	"github.com/warrenmq/warren/amqp"
)

// KindFederationUpstream is the exchange type rabbitmq_federation's
// exchange links declare on their upstream (rabbit_federation_upstream_
// exchange): a fanout that keeps back the messages its downstream would
// drop anyway, those that have made x-max-hops hops or have been through
// the downstream (x-downstream-name, x-downstream-vhost) already, so they
// do not cross the network.
const KindFederationUpstream = "x-federation-upstream"

// ErrFederationArgs is the sentinel of an x-federation-upstream exchange
// declared without a long x-max-hops.
var ErrFederationArgs = errors.New("route: x-federation-upstream needs a long x-max-hops")

// FederationUpstream is a Fanout filtered by the x-received-from header.
type FederationUpstream[D comparable] struct {
	*Fanout[D]
	maxHops           int64
	downstream, vhost string // "" when the link did not say (links older than 3.3.0, 3.8.9)
}

// NewFederationUpstream returns the matcher for args, refusing an
// x-max-hops that is missing or not a long as validate/1 does.
func NewFederationUpstream[D comparable](args amqp.Table) (*FederationUpstream[D], error) {
	v, ok := args["x-max-hops"]
	if !ok {
		return nil, &ArgsError{Text: "Argument x-max-hops missing", Err: ErrFederationArgs}
	}
	hops, ok := v.(int64)
	if !ok {
		return nil, &ArgsError{Text: "Argument x-max-hops must be of type long", Err: ErrFederationArgs}
	}
	m := &FederationUpstream[D]{Fanout: NewFanout[D](), maxHops: hops}
	m.downstream, _ = args["x-downstream-name"].(string)
	m.vhost, _ = args["x-downstream-vhost"].(string)
	return m, nil
}

// Match visits every destination unless the message should not go on to
// the downstream (rabbit_federation_util:should_forward/4).
func (m *FederationUpstream[D]) Match(key string, headers amqp.Table, visit func(D)) {
	if hops, ok := headers["x-received-from"].([]any); ok {
		if int64(len(hops)) >= m.maxHops || seenBy(hops, m.downstream, m.vhost) {
			return
		}
	}
	m.Fanout.Match(key, headers, visit)
}

// seenBy reports whether a hop names the downstream's cluster and vhost.
func seenBy(hops []any, cluster, vhost string) bool {
	for _, h := range hops {
		if t, ok := h.(amqp.Table); ok && t["cluster-name"] == cluster && t["vhost"] == vhost {
			return true
		}
	}
	return false
}

var _ Matcher[int] = (*FederationUpstream[int])(nil)
