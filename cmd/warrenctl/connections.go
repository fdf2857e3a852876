package main

import (
	"flag"
	"net/http"
)

func connectionCommands() []*command { return []*command{closeConnection()} }

func closeConnection() *command {
	var reason string
	return &command{
		name: "close connection", synopsis: "NAME",
		summary: "close a client connection (NAME as listed, e.g. \"127.0.0.1:50000 -> 127.0.0.1:5672\")",
		minArgs: 1, maxArgs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&reason, "reason", "", "text the client gets with the close (default: Closed via management plugin)")
		},
		run: func(e *env, a []string) error {
			r := request{method: http.MethodDelete, path: apiPath("connections", a[0])}
			if reason != "" {
				r.header = map[string]string{"X-Reason": reason}
			}
			if _, err := e.c.call(r); err != nil {
				return err
			}
			return e.say("connection %q closed", a[0])
		},
	}
}
