package main

import (
	"bufio"
	"flag"
	"fmt"
	"net/http"
	"strings"
)

func userCommands() []*command { return []*command{addUser(), deleteUser(), setPermissions()} }

func addUser() *command {
	var tags, hash string
	var fromStdin, noPassword bool
	return &command{
		name: "add user", synopsis: "NAME [PASSWORD]",
		summary: "create or update a user (password as argument, --password-stdin, --password-hash or --no-password)",
		minArgs: 1, maxArgs: 2,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&tags, "tags", "", "comma-separated tags: administrator, monitoring, policymaker, management")
			fs.BoolVar(&fromStdin, "password-stdin", false, "read the password from the first line of stdin")
			fs.StringVar(&hash, "password-hash", "", "RabbitMQ password hash (base64 of salt + SHA-256) instead of a password")
			fs.BoolVar(&noPassword, "no-password", false, "a user that cannot log in with a password")
		},
		run: func(e *env, a []string) error {
			body := map[string]any{"tags": tags}
			given := 0
			if len(a) == 2 {
				body["password"] = a[1]
				given++
			}
			if fromStdin {
				line, err := bufio.NewReader(e.stdin).ReadString('\n')
				line = strings.TrimRight(line, "\r\n")
				if line == "" {
					return fmt.Errorf("reading the password from stdin: %v", err)
				}
				body["password"] = line
				given++
			}
			if hash != "" {
				body["password_hash"] = hash
				given++
			}
			if noPassword {
				given++
			}
			if given != 1 {
				return usagef("give exactly one of PASSWORD, --password-stdin, --password-hash or --no-password")
			}
			resp, err := e.c.call(request{method: http.MethodPut, path: apiPath("users", a[0]), body: body})
			if err != nil {
				return err
			}
			verb := "created"
			if resp.status == http.StatusNoContent {
				verb = "updated"
			}
			return e.say("user %q %s", a[0], verb)
		},
	}
}

func deleteUser() *command {
	return &command{
		name: "delete user", synopsis: "NAME", summary: "delete a user",
		minArgs: 1, maxArgs: 1,
		run: func(e *env, a []string) error {
			if _, err := e.c.call(request{method: http.MethodDelete, path: apiPath("users", a[0])}); err != nil {
				return err
			}
			return e.say("user %q deleted", a[0])
		},
	}
}

func setPermissions() *command {
	return &command{
		name: "set permissions", synopsis: "USER CONFIGURE WRITE READ",
		summary: "grant USER regular expressions for configure, write and read in --vhost (like rabbitmqctl set_permissions)",
		minArgs: 4, maxArgs: 4,
		run: func(e *env, a []string) error {
			body := map[string]any{"configure": a[1], "write": a[2], "read": a[3]}
			if _, err := e.c.call(request{method: http.MethodPut, path: apiPath("permissions", e.g.vhost, a[0]), body: body}); err != nil {
				return err
			}
			return e.say("permissions of user %q in vhost %q set", a[0], e.g.vhost)
		},
	}
}
