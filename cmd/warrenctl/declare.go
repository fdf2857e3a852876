package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
)

func declareCommands() []*command {
	return []*command{
		declareQueue(), deleteQueue(), purgeQueue(),
		declareExchange(), deleteExchange(),
		declareBinding(), deleteBinding(),
		addVhost(), deleteVhost(),
	}
}

// reportPut says whether a PUT created the object (201) or found it (204).
func (e *env) reportPut(resp *response, what string) error {
	if e.g.format == "json" {
		return nil
	}
	verb := "declared"
	if resp.status == http.StatusNoContent {
		verb = "already exists; unchanged"
	}
	_, err := fmt.Fprintf(e.stdout, "%s %s\n", what, verb)
	return err
}

// say prints a confirmation in table mode; JSON mode prints only API answers.
func (e *env) say(format string, a ...any) error {
	if e.g.format == "json" {
		return nil
	}
	_, err := fmt.Fprintf(e.stdout, format+"\n", a...)
	return err
}

func (e *env) describe(kind, name string) string {
	return fmt.Sprintf("%s %q in vhost %q", kind, name, e.g.vhost)
}

func declareQueue() *command {
	var durable, autoDelete bool
	var qtype string
	var args tableFlag
	return &command{
		name: "declare queue", synopsis: "NAME", summary: "declare a queue (in --vhost)",
		minArgs: 1, maxArgs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&durable, "durable", true, "survive a broker restart")
			fs.BoolVar(&autoDelete, "auto-delete", false, "delete when the last consumer goes")
			fs.StringVar(&qtype, "type", "", "queue type (x-queue-type): classic, quorum or stream")
			addTableFlags(fs, &args, "arguments", "arg", "queue arguments")
		},
		run: func(e *env, a []string) error {
			arguments := args.object()
			if qtype != "" {
				arguments["x-queue-type"] = qtype
			}
			body := map[string]any{"durable": durable, "auto_delete": autoDelete, "arguments": arguments}
			resp, err := e.c.call(request{method: http.MethodPut, path: apiPath("queues", e.g.vhost, a[0]), body: body})
			if err != nil {
				return err
			}
			return e.reportPut(resp, e.describe("queue", a[0]))
		},
	}
}

func deleteQueue() *command {
	var ifEmpty, ifUnused bool
	return &command{
		name: "delete queue", synopsis: "NAME", summary: "delete a queue and its messages",
		minArgs: 1, maxArgs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&ifEmpty, "if-empty", false, "only if it holds no messages")
			fs.BoolVar(&ifUnused, "if-unused", false, "only if it has no consumers")
		},
		run: func(e *env, a []string) error {
			q := url.Values{}
			if ifEmpty {
				q.Set("if-empty", "true")
			}
			if ifUnused {
				q.Set("if-unused", "true")
			}
			if _, err := e.c.call(request{method: http.MethodDelete, path: apiPath("queues", e.g.vhost, a[0]), query: q}); err != nil {
				return err
			}
			return e.say("%s deleted", e.describe("queue", a[0]))
		},
	}
}

func purgeQueue() *command {
	return &command{
		name: "purge queue", synopsis: "NAME", summary: "drop a queue's ready messages",
		minArgs: 1, maxArgs: 1,
		run: func(e *env, a []string) error {
			if _, err := e.c.call(request{method: http.MethodDelete, path: apiPath("queues", e.g.vhost, a[0], "contents")}); err != nil {
				return err
			}
			return e.say("%s purged", e.describe("queue", a[0]))
		},
	}
}

func declareExchange() *command {
	var kind string
	var durable, autoDelete, internal bool
	var args tableFlag
	return &command{
		name: "declare exchange", synopsis: "NAME", summary: "declare an exchange (in --vhost)",
		minArgs: 1, maxArgs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&kind, "type", "direct", "direct, fanout, topic or headers")
			fs.BoolVar(&durable, "durable", true, "survive a broker restart")
			fs.BoolVar(&autoDelete, "auto-delete", false, "delete when the last binding goes")
			fs.BoolVar(&internal, "internal", false, "refuse publishes from clients (exchange-to-exchange only)")
			addTableFlags(fs, &args, "arguments", "arg", "exchange arguments")
		},
		run: func(e *env, a []string) error {
			body := map[string]any{"type": kind, "durable": durable, "auto_delete": autoDelete, "internal": internal, "arguments": args.object()}
			resp, err := e.c.call(request{method: http.MethodPut, path: apiPath("exchanges", e.g.vhost, a[0]), body: body})
			if err != nil {
				return err
			}
			return e.reportPut(resp, e.describe("exchange", a[0]))
		},
	}
}

func deleteExchange() *command {
	var ifUnused bool
	return &command{
		name: "delete exchange", synopsis: "NAME", summary: "delete an exchange and its bindings",
		minArgs: 1, maxArgs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&ifUnused, "if-unused", false, "only if it has no bindings")
		},
		run: func(e *env, a []string) error {
			q := url.Values{}
			if ifUnused {
				q.Set("if-unused", "true")
			}
			if _, err := e.c.call(request{method: http.MethodDelete, path: apiPath("exchanges", e.g.vhost, a[0]), query: q}); err != nil {
				return err
			}
			return e.say("%s deleted", e.describe("exchange", a[0]))
		},
	}
}

// bindingFlags are the flags naming one binding.
type bindingFlags struct {
	source, destination, destType, key string
	args                               tableFlag
}

