package shovel

import (
	"encoding/json"
	"github.com/warrenmq/warren/internal/paramvalue"
	"net/url"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// definition is a shovel parameter's value read with the plugin's defaults
// (rabbit_shovel_parameters). The broker validated the value when it was
// set, so reading it only falls back to defaults.
type definition struct {
	srcURIs, destURIs            []string
	srcQueue, srcExchange        string
	srcExchangeKey               string
	srcQueueArgs, srcConsumeArgs amqp.Table
	destQueue, destExchange      string
	destExchangeKey              *string // nil: keep the message's routing key
	destQueueArgs                amqp.Table
	ackMode                      string // on-confirm, on-publish, no-ack
	prefetch                     int
	reconnectDelay               time.Duration
	deleteAfter                  int64 // deleteNever, deleteQueueLength or a count
	forwardHeaders, timestampHdr bool
	publishProps                 map[string]any
	unsupported                  string // why the shovel cannot run (amqp10)
}

const (
	deleteNever       = -1
	deleteQueueLength = -2

	defaultPrefetch       = 1000
	defaultReconnectDelay = 5 * time.Second
)

// parseDefinition reads a shovel parameter's value.
func parseDefinition(v any) definition {
	m, _ := v.(map[string]any)
	d := definition{
		srcURIs: paramvalue.URIs(m["src-uri"]), destURIs: paramvalue.URIs(m["dest-uri"]),
		srcQueue: str(m, "src-queue"), srcExchange: str(m, "src-exchange"),
		srcExchangeKey: "#", destQueue: str(m, "dest-queue"), destExchange: str(m, "dest-exchange"),
		srcQueueArgs: table(m["src-queue-args"]), srcConsumeArgs: table(m["src-consumer-args"]),
		destQueueArgs: table(m["dest-queue-args"]),
		ackMode:       "on-confirm", prefetch: defaultPrefetch, reconnectDelay: defaultReconnectDelay,
		deleteAfter: deleteNever,
	}
	if k, ok := m["src-exchange-key"].(string); ok {
		d.srcExchangeKey = k
	}
	if k, ok := m["dest-exchange-key"].(string); ok {
		d.destExchangeKey = &k
	}
	if a, ok := m["ack-mode"].(string); ok {
		d.ackMode = a
	}
	if n, ok := paramvalue.Number(first(m, "src-prefetch-count", "prefetch-count")); ok && n > 0 {
		d.prefetch = int(n)
	}
	if n, ok := paramvalue.Number(m["reconnect-delay"]); ok && n >= 0 {
		d.reconnectDelay = time.Duration(n * float64(time.Second))
	}
	switch after := first(m, "src-delete-after", "delete-after"); after {
	case "queue-length":
		d.deleteAfter = deleteQueueLength
	default:
		if n, ok := paramvalue.Number(after); ok {
			d.deleteAfter = int64(n)
		}
	}
	d.forwardHeaders = first(m, "dest-add-forward-headers", "add-forward-headers") == true
	d.timestampHdr = first(m, "dest-add-timestamp-header", "add-timestamp-header") == true
	d.publishProps, _ = first(m, "dest-publish-properties", "publish-properties").(map[string]any)
	if m["src-protocol"] == "amqp10" || m["dest-protocol"] == "amqp10" {
		d.unsupported = "AMQP 1.0 shovels are not supported by Warren (src-protocol and dest-protocol must be amqp091)"
	}
	return d
}

// first is the value of the first of keys that is set: the plugin's
// prefixed key (src-, dest-) wins over its older unprefixed name.
func first(m map[string]any, keys ...string) any {
	for _, k := range keys {
		if v, ok := m[k]; ok {
			return v
		}
	}
	return nil
}

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

// table turns a JSON object of arguments into an AMQP table, numbers as
// integers where they are whole (x-max-length and the like).
func table(v any) amqp.Table {
	m, ok := v.(map[string]any)
	if !ok {
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
	case float64:
		if x == float64(int64(x)) {
			return int64(x)
		}
		return x
	case map[string]any:
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

// isLocal reports whether uri is a direct URI (amqp:// with no host):
// the broker the shovel runs in.
func isLocal(uri string) (vhost string, ok bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Host != "" {
		return "", false
	}
	vhost = u.Path
	if len(vhost) > 0 && vhost[0] == '/' {
		vhost = vhost[1:]
	}
	if vhost == "" {
		vhost = "/"
	}
	return vhost, true
}

// redactURI is a URI as the status shows it: without its credentials.
func redactURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return ""
	}
	u.User = nil
	if u.Host == "" {
		// A direct URI: url.URL would print amqp:///vh as amqp:/vh.
		return u.Scheme + "://" + u.EscapedPath()
	}
	return u.String()
}
