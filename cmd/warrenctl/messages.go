package main

import (
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"unicode/utf8"
)

// maxPayload bounds a payload read from a file or stdin: the API carries it
// inside one JSON document.
const maxPayload = 128 << 20

func messageCommands() []*command { return []*command{publish(), get()} }

func publish() *command {
	var exchange, key, payload, payloadFile string
	var persistent bool
	var props, headers tableFlag
	return &command{
		name: "publish", summary: "publish one message through an exchange (in --vhost)",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&exchange, "exchange", "", "exchange (default: the default exchange, which routes by queue name)")
			fs.StringVar(&key, "routing-key", "", "routing key")
			fs.StringVar(&payload, "payload", "", "message body")
			fs.StringVar(&payloadFile, "payload-file", "", "read the body from a file, or - for stdin")
			fs.BoolVar(&persistent, "persistent", false, "delivery mode 2 (persistent)")
			addTableFlags(fs, &props, "properties", "property", "message properties (content_type, correlation_id, expiration...)")
			fs.Var(pairFlag{&headers}, "header", "a message header as key=value (repeatable)")
		},
		run: func(e *env, _ []string) error {
			body, err := e.payload(payload, payloadFile)
			if err != nil {
				return err
			}
			properties := props.object()
			if persistent {
				properties["delivery_mode"] = 2
			}
			if headers.values != nil {
				properties["headers"] = headers.values
			}
			req := map[string]any{"properties": properties, "routing_key": key}
			// The API carries the body in JSON: text as it is, anything else
			// base64-encoded.
			if utf8.Valid(body) {
				req["payload"], req["payload_encoding"] = string(body), "string"
			} else {
				req["payload"], req["payload_encoding"] = base64.StdEncoding.EncodeToString(body), "base64"
			}
			path := apiPath("exchanges", e.g.vhost, exchangeSegment(exchange), "publish")
			resp, err := e.c.call(request{method: http.MethodPost, path: path, body: req})
			if err != nil {
				return err
			}
			if e.g.format == "json" {
				return e.printJSON(resp.body)
			}
			var answer struct {
				Routed bool `json:"routed"`
			}
			if err := decodeJSON(resp.body, &answer, "POST "+path); err != nil {
				return err
			}
			if !answer.Routed {
				return e.say("Message published but NOT routed: no queue is bound for routing key %q", key)
			}
			return e.say("Message published and routed")
		},
	}
}

// payload returns the body from --payload or --payload-file.
func (e *env) payload(payload, file string) ([]byte, error) {
	if file == "" {
		return []byte(payload), nil
	}
	if payload != "" {
		return nil, usagef("give --payload or --payload-file, not both")
	}
	var r io.Reader = e.stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("reading the payload: %w", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxPayload+1))
	if err != nil {
		return nil, fmt.Errorf("reading the payload: %w", err)
	}
	if len(b) > maxPayload {
		return nil, fmt.Errorf("payload larger than %d bytes", maxPayload)
	}
	return b, nil
}

func get() *command {
	var count, truncate int
	var ackmode, encoding string
	return &command{
		name: "get", synopsis: "QUEUE", summary: "fetch messages from a queue (in --vhost); by default they go back to the queue",
		minArgs: 1, maxArgs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&count, "count", 1, "how many messages at most")
			fs.StringVar(&ackmode, "ackmode", "ack_requeue_true",
				"ack_requeue_true (look, leave them), ack_requeue_false (take them), reject_requeue_true or reject_requeue_false")
			fs.StringVar(&encoding, "encoding", "auto", "auto (text as text) or base64")
			fs.IntVar(&truncate, "truncate", 0, "cut payloads to this many bytes (0: whole)")
		},
		run: func(e *env, a []string) error {
			switch ackmode {
			case "ack_requeue_true", "ack_requeue_false", "reject_requeue_true", "reject_requeue_false":
			default:
				return usagef("--ackmode %q is not one of ack_requeue_true, ack_requeue_false, reject_requeue_true, reject_requeue_false", ackmode)
			}
			if count < 1 {
				return usagef("--count must be at least 1")
			}
			req := map[string]any{"count": count, "ackmode": ackmode, "encoding": encoding}
			if truncate > 0 {
				req["truncate"] = truncate
			}
			path := apiPath("queues", e.g.vhost, a[0], "get")
			resp, err := e.c.call(request{method: http.MethodPost, path: path, body: req})
			if err != nil {
				return err
			}
			if e.g.format == "json" {
				return e.printJSON(resp.body)
			}
			var msgs []map[string]any
			if err := decodeJSON(resp.body, &msgs, "POST "+path); err != nil {
				return err
			}
			if len(msgs) == 0 {
				return e.say("%s is empty", e.describe("queue", a[0]))
			}
			return writeTable(e.stdout, msgs, []string{"routing_key", "exchange", "message_count", "redelivered",
				"payload_bytes", "payload_encoding", "properties", "payload"})
		},
	}
}
