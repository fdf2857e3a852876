package server

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// The runtime parameter components Warren validates, as RabbitMQ 3.10 with
// the federation and shovel plugins does. A component not listed here is
// refused ("component X not found"), as RabbitMQ refuses one whose plugin
// is not enabled.

// componentCheck validates a parameter's value; name is the parameter's
// name, which RabbitMQ's messages use as the object's name.
type componentCheck func(ctx paramCtx, name string, value any) []string

var paramComponents = map[string]componentCheck{
	"federation-upstream":     checkFederationUpstream,
	"federation-upstream-set": checkFederationUpstreamSet,
	"shovel":                  checkShovel,
	vhostLimitsComponent:      checkVhostLimits,
}

// validateParameter checks p as RabbitMQ's rabbit_runtime_parameters:set
// does, returning a *ParameterError with RabbitMQ's text.
func (s *Server) validateParameter(p Parameter, user string) error {
	check, ok := paramComponents[p.Component]
	if !ok {
		return validationFailed([]string{fmt.Sprintf("component %s not found", p.Component)})
	}
	if errs := check(paramCtx{srv: s, user: user}, p.Name, p.Value); len(errs) > 0 {
		return validationFailed(errs)
	}
	return nil
}

// federationShared are the keys an upstream and an upstream set's member
// share (rabbit_federation_parameters:shared_validation/0).
var federationShared = []constraint{
	optional("exchange", checkBinary),
	optional("queue", checkBinary),
	optional("consumer-tag", checkBinary),
	optional("prefetch-count", checkNumber),
	optional("reconnect-delay", checkNumber),
	optional("max-hops", checkNumber),
	optional("expires", checkNumber),
	optional("message-ttl", checkNumber),
	optional("trust-user-id", checkBoolean),
	optional("ack-mode", checkEnum("no-ack", "on-publish", "on-confirm")),
	optional("resource-cleanup-mode", checkEnum("default", "never")),
	optional("ha-policy", checkBinary),
	optional("bind-nowait", checkBoolean),
	optional("channel-use-mode", checkEnum("multiple", "single")),
}

func checkFederationUpstream(ctx paramCtx, name string, v any) []string {
	cs := append([]constraint{mandatory("uri", checkFederationURI)}, federationShared...)
	return proplist(ctx, name, cs, v)
}

// checkFederationUpstreamSet validates each member of the set's list.
func checkFederationUpstreamSet(ctx paramCtx, name string, v any) []string {
	members, ok := v.([]any)
	if !ok {
		return []string{erlMsg(name+" should be list, actually was ", v)}
	}
	cs := append([]constraint{mandatory("upstream", checkBinary)}, federationShared...)
	var out []string
	for _, m := range members {
		out = append(out, proplist(ctx, name, cs, m)...)
	}
	return out
}

// checkFederationURI accepts an AMQP URI or a list of them.
func checkFederationURI(ctx paramCtx, key string, v any) []string {
	return checkURIs(ctx, key, v, false)
}

// checkURIs is validate_uri: a binary or a list of binaries, each a valid
// AMQP URI; withUser also checks, as the shovel does, that the user making
// the change may use the vhost of a direct (host-less) URI.
func checkURIs(ctx paramCtx, key string, v any, withUser bool) []string {
	switch v := v.(type) {
	case string:
		if reason := amqpURIError(v); reason != "" {
			return []string{fmt.Sprintf("\"%s\" not a valid URI: {%s,%s}", v, reason, erlString(v))}
		}
		if withUser {
			return ctx.checkDirectVhost(v)
		}
		return nil
	case []any:
		for _, u := range v {
			if errs := checkURIs(ctx, key, u, withUser); len(errs) > 0 {
				return errs[:1]
			}
		}
		return nil
	}
	return []string{erlMsg(key+" should be list, actually was ", v)}
}

// erlString prints s as ~p prints an Erlang string (a list of characters).
func erlString(s string) string {
	b := erlFormat(termBin(s))
	return strings.TrimSuffix(strings.TrimPrefix(b, "<<"), ">>")
}

