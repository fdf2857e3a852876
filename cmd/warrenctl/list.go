package main

import (
	"flag"
	"strings"
)

// listing is one "list KIND" command: where the objects are and which
// columns a table shows by default.
type listing struct {
	kind    string
	summary string
	// path is the API path for all objects; vhostPath the one for a vhost's
	// ("" when the kind is not per vhost).
	path, vhostPath string
	columns         []string
}

var listings = []listing{
	{"queues", "list queues", "queues", "queues",
		[]string{"vhost", "name", "type", "durable", "auto_delete", "messages_ready", "messages_unacknowledged", "consumers"}},
	{"exchanges", "list exchanges", "exchanges", "exchanges",
		[]string{"vhost", "name", "type", "durable", "auto_delete", "internal"}},
	{"bindings", "list bindings", "bindings", "bindings",
		[]string{"vhost", "source", "destination", "destination_type", "routing_key", "arguments"}},
	{"connections", "list client connections", "connections", "vhosts/{vhost}/connections",
		[]string{"name", "user", "vhost", "protocol", "channels", "state"}},
	{"channels", "list channels", "channels", "vhosts/{vhost}/channels",
		[]string{"name", "user", "vhost", "consumer_count", "prefetch_count", "messages_unacknowledged", "confirm"}},
	{"consumers", "list consumers", "consumers", "consumers",
		[]string{"queue.vhost", "queue.name", "consumer_tag", "channel_details.name", "ack_required", "prefetch_count", "active"}},
	{"users", "list users", "users", "",
		[]string{"name", "tags"}},
	{"vhosts", "list virtual hosts", "vhosts", "",
		[]string{"name", "description", "messages", "tracing"}},
	{"policies", "list policies", "policies", "policies",
		[]string{"vhost", "name", "pattern", "apply-to", "priority", "definition"}},
	{"permissions", "list user permissions", "permissions", "vhosts/{vhost}/permissions",
		[]string{"user", "vhost", "configure", "write", "read"}},
}

func listCommands() []*command {
	out := make([]*command, 0, len(listings))
	for _, l := range listings {
		var columns string
		out = append(out, &command{
			name:    "list " + l.kind,
			summary: l.summary + " (columns: " + strings.Join(l.columns, ",") + ")",
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&columns, "columns", "", "comma-separated columns for the table, dotted for nested fields (e.g. message_stats.publish)")
			},
			run: func(e *env, _ []string) error {
				cols := l.columns
				if columns != "" {
					cols = strings.Split(columns, ",")
				}
				return e.list(l, cols)
			},
		})
	}
	return out
}

// list fetches and prints one kind of object.
func (e *env) list(l listing, columns []string) error {
	var path string
	switch {
	case e.g.vhostSet && l.vhostPath != "":
		segs := []string{}
		for _, s := range strings.Split(l.vhostPath, "/") {
			if s == "{vhost}" {
				segs = append(segs, e.g.vhost)
				continue
			}
			segs = append(segs, s)
		}
		if !strings.Contains(l.vhostPath, "{vhost}") {
			segs = append(segs, e.g.vhost)
		}
		path = apiPath(segs...)
	default:
		path = apiPath(l.path)
	}
	body, err := e.c.get(path, nil)
	if err != nil {
		return err
	}
	if e.g.format == "json" {
		return e.printJSON(body)
	}
	var rows []map[string]any
	if err := decodeJSON(body, &rows, "GET "+path); err != nil {
		return err
	}
	return writeTable(e.stdout, rows, columns)
}