func (b *bindingFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&b.source, "source", "", "source exchange (required)")
	fs.StringVar(&b.destination, "destination", "", "destination queue or exchange (required)")
	fs.StringVar(&b.destType, "destination-type", "queue", "queue or exchange")
	fs.StringVar(&b.key, "routing-key", "", "routing key (binding key)")
	addTableFlags(fs, &b.args, "arguments", "arg", "binding arguments")
}

// path returns /api/bindings/{vhost}/e/{source}/{q|e}/{destination}.
func (b *bindingFlags) path(vhost string) (string, error) {
	if b.source == "" || b.destination == "" {
		return "", usagef("--source and --destination are required")
	}
	var d string
	switch b.destType {
	case "queue", "q":
		d = "q"
	case "exchange", "e":
		d = "e"
	default:
		return "", usagef("--destination-type must be queue or exchange, not %q", b.destType)
	}
	return apiPath("bindings", vhost, "e", exchangeSegment(b.source), d, exchangeSegment(b.destination)), nil
}

func (b *bindingFlags) String() string {
	s := fmt.Sprintf("binding from exchange %q to %s %q", b.source, b.destType, b.destination)
	if b.key != "" {
		s += fmt.Sprintf(" with routing key %q", b.key)
	}
	return s
}

func declareBinding() *command {
	var b bindingFlags
	return &command{
		name: "declare binding", summary: "bind a queue or exchange to an exchange (in --vhost)",
		flags: b.register,
		run: func(e *env, _ []string) error {
			path, err := b.path(e.g.vhost)
			if err != nil {
				return err
			}
			body := map[string]any{"routing_key": b.key, "arguments": b.args.object()}
			resp, err := e.c.call(request{method: http.MethodPost, path: path, body: body})
			if err != nil {
				return err
			}
			msg := b.String() + " created"
			// The Location header ends with the binding's properties key,
			// percent-encoded once more as a path segment.
			if loc := resp.header.Get("Location"); loc != "" {
				key := loc[strings.LastIndex(loc, "/")+1:]
				if k, err := url.PathUnescape(key); err == nil {
					key = k
				}
				msg += " (properties key " + key + ")"
			}
			return e.say("%s", msg)
		},
	}
}

func deleteBinding() *command {
	var b bindingFlags
	var propsKey string
	return &command{
		name: "delete binding", summary: "remove a binding, found by routing key and arguments (or --properties-key)",
		flags: func(fs *flag.FlagSet) {
			b.register(fs)
			fs.StringVar(&propsKey, "properties-key", "", "the binding's properties_key, as listed by the API")
		},
		run: func(e *env, _ []string) error {
			path, err := b.path(e.g.vhost)
			if err != nil {
				return err
			}
			if propsKey == "" {
				if propsKey, err = e.findBinding(path, &b); err != nil {
					return err
				}
			}
			if _, err := e.c.call(request{method: http.MethodDelete, path: path + "/" + url.PathEscape(propsKey)}); err != nil {
				return err
			}
			return e.say("%s deleted", b.String())
		},
	}
}

// findBinding returns the properties_key of the one binding between the ends
// in path that has b's routing key (and arguments, when given).
func (e *env) findBinding(path string, b *bindingFlags) (string, error) {
	var list []map[string]any
	if err := e.c.getJSON(path, nil, &list); err != nil {
		return "", err
	}
	var keys []string
	for _, x := range list {
		if x["routing_key"] != b.key {
			continue
		}
		if b.args.values != nil && !sameJSON(x["arguments"], b.args.values) {
			continue
		}
		if k, ok := x["properties_key"].(string); ok {
			keys = append(keys, k)
		}
	}
	switch len(keys) {
	case 0:
		return "", fmt.Errorf("no %s in vhost %q", b.String(), e.g.vhost)
	case 1:
		return keys[0], nil
	}
	return "", usagef("%d bindings match (they differ in arguments); give --arguments or --properties-key (one of %s)",
		len(keys), strings.Join(keys, ", "))
}

// sameJSON compares a decoded API value with flag-given JSON, numbers by
// value.
func sameJSON(a, b any) bool {
	norm := func(v any) any {
		raw, err := json.Marshal(v)
		if err != nil {
			return v
		}
		var out any
		if json.Unmarshal(raw, &out) != nil {
			return v
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func addVhost() *command {
	var description string
	return &command{
		name: "add vhost", synopsis: "NAME", summary: "create a virtual host",
		minArgs: 1, maxArgs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&description, "description", "", "free text shown in listings")
		},
		run: func(e *env, a []string) error {
			body := map[string]any{}
			if description != "" {
				body["description"] = description
			}
			resp, err := e.c.call(request{method: http.MethodPut, path: apiPath("vhosts", a[0]), body: body})
			if err != nil {
				return err
			}
			return e.reportPut(resp, fmt.Sprintf("vhost %q", a[0]))
		},
	}
}

func deleteVhost() *command {
	return &command{
		name: "delete vhost", synopsis: "NAME", summary: "delete a virtual host and everything in it",
		minArgs: 1, maxArgs: 1,
		run: func(e *env, a []string) error {
			if _, err := e.c.call(request{method: http.MethodDelete, path: apiPath("vhosts", a[0])}); err != nil {
				return err
			}
			return e.say("vhost %q deleted", a[0])
		},
	}
}