var uriScheme = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*):(.*)$`)

// amqpURIError is the reason amqp_uri:parse/1 gives for a URI it refuses,
// as Erlang prints it, or "" for a URI it accepts. It covers the mistakes
// people make (a missing or wrong scheme, a bad port, a vhost with a
// slash); amqp_uri refuses some rarer malformations this accepts.
func amqpURIError(uri string) string {
	m := uriScheme.FindStringSubmatch(uri)
	if m == nil {
		return "{unable_to_parse_uri,no_scheme}"
	}
	scheme := strings.ToLower(m[1])
	if scheme != "amqp" && scheme != "amqps" {
		return fmt.Sprintf("{unexpected_uri_scheme,%s}", erlString(scheme))
	}
	if !strings.HasPrefix(m[2], "//") {
		return "{case_clause,undefined}"
	}
	u, err := url.Parse(uri)
	if err != nil {
		return "{unable_to_parse_uri,malformed_uri}"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err == nil && n > 65535 {
			return fmt.Sprintf("{port_out_of_range,%d}", n)
		}
	}
	if vhost := strings.TrimPrefix(u.EscapedPath(), "/"); strings.Contains(vhost, "/") {
		return fmt.Sprintf("{invalid_vhost,%s}", erlString(vhost))
	}
	return ""
}

// checkDirectVhost refuses a direct URI (amqp:///vhost, no host) to a
// vhost that does not exist or that the user may not use.
func (ctx paramCtx) checkDirectVhost(uri string) []string {
	u, err := url.Parse(uri)
	if ctx.user == "" || err != nil || u.Host != "" {
		return nil
	}
	vhost := strings.TrimPrefix(u.Path, "/")
	if vhost == "" {
		vhost = "/"
	}
	if ctx.srv.Vhost(vhost) != nil && ctx.srv.users.permission(ctx.user, vhost) != nil {
		return nil
	}
	return []string{fmt.Sprintf("user \"%s\" may not connect to vhost \"%s\"", ctx.user, vhost)}
}

// The keys RabbitMQ 3.10 accepts in queue declare and consume arguments
// (rabbit_amqqueue:declare_args/0, consume_args/0).
var (
	queueDeclareArgs = []string{"x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
		"x-dead-letter-strategy", "x-max-length", "x-max-length-bytes", "x-max-in-memory-length",
		"x-max-in-memory-bytes", "x-max-priority", "x-overflow", "x-queue-mode", "x-queue-version",
		"x-single-active-consumer", "x-queue-type", "x-quorum-initial-group-size", "x-max-age",
		"x-stream-max-segment-size-bytes", "x-initial-cluster-size", "x-queue-leader-locator"}
	consumeArgs = []string{"x-priority", "x-cancel-on-ha-failover", "x-stream-offset"}
)

// checkShovel is rabbit_shovel_parameters:validate/5: the source and
// destination rules, then the keys of both sides for their protocols.
func checkShovel(ctx paramCtx, name string, v any) []string {
	def, ok := v.(map[string]any)
	if !ok {
		return []string{erlMsg(name+" should be an object, actually was ", v)}
	}
	src, dest := shovelProtocol(def, "src-protocol"), shovelProtocol(def, "dest-protocol")
	var out []string
	if src == "amqp091" {
		out = append(out, shovelSourceRules(def)...)
	}
	if dest == "amqp091" {
		if _, ok := def["dest-exchange"]; ok {
			if _, ok := def["dest-queue"]; ok {
				out = append(out, "Cannot specify 'dest-exchange' and 'dest-queue'")
			}
		}
	}
	cs := []constraint{
		optional("reconnect-delay", checkNumber),
		optional("ack-mode", checkEnum("no-ack", "on-publish", "on-confirm")),
		optional("src-protocol", checkEnum("amqp10", "amqp091")),
		optional("dest-protocol", checkEnum("amqp10", "amqp091")),
	}
	cs = append(cs, shovelSource(src)...)
	cs = append(cs, shovelDest(dest)...)
	return append(out, proplist(ctx, name, cs, def)...)
}

// shovelProtocol is a side's protocol; amqp091 unless amqp10 is asked for
// (a bad value is reported by the src-protocol/dest-protocol constraint).
func shovelProtocol(def map[string]any, key string) string {
	if def[key] == "amqp10" {
		return "amqp10"
	}
	return "amqp091"
}

func shovelSourceRules(def map[string]any) []string {
	var out []string
	_, ex := def["src-exchange"]
	_, q := def["src-queue"]
	switch {
	case !ex && !q:
		out = append(out, "Must specify 'src-exchange' or 'src-queue'")
	case ex && q:
		out = append(out, "Cannot specify 'src-exchange' and 'src-queue'")
	}
	after, ok := def["src-delete-after"]
	if !ok {
		after = def["delete-after"]
	}
	if isInteger(after) && def["ack-mode"] == "no-ack" {
		out = append(out, "Cannot specify 'no-ack' and numerical 'delete-after'")
	}
	return out
}

func checkShovelURI(ctx paramCtx, key string, v any) []string { return checkURIs(ctx, key, v, true) }

func checkDeleteAfter(_ paramCtx, key string, v any) []string {
	if v == "never" || v == "queue-length" || isIntegerAtLeast(v, 0) {
		return nil
	}
	return []string{erlMsg(key+" should be a number greater than or equal to 0, \"never\" or \"queue-length\", actually was ", v)}
}

func shovelSource(protocol string) []constraint {
	if protocol == "amqp10" {
		return []constraint{
			mandatory("src-uri", checkShovelURI),
			mandatory("src-address", checkBinary),
			optional("src-prefetch-count", checkNumber),
			optional("src-delete-after", checkDeleteAfter),
		}
	}
	return []constraint{
		mandatory("src-uri", checkShovelURI),
		optional("src-exchange", checkBinary),
		optional("src-exchange-key", checkBinary),
		optional("src-queue", checkBinary),
		optional("src-queue-args", checkKeysIn(queueDeclareArgs...)),
		optional("src-consumer-args", checkKeysIn(consumeArgs...)),
		optional("prefetch-count", checkNumber),
		optional("src-prefetch-count", checkNumber),
		optional("delete-after", checkDeleteAfter),
		optional("src-delete-after", checkDeleteAfter),
	}
}

func shovelDest(protocol string) []constraint {
	if protocol == "amqp10" {
		return []constraint{
			mandatory("dest-uri", checkShovelURI),
			mandatory("dest-address", checkBinary),
			optional("dest-add-forward-headers", checkBoolean),
			optional("dest-add-timestamp-header", checkBoolean),
			optional("dest-application-properties", checkStringMap),
			optional("dest-message-annotations", checkStringMap),
			optional("dest-properties", checkStringMap),
		}
	}
	return []constraint{
		mandatory("dest-uri", checkShovelURI),
		optional("dest-exchange", checkBinary),
		optional("dest-exchange-key", checkBinary),
		optional("dest-queue", checkQueueName),
		optional("dest-queue-args", checkKeysIn(queueDeclareArgs...)),
		optional("add-forward-headers", checkBoolean),
		optional("add-timestamp-header", checkBoolean),
		optional("dest-add-forward-headers", checkBoolean),
		optional("dest-add-timestamp-header", checkBoolean),
		optional("publish-properties", checkPublishProperties),
		optional("dest-publish-properties", checkPublishProperties),
	}
}

// checkStringMap is validate_amqp10_map: an object of binaries.
func checkStringMap(ctx paramCtx, key string, v any) []string {
	m, _ := v.(map[string]any)
	cs := make([]constraint, 0, len(m))
	for _, k := range sortedKeys(m) {
		cs = append(cs, optional(k, checkBinary))
	}
	return proplist(ctx, key, cs, v)
}

func checkPublishProperties(ctx paramCtx, key string, v any) []string {
	str, num := checkBinary, checkNumber
	return proplist(ctx, key, []constraint{
		optional("content_type", str), optional("content_encoding", str), optional("delivery_mode", num),
		optional("priority", num), optional("correlation_id", str), optional("reply_to", str),
		optional("expiration", str), optional("message_id", str), optional("timestamp", num),
		optional("type", str), optional("user_id", str), optional("app_id", str), optional("cluster_id", str),
	}, v)
}

// vhostLimitsComponent is the component of a vhost's limits, kept as the
// runtime parameter named vhostLimitsName (rabbit_vhost_limit).
const (
	vhostLimitsComponent = "vhost-limits"
	vhostLimitsName      = "limits"
)

func checkVhostLimits(ctx paramCtx, name string, v any) []string {
	if name != vhostLimitsName {
		// RabbitMQ stores such a parameter and then fails (500) applying it.
		return []string{fmt.Sprintf("vhost-limits parameter must be named \"%s\", not \"%s\"", vhostLimitsName, name)}
	}
	return proplist(ctx, name, limitConstraints(vhostLimitKeys), v)
}

// The limits a vhost and a user may have.
var (
	vhostLimitKeys = []string{"max-connections", "max-queues"}
	userLimitKeys  = []string{"max-connections", "max-channels"}
)

func limitConstraints(keys []string) []constraint {
	cs := make([]constraint, len(keys))
	for i, k := range keys {
		cs[i] = optional(k, checkInteger)
	}
	return cs
}

// ValidateParameter checks p as a runtime parameter set by the broker
// itself (no user's permissions): how cmd/warren checks the static
// shovels of its configuration file before it runs them.
func (s *Server) ValidateParameter(p Parameter) error {
	return s.validateParameter(p, "")
}
